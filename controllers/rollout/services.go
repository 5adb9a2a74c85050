package rollout

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// InstanceServices releases a departing replica's headless Service once the last member it served
// is gone: the render puts a finalizer on it so that members still draining keep resolving their
// peers. Members are counted by the Service's own ModelReplica (controller reference), so the next
// replica in the same slot never holds the old Service.
type InstanceServices struct {
	Client client.Client
}

// SetupWithManager watches the deployments' Services and Pods, mapping a Pod to its instance Service.
func (r *InstanceServices) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("instance_service").
		For(&corev1.Service{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			name, ok := naming.InstanceNameOf(o.GetLabels())
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
		})).
		Complete(r)
}

// Reconcile removes the finalizer of a Service being deleted once no member of its replica is left.
func (r *InstanceServices) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, req.NamespacedName, svc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if svc.DeletionTimestamp == nil || !slices.Contains(svc.Finalizers, workerv1.FinalizerInstanceMembers) {
		return reconcile.Result{}, nil
	}
	owner := metav1.GetControllerOf(svc)
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(svc.Namespace), client.MatchingFields{index.PodDeployment: svc.Labels[workerv1.LabelInstance]},
		client.MatchingLabels{
			workerv1.LabelComponent: svc.Labels[workerv1.LabelComponent], workerv1.LabelPodOrdinal: svc.Labels[workerv1.LabelPodOrdinal],
		}); err != nil {
		return reconcile.Result{}, err
	}
	if servesMembers(owner, pods.Items) {
		return reconcile.Result{}, nil
	}
	ctrl.LoggerFrom(ctx).Info("releasing the headless Service of a departed replica: no member left", "service", svc.Name, "podsWithItsLabels", len(pods.Items))
	patch := client.MergeFromWithOptions(svc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	svc.Finalizers = slices.DeleteFunc(svc.Finalizers, func(f string) bool { return f == workerv1.FinalizerInstanceMembers })
	if err := r.Client.Patch(ctx, svc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("releasing Service %s/%s: %w", svc.Namespace, svc.Name, err))
	}
	return reconcile.Result{}, nil
}

// servesMembers reports whether a departing instance Service still has a member to serve: one of its
// own replica's Pods, or any Pod of the slot still leaving (a replacement's Pods are created only
// once the slot's old Pods are gone, so a leaving Pod is always an old member).
func servesMembers(owner *metav1.OwnerReference, slotPods []corev1.Pod) bool {
	for i := range slotPods {
		p := &slotPods[i]
		if po := metav1.GetControllerOf(p); owner == nil || p.DeletionTimestamp != nil || (po != nil && po.UID == owner.UID) {
			return true
		}
	}
	return false
}
