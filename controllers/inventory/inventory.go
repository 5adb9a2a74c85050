package inventory

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// FieldOwner owns the parts of an InstanceType's status the inventory writes: status.detail's
// observed fields, status.accelerator or status.cpu, the phase and the three conditions. The
// entrance is the queues controller's; the shared, sliced and partitioned views are nobody's here.
const FieldOwner = "worker.gpustack.ai/inventory"

// PodSettle is how long a Pod's binding, ending or deletion waits before the types are counted
// again: the Pods of a deployment come and go in bursts, and one count per type covers them all.
// Every deployment of a type reads its status, so each write wakes each of them: a burst of Pods
// binding writes a type at most once per PodSettle.
const PodSettle = 10 * time.Second

// podNode indexes the bound-Pod cache by node.
const podNode = "spec.nodeName"

// Reconciler keeps every InstanceType's inventory. Nodes are read from the manager's cache (see
// members.CachedNode for what it keeps). What a node has free depends on every Pod bound to it:
// mdplane's own Pods are read from the manager's cache, which holds them already (index.PodNode);
// every other bound Pod of the cluster from a cache of its own (BoundPods), so that no Pod is
// watched twice.
type Reconciler struct {
	Client client.Client
	// Pods is the cache of the bound Pods that are not mdplane's; BoundPods makes it.
	Pods  cache.Cache
	Clock clock.PassiveClock
}

// othersPods selects the Pods the manager's cache does not hold: every Pod not labelled as
// mdplane's (naming.Managed), those without the label too.
func othersPods() labels.Selector {
	sel := labels.NewSelector()
	for k, v := range naming.Managed() {
		r, err := labels.NewRequirement(k, selection.NotEquals, []string{v})
		if err != nil {
			panic(fmt.Sprintf("the managed label %s=%s is not a valid requirement: %v", k, v, err))
		}
		sel = sel.Add(*r)
	}
	return sel
}

// BoundPods is a cache of every Pod bound to a node, in every namespace, that is not mdplane's,
// keeping of each only what PodRequest and holds read, indexed by node. The manager's cache holds
// mdplane's Pods; this one holds the rest of what a node's free capacity depends on.
func BoundPods(cfg *rest.Config, scheme *runtime.Scheme) (cache.Cache, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, ByObject: map[client.Object]cache.ByObject{
		&corev1.Pod{}: {Label: othersPods(), Field: fields.OneTermNotEqualSelector(podNode, ""), Transform: slimPod},
	}})
	if err != nil {
		return nil, fmt.Errorf("creating the cache of bound Pods: %w", err)
	}
	if err := c.IndexField(context.Background(), &corev1.Pod{}, podNode, func(o client.Object) []string {
		return []string{o.(*corev1.Pod).Spec.NodeName}
	}); err != nil {
		return nil, fmt.Errorf("indexing the bound Pods by node: %w", err)
	}
	return c, nil
}

// slimPod keeps a bound Pod's identity, node, phase and the containers' resources.
func slimPod(o any) (any, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	kept := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: pod.Spec.NodeName, Overhead: pod.Spec.Overhead},
		Status: corev1.PodStatus{Phase: pod.Status.Phase}}
	slim := func(cs []corev1.Container) []corev1.Container {
		out := make([]corev1.Container, len(cs))
		for i, c := range cs {
			out[i] = corev1.Container{Name: c.Name, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
		}
		return out
	}
	kept.Spec.Containers, kept.Spec.InitContainers = slim(pod.Spec.Containers), slim(pod.Spec.InitContainers)
	return kept, nil
}

// SetupWithManager runs the bound-Pod cache and watches InstanceTypes (created, or their spec
// edited: the inventory's own status writes do not wake them), Nodes (what the inventory reads of
// them changing) and bound Pods, mdplane's in the manager's cache and the others' in its own (bound,
// ended or deleted: counted once per PodSettle).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(r.Pods); err != nil {
		return fmt.Errorf("adding the cache of bound Pods: %w", err)
	}
	allTypes := func(ctx context.Context) []reconcile.Request {
		list := &workerv1.InstanceTypeList{}
		if err := mgr.GetClient().List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the InstanceTypes to count again")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
	later := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range allTypes(ctx) {
			q.AddAfter(req, PodSettle)
		}
	}
	pods := countAgain(later)
	return ctrl.NewControllerManagedBy(mgr).
		Named("instancetype_inventory").
		For(&workerv1.InstanceType{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
			return allTypes(ctx)
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return NodeChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
		}})).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, pods)).
		WatchesRawSource(source.Kind(r.Pods, &corev1.Pod{}, pods)).
		Complete(r)
}

// countAgain calls later when a Pod's event changes what a node holds: a Pod bound (created bound,
// or its node set), ended (its phase), being deleted, or deleted bound. The manager's cache holds
// mdplane's Pods before they are bound too, and an unbound Pod holds nothing of a node.
func countAgain(later func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])) handler.TypedFuncs[*corev1.Pod, reconcile.Request] {
	return handler.TypedFuncs[*corev1.Pod, reconcile.Request]{
		CreateFunc: func(ctx context.Context, e event.TypedCreateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.Object.Spec.NodeName != "" {
				later(ctx, q)
			}
		},
		UpdateFunc: func(ctx context.Context, e event.TypedUpdateEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, new := e.ObjectOld, e.ObjectNew
			if old.Spec.NodeName != new.Spec.NodeName || old.Status.Phase != new.Status.Phase || (old.DeletionTimestamp == nil) != (new.DeletionTimestamp == nil) {
				later(ctx, q)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.TypedDeleteEvent[*corev1.Pod], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.Object.Spec.NodeName != "" {
				later(ctx, q)
			}
		},
	}
}

// NodeChanged reports a change of what the inventory reads of a Node: its labels, whether it takes
// Pods (cordon, taints, readiness, deletion) and what it allocates. A heartbeat changes none.
func NodeChanged(old, new *corev1.Node) bool {
	oldReady, _ := Schedulable(old)
	newReady, _ := Schedulable(new)
	return oldReady != newReady || !equality.Semantic.DeepEqual(old.Labels, new.Labels) ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, new.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Status.Capacity, new.Status.Capacity) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints) || old.Spec.Unschedulable != new.Spec.Unschedulable
}

// Reconcile counts one InstanceType's nodes and the Pods on them and applies the status when it
// says something new.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	it := &workerv1.InstanceType{}
	if err := r.Client.Get(ctx, req.NamespacedName, it); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if it.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the Nodes: %w", err)
	}
	var pods []corev1.Pod
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !NodeMatches(it, n) {
			continue
		}
		mine, others := &corev1.PodList{}, &corev1.PodList{}
		if err := r.Client.List(ctx, mine, client.MatchingFields{index.PodNode: n.Name}); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing mdplane's Pods bound to Node %s: %w", n.Name, err)
		}
		if err := r.Pods.List(ctx, others, client.MatchingFields{podNode: n.Name}); err != nil {
			return reconcile.Result{}, fmt.Errorf("listing the Pods bound to Node %s: %w", n.Name, err)
		}
		pods = append(append(pods, mine.Items...), others.Items...)
	}
	s := ComputeStatus(it, nodes.Items, pods, metav1.NewTime(r.Clock.Now()))
	if !Changed(it, s) {
		return reconcile.Result{}, nil
	}
	if err := r.apply(ctx, it, s); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, nil
}

// apply writes the inventory's part of the status by server-side apply under FieldOwner, leaving
// the fields others own (the entrance, the other views) as they are.
func (r *Reconciler) apply(ctx context.Context, it *workerv1.InstanceType, s Status) error {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&workerv1.InstanceTypeStatus{Detail: s.Detail, Accelerator: s.Accelerator,
		CPU: s.CPU, Phase: s.Phase, PhaseMessage: s.PhaseMessage, Conditions: s.Conditions})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": workerv1.SchemeGroupVersion.String(), "kind": workerv1.InstanceTypeKind,
		"metadata": map[string]any{"name": it.Name}, "status": status}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying the inventory of InstanceType %s: %w", it.Name, err)
	}
	return nil
}
