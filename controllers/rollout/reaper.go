package rollout

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/index"
)

// WorkloadReaper deletes the Workload of a replica group none of whose Pods is standing any more. A
// serving group is never finished, so Kueue keeps its finalizer on the departing Pods until the
// Workload goes: without this, a scale-down, a replacement or a deleted deployment would leave its
// Pods terminating for ever and their quota held.
type WorkloadReaper struct {
	Client client.Client
	// Reader reads a Workload's owner Pod the cache does not hold yet; the Client when nil.
	Reader client.Reader
	// Deletes are the deletes the cache has not shown yet, shared with the pacer; none when nil.
	Deletes *expectations.Deletes
}

// reaperWorkers is how many groups are reaped at once. A deleted deployment strands all its groups
// within seconds, and a reap's time is mostly its delete's round trip: one at a time reaps about
// ten a second, and Kueue keeps every Pod of a group waiting on it.
const reaperWorkers = 8

// SetupWithManager watches Workloads and the deployments' Pods, mapping a Pod to its group.
func (r *WorkloadReaper) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("stranded_workload").
		For(&kueue.Workload{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			group := o.GetLabels()[workerv1.LabelPodGroupName]
			if group == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: group}}}
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: reaperWorkers}).
		Complete(r)
}

// Reconcile deletes the Workload when its group has members and every one is terminating. A group
// without any Pod is left to the garbage collector (its Pods own the Workload).
func (r *WorkloadReaper) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(req.Namespace), client.MatchingFields{index.PodGroup: req.Name},
		client.MatchingLabels(naming.Managed())); err != nil {
		return reconcile.Result{}, err
	}
	if !Stranded(pods.Items) {
		return reconcile.Result{}, nil
	}
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if wl.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	if departed, err := r.ownedByLeaving(ctx, wl, pods.Items); err != nil || !departed {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).Info("deleting the Workload of a departed replica group", "workload", req.Name, "pods", len(pods.Items))
	if err := deleteOnce(ctx, r.Client, r.Deletes, wl); err != nil {
		return reconcile.Result{}, fmt.Errorf("deleting Workload %s/%s of a departed group: %w", req.Namespace, req.Name, err)
	}
	return reconcile.Result{}, nil
}

// ownedByLeaving reports whether every Pod the Workload names as its owner is leaving or gone. The
// slot's next replica shares the group name: Kueue makes it a Workload of the same name as soon as
// its Pods exist, and a cache that has not shown those Pods yet must not have that new Workload taken
// for the departed group's (its Pods would be stopped as they were admitted). An owner the cache
// does not hold is read from the API server.
func (r *WorkloadReaper) ownedByLeaving(ctx context.Context, wl *kueue.Workload, pods []corev1.Pod) (bool, error) {
	leaving := map[types.UID]bool{}
	for _, p := range pods {
		leaving[p.UID] = p.DeletionTimestamp != nil
	}
	for _, o := range wl.OwnerReferences {
		if o.Kind != "Pod" {
			continue
		}
		if l, known := leaving[o.UID]; known {
			if !l {
				return false, nil
			}
			continue
		}
		pod := &corev1.Pod{}
		err := r.reader().Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: o.Name}, pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return false, err
		case pod.UID == o.UID && pod.DeletionTimestamp == nil:
			return false, nil
		}
	}
	return true, nil
}

func (r *WorkloadReaper) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// Stranded reports whether a group has Pods and none of them is standing.
func Stranded(pods []corev1.Pod) bool {
	if len(pods) == 0 {
		return false
	}
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			return false
		}
	}
	return true
}
