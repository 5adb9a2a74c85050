package main

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/pacing"
	"github.com/mdplane/mdplane/internal/plan"
	"github.com/mdplane/mdplane/internal/schemacheck"
)

// clusterState is what plan reads from a cluster: the stored deployment and what its render needs
// (as documents, like the files of an offline plan), and a client to observe its replicas with.
type clusterState struct {
	client          client.Client
	namespace, name string
	stored          []schemacheck.Document
}

// connect builds a client from the kubeconfig (an explicit path, else KUBECONFIG, else
// ~/.kube/config) and context, with mdplane's, Kubernetes' and Kueue's types.
func connect(kubeconfig, kubeContext string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme, kueue.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// readCluster reads the stored deployment and the objects its render needs: the InstanceTypes,
// KVCachePools and KVCacheBackends (cluster-scoped), the namespace's KVCachePoolBindings and
// ModelArtifacts, and the mdplane-settings EnvironmentConfig when there is one.
func readCluster(ctx context.Context, kubeconfig, kubeContext, namespace, name string) (*clusterState, error) {
	c, err := connect(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	s := &clusterState{client: c, namespace: namespace, name: name}
	md := &unstructured.Unstructured{}
	md.SetGroupVersionKind(workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind))
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, md); err != nil {
		return nil, fmt.Errorf("reading the stored ModelDeployment %s/%s: %w", namespace, name, err)
	}
	s.add("cluster", md)
	lists := []struct {
		gvk        schema.GroupVersionKind
		namespaced bool
	}{
		{workerv1.SchemeGroupVersion.WithKind(workerv1.InstanceTypeKind), false},
		{workerv1.SchemeGroupVersion.WithKind(workerv1.KVCachePoolKind), false},
		{workerv1.SchemeGroupVersion.WithKind(workerv1.KVCacheBackendKind), false},
		{workerv1.SchemeGroupVersion.WithKind(workerv1.KVCachePoolBindingKind), true},
		{workerv1.SchemeGroupVersion.WithKind(workerv1.ModelArtifactKind), true},
	}
	for _, l := range lists {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(l.gvk.GroupVersion().WithKind(l.gvk.Kind + "List"))
		var opts []client.ListOption
		if l.namespaced {
			opts = append(opts, client.InNamespace(namespace))
		}
		if err := c.List(ctx, list, opts...); err != nil {
			return nil, fmt.Errorf("listing %ss: %w", l.gvk.Kind, err)
		}
		for i := range list.Items {
			s.add("cluster", &list.Items[i])
		}
	}
	env := &unstructured.Unstructured{}
	env.SetGroupVersionKind(settings.GroupVersionKind)
	switch err := c.Get(ctx, types.NamespacedName{Name: settings.EnvironmentConfigName}, env); {
	case err == nil:
		s.add("cluster", env)
	case !apierrors.IsNotFound(err) && !apimeta.IsNoMatchError(err): // Crossplane absent: no Settings
		return nil, fmt.Errorf("reading the %s EnvironmentConfig: %w", settings.EnvironmentConfigName, err)
	}
	return s, nil
}

// add keeps an object as a document without what the API server writes (it is judged and rendered
// as it would be applied).
func (s *clusterState) add(source string, obj *unstructured.Unstructured) {
	obj = obj.DeepCopy()
	for _, field := range []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", field)
	}
	s.stored = append(s.stored, schemacheck.Document{Source: fmt.Sprintf("%s:%s/%s", source, obj.GetKind(), obj.GetName()), Object: obj})
}

// observe reads the deployment's ModelRoles, ModelReplicas, Pods and the namespace's Workloads into
// the slots the rollout controller would pace, against the edited render's roles, and the free quota
// of the deployment's queue.
func (s *clusterState) observe(ctx context.Context, in *plan.Input) error {
	ns := client.InNamespace(s.namespace)
	selector := client.MatchingLabels{workerv1.LabelInstance: s.name}
	roles, replicas, pods, workloads := &v1alpha1.ModelRoleList{}, &v1alpha1.ModelReplicaList{}, &corev1.PodList{}, &kueue.WorkloadList{}
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{roles, []client.ListOption{ns, selector}}, {replicas, []client.ListOption{ns, selector}}, {pods, []client.ListOption{ns, selector}}, {workloads, []client.ListOption{ns}}} {
		if err := s.client.List(ctx, l.list, l.opts...); err != nil {
			return fmt.Errorf("reading the deployment's objects: %w", err)
		}
	}
	in.Live = map[string]plan.LiveRole{}
	for i := range in.Edited.Roles {
		edited := in.Edited.Roles[i].DeepCopy()
		in.Live[edited.Spec.RoleName] = liveRole(edited, roles.Items, replicas.Items, pods.Items, workloads.Items)
	}
	if err := s.borrowing(ctx, in); err != nil {
		return err
	}
	free, err := s.freeQuota(ctx, in.Edited.QueueName(), workloads.Items)
	in.Free = free
	return err
}

// borrowing reads what the InstanceTypes of the edited deployment's roles say of borrowing from
// their cohort (InstanceType.Borrowing), each type once.
func (s *clusterState) borrowing(ctx context.Context, in *plan.Input) error {
	if in.Edited.Deployment == nil {
		return nil
	}
	seen := map[string]bool{}
	for _, role := range in.Edited.Deployment.Spec.Roles {
		if seen[role.InstanceType] {
			continue
		}
		seen[role.InstanceType] = true
		it := &workerv1.InstanceType{}
		if err := s.client.Get(ctx, client.ObjectKey{Name: role.InstanceType}, it); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return fmt.Errorf("reading InstanceType %s: %w", role.InstanceType, err)
		}
		if b := it.Borrowing(); b != "" {
			in.Borrowing = append(in.Borrowing, b)
		}
	}
	return nil
}

// liveRole is a role as the rollout controller reads it, its slots judged against the edited
// render's ModelRole: the live role, the ordinal its status reports replacing, its slots, and what each
// ordinal's own standing Pods request.
func liveRole(edited *v1alpha1.ModelRole, roles []v1alpha1.ModelRole, replicas []v1alpha1.ModelReplica, pods []corev1.Pod, workloads []kueue.Workload) plan.LiveRole {
	live := plan.LiveRole{InFlight: -1, Held: map[int32]corev1.ResourceList{}}
	for j := range roles {
		if roles[j].Spec.RoleName == edited.Spec.RoleName {
			live.Role = &roles[j]
			if rep := live.Role.Status.Replacement; rep != nil && rep.Ordinal != nil {
				live.InFlight = *rep.Ordinal
			}
		}
	}
	var mine []v1alpha1.ModelReplica
	for _, r := range replicas {
		if r.Spec.RoleName == edited.Spec.RoleName {
			mine = append(mine, r)
		}
	}
	var rolePods []corev1.Pod
	for _, p := range pods {
		if p.Labels[workerv1.LabelComponent] != edited.Spec.RoleName {
			continue
		}
		rolePods = append(rolePods, p)
		o, err := strconv.ParseInt(p.Labels[workerv1.LabelPodOrdinal], 10, 32)
		if err != nil || p.DeletionTimestamp != nil || metav1.GetControllerOf(&p) == nil || pacing.Gated(&p) {
			continue // a queued replica holds no reservation
		}
		held := live.Held[int32(o)]
		if held == nil {
			held = corev1.ResourceList{}
		}
		for _, c := range p.Spec.Containers {
			for n, q := range c.Resources.Requests {
				have := held[n]
				have.Add(q)
				held[n] = have
			}
		}
		live.Held[int32(o)] = held
	}
	live.Slots = pacing.SlotsOf(edited, mine, rolePods, workloads)
	return live
}

// freeQuota is what the ClusterQueue behind the deployment's LocalQueue has free; nil when either
// is missing.
func (s *clusterState) freeQuota(ctx context.Context, queue string, workloads []kueue.Workload) (corev1.ResourceList, error) {
	if queue == "" {
		return nil, nil
	}
	lq := &kueue.LocalQueue{}
	if err := s.client.Get(ctx, types.NamespacedName{Namespace: s.namespace, Name: queue}, lq); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // no queue yet: free stays unknown
		}
		return nil, fmt.Errorf("reading LocalQueue %s/%s: %w", s.namespace, queue, err)
	}
	cq := &kueue.ClusterQueue{}
	if err := s.client.Get(ctx, types.NamespacedName{Name: string(lq.Spec.ClusterQueue)}, cq); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading ClusterQueue %s: %w", lq.Spec.ClusterQueue, err)
	}
	return plan.FreeOf(cq, workloads), nil
}
