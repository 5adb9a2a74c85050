package queues

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// AnnotationTopologyLevels on an InstanceType turns on Kueue's Topology-Aware Scheduling for its
// queue: comma-separated node label keys, widest first; kubernetes.io/hostname is always the last
// level and need not be listed.
const AnnotationTopologyLevels = "worker.gpustack.ai/topology-levels"

// LabelInstanceType marks the flavors and Topologies mdplane made for a type, so the ones a change
// replaced can be found and deleted. Its value is the name part of the type's node label: the type
// name, cut and hashed past 63 characters.
const LabelInstanceType = "worker.gpustack.ai/instance-type"

// maxTopologyLevels is how many levels a Kueue Topology holds, the hostname level included.
const maxTopologyLevels = 16

// maxObjectName is the length of a DNS subdomain name, which flavors and Topologies are named by.
const maxObjectName = 253

// TopologyLevels are the node label keys of the type's Topology, widest first, hostname last; nil
// when the type does not ask for one. A listed hostname is accepted only as the last key.
func TopologyLevels(it *workerv1.InstanceType) ([]string, error) {
	value, ok := it.Annotations[AnnotationTopologyLevels]
	if !ok || strings.TrimSpace(value) == "" {
		return nil, nil
	}
	wayOut := "list distinct node label keys, widest first, such as topology.kubernetes.io/zone,topology.gpustack.ai/rack, or remove the annotation"
	keys := strings.Split(value, ",")
	for i := range keys {
		keys[i] = strings.TrimSpace(keys[i])
	}
	if keys[len(keys)-1] == corev1.LabelHostname {
		keys = keys[:len(keys)-1]
	}
	for i, key := range keys {
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			return nil, fmt.Errorf("annotation %s %q: level %q is not a node label key (%s): %s", AnnotationTopologyLevels, value, key, strings.Join(errs, "; "), wayOut)
		}
		if key == corev1.LabelHostname {
			return nil, fmt.Errorf("annotation %s %q: %s can only be the last level: %s", AnnotationTopologyLevels, value, key, wayOut)
		}
		if slices.Contains(keys[:i], key) {
			return nil, fmt.Errorf("annotation %s %q: level %q is listed twice: %s", AnnotationTopologyLevels, value, key, wayOut)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("annotation %s %q names no level above the node: %s", AnnotationTopologyLevels, value, wayOut)
	}
	if len(keys)+1 > maxTopologyLevels {
		return nil, fmt.Errorf("annotation %s %q: %d levels and the hostname are more than the %d a Kueue Topology holds: %s",
			AnnotationTopologyLevels, value, len(keys), maxTopologyLevels, wayOut)
	}
	return append(keys, corev1.LabelHostname), nil
}

// topologyLevels are the type's levels, or nil with the reason logged when the annotation is wrong:
// the queue then works without Topology-Aware Scheduling.
func topologyLevels(ctx context.Context, it *workerv1.InstanceType) []string {
	levels, err := TopologyLevels(it)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Topology-Aware Scheduling stays off for the type: "+err.Error(), "instanceType", it.Name)
		return nil
	}
	return levels
}

// typeLabelValue is LabelInstanceType's value for a type.
func typeLabelValue(instanceType string) string {
	return strings.TrimPrefix(workerv1.InstanceTypeNodeLabel(instanceType), workerv1.LabelInstanceTypePrefix)
}

// ownedLabels label a flavor or a Topology mdplane made for the type.
func ownedLabels(instanceType string) map[string]string {
	out := map[string]string{LabelInstanceType: typeLabelValue(instanceType)}
	for k, v := range managedLabels {
		out[k] = v
	}
	return out
}

// hashedName is the type's name followed by an 8-hex FNV-1a hash of what the object is made of,
// cut to fit a name: an immutable object changes by taking a new name.
func hashedName(instanceType string, of any) string {
	data, _ := json.Marshal(of)
	h := fnv.New32a()
	_, _ = h.Write(data)
	suffix := fmt.Sprintf("-%08x", h.Sum32())
	head := instanceType
	if len(head)+len(suffix) > maxObjectName {
		head = strings.TrimRight(head[:maxObjectName-len(suffix)], "-.")
	}
	return head + suffix
}

// topology is the type's Topology of levels, named by their hash, since Kueue keeps levels
// immutable.
func topology(instanceType string, levels []string) *kueueac.TopologyApplyConfiguration {
	spec := kueueac.TopologySpec()
	for _, l := range levels {
		spec.WithLevels(kueueac.TopologyLevel().WithNodeLabel(l))
	}
	return kueueac.Topology(hashedName(instanceType, levels)).WithLabels(ownedLabels(instanceType)).WithSpec(spec)
}

// deleteReplaced deletes the flavors mdplane made for the type but the one named current that no
// ClusterQueue refers to, and its Topologies but the one named currentTopology ("" for none) that no
// flavor left refers to.
func (r *Reconciler) deleteReplaced(ctx context.Context, instanceType, current, currentTopology string) error {
	owned := client.MatchingLabels{LabelInstanceType: typeLabelValue(instanceType)}
	flavors := &kueue.ResourceFlavorList{}
	if err := r.Client.List(ctx, flavors, owned); err != nil {
		return fmt.Errorf("listing the ResourceFlavors of InstanceType %s: %w", instanceType, err)
	}
	queues := &kueue.ClusterQueueList{}
	if err := r.Client.List(ctx, queues); err != nil {
		return fmt.Errorf("listing the ClusterQueues: %w", err)
	}
	referenced := referencedFlavors(queues.Items)
	inUse := map[string]bool{currentTopology: true}
	for i := range flavors.Items {
		rf := &flavors.Items[i]
		if rf.Name == current || referenced[rf.Name] {
			if rf.Spec.TopologyName != nil {
				inUse[string(*rf.Spec.TopologyName)] = true
			}
			continue
		}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, rf)); err != nil {
			return fmt.Errorf("deleting ResourceFlavor %s, replaced by %s: %w", rf.Name, current, err)
		}
	}
	topologies := &kueue.TopologyList{}
	if err := r.Client.List(ctx, topologies, owned); err != nil {
		return fmt.Errorf("listing the Topologies of InstanceType %s: %w", instanceType, err)
	}
	for i := range topologies.Items {
		if inUse[topologies.Items[i].Name] {
			continue
		}
		if err := client.IgnoreNotFound(r.Client.Delete(ctx, &topologies.Items[i])); err != nil {
			return fmt.Errorf("deleting Topology %s, no longer used: %w", topologies.Items[i].Name, err)
		}
	}
	return nil
}

func referencedFlavors(queues []kueue.ClusterQueue) map[string]bool {
	out := map[string]bool{}
	for _, cq := range queues {
		for _, rg := range cq.Spec.ResourceGroups {
			for _, f := range rg.Flavors {
				out[string(f.Name)] = true
			}
		}
	}
	return out
}
