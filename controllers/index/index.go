// Package index names the cache indexes the controllers look objects up by, so that a reconcile asks
// the cache for the few Pods or deployments it needs instead of scanning a namespace (or the
// cluster) and filtering.
package index

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The indexed fields, for client.MatchingFields.
const (
	// PodGroup is a Pod's Kueue pod group (its Workload's name).
	PodGroup = "mdplane.podGroup"
	// PodDeployment is the ModelDeployment a Pod belongs to (its instance label).
	PodDeployment = "mdplane.podDeployment"
	// PodController is the UID of a Pod's controller (its ModelReplica).
	PodController = "mdplane.podController"
	// PodSlot is a Pod's replica slot: deployment, role and ordinal (SlotKey).
	PodSlot = "mdplane.podSlot"
	// PodRole is a Pod's role: deployment and role (RoleKey), so that a pass over a role's slots
	// reads its Pods without matching every Pod of the deployment against a selector.
	PodRole = "mdplane.podRole"
	// DeploymentInstanceType is every InstanceType a ModelDeployment's roles name.
	DeploymentInstanceType = "mdplane.instanceType"
	// DeploymentArtifact is the ModelArtifact a ModelDeployment names (spec.model.artifactRef).
	DeploymentArtifact = "mdplane.artifact"
	// RoleGroup is every pod group (Workload name) of a ModelRole's declared slots, so that a
	// Workload outliving its Pods still finds its role when it goes.
	RoleGroup = "mdplane.roleGroup"
	// NodeImage is every name of every image a Node holds (status.images[].names), so that Image
	// delivery's placement finds the Nodes holding a reference without scanning the cluster's.
	NodeImage = "mdplane.nodeImage"
	// PoolBackend is the KVCacheBackend a KVCachePool names (spec.backends), so that a backend's
	// change reaches its pools without a scan of every pool.
	PoolBackend = "mdplane.poolBackend"
	// PodNode is the node a managed Pod is bound to (spec.nodeName), so that a node that stops
	// reporting reaches the replicas standing on it, and the inventory counts what mdplane's Pods
	// hold of each node.
	PodNode = "mdplane.podNode"
	// WorkloadUID is a Workload's UID, which Kueue's preemption message names the preemptor by.
	WorkloadUID = "mdplane.workloadUID"
)

// Field is one index: the kind it is on, its name and how a value is read.
type Field struct {
	Object  client.Object
	Name    string
	Extract client.IndexerFunc
}

// Fields are every index the controllers use.
var Fields = []Field{
	{&corev1.Pod{}, PodGroup, label(workerv1.LabelPodGroupName)},
	{&corev1.Pod{}, PodDeployment, label(workerv1.LabelInstance)},
	{&corev1.Pod{}, PodController, podController},
	{&corev1.Pod{}, PodSlot, podSlot},
	{&corev1.Pod{}, PodRole, podRole},
	{&corev1.Pod{}, PodNode, podNode},
	{&workerv1.ModelDeployment{}, DeploymentInstanceType, instanceTypes},
	{&workerv1.ModelDeployment{}, DeploymentArtifact, artifact},
	{&v1alpha1.ModelRole{}, RoleGroup, roleGroups},
	{&corev1.Node{}, NodeImage, nodeImages},
	{&workerv1.KVCachePool{}, PoolBackend, poolBackends},
	{&kueue.Workload{}, WorkloadUID, uid},
}

// Register adds every index to the manager's cache, once for all the controllers.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	for _, f := range Fields {
		if err := indexer.IndexField(ctx, f.Object, f.Name, f.Extract); err != nil {
			return fmt.Errorf("indexing %T by %s: %w", f.Object, f.Name, err)
		}
	}
	return nil
}

// label indexes an object by a label's value, when it carries the label (an empty value too), so
// that a lookup matches what the label selector key=value it replaces matched.
func label(key string) client.IndexerFunc {
	return func(o client.Object) []string {
		if v, ok := o.GetLabels()[key]; ok {
			return []string{v}
		}
		return nil
	}
}

// RoleKey is the PodRole value of a role.
func RoleKey(deployment, role string) string {
	return deployment + "/" + role
}

// SlotKey is the PodSlot value of a role's slot: its role's key and its ordinal.
func SlotKey(deployment, role, ordinal string) string {
	return RoleKey(deployment, role) + "/" + ordinal
}

// roleOf is the deployment and role a Pod's labels name; ok is false when they name none.
func roleOf(o client.Object) (deployment, role string, ok bool) {
	l := o.GetLabels()
	deployment, okD := l[workerv1.LabelInstance]
	role, okR := l[workerv1.LabelComponent]
	return deployment, role, okD && okR
}

// podRole indexes a Pod by the role its labels name, when they name one.
func podRole(o client.Object) []string {
	if deployment, role, ok := roleOf(o); ok {
		return []string{RoleKey(deployment, role)}
	}
	return nil
}

// podSlot indexes a Pod by the slot its labels name, when they name one.
func podSlot(o client.Object) []string {
	deployment, role, ok := roleOf(o)
	ordinal, okO := o.GetLabels()[workerv1.LabelPodOrdinal]
	if !ok || !okO {
		return nil
	}
	return []string{SlotKey(deployment, role, ordinal)}
}

func uid(o client.Object) []string {
	if o.GetUID() == "" {
		return nil
	}
	return []string{string(o.GetUID())}
}

func podController(o client.Object) []string {
	if owner := metav1.GetControllerOf(o); owner != nil {
		return []string{string(owner.UID)}
	}
	return nil
}

func instanceTypes(o client.Object) []string {
	md, ok := o.(*workerv1.ModelDeployment)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, role := range md.Spec.Roles {
		if !seen[role.InstanceType] {
			seen[role.InstanceType] = true
			out = append(out, role.InstanceType)
		}
	}
	return out
}

func artifact(o client.Object) []string {
	md, ok := o.(*workerv1.ModelDeployment)
	if !ok || md.Spec.Model.ArtifactRef == nil {
		return nil
	}
	return []string{md.Spec.Model.ArtifactRef.Name}
}

func roleGroups(o client.Object) []string {
	role, ok := o.(*v1alpha1.ModelRole)
	if !ok {
		return nil
	}
	out := make([]string, 0, role.Spec.Replicas)
	for ordinal := range role.Spec.Replicas {
		out = append(out, workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, ordinal))
	}
	return out
}

// podNode indexes a cached Pod by the node it is bound to: every Pod the manager's cache holds is
// mdplane's, and the inventory counts each of them on its node.
func podNode(o client.Object) []string {
	p, ok := o.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return nil
	}
	return []string{p.Spec.NodeName}
}

// nodeImages indexes a Node by each name of the images it holds, once each.
func nodeImages(o client.Object) []string {
	node, ok := o.(*corev1.Node)
	if !ok {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			if !seen[name] {
				seen[name] = true
				out = append(out, name)
			}
		}
	}
	return out
}

// poolBackends indexes a KVCachePool by the backends it names (one, by the schema).
func poolBackends(o client.Object) []string {
	pool, ok := o.(*workerv1.KVCachePool)
	if !ok {
		return nil
	}
	return pool.Spec.Backends
}
