package kvcachepools

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// FieldOwner owns the part of a pool's status this controller applies.
const FieldOwner = "worker.gpustack.ai/kv-cache-pools"

// Reconciler publishes each KVCachePool's endpoint from the backend it names.
type Reconciler struct {
	Client client.Client
	// Clock stamps a condition's transition; the real clock when nil.
	Clock clock.PassiveClock
}

// SetupWithManager watches pools (their spec, deletion, and the status fields the decision reads or
// writes, not their usage or domains) and the backends they name (their spec and deletion, not the
// status their own operator scrapes every few seconds), mapped to pools through the PoolBackend index.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("kvcachepool_endpoints").
		For(&workerv1.KVCachePool{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return poolChanged(e.ObjectOld, e.ObjectNew)
		}})).
		Watches(&workerv1.KVCacheBackend{}, handler.EnqueueRequestsFromMapFunc(r.poolsOfBackend), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
		}})).
		Complete(r)
}

// poolChanged is true when an update moves what PoolStatus reads or what it writes.
func poolChanged(oldObj, newObj client.Object) bool {
	was, okOld := oldObj.(*workerv1.KVCachePool)
	is, okNew := newObj.(*workerv1.KVCachePool)
	if !okOld || !okNew {
		return true
	}
	return was.Generation != is.Generation || (was.DeletionTimestamp == nil) != (is.DeletionTimestamp == nil) ||
		was.Status.ClientEndpoint != is.Status.ClientEndpoint || was.Status.Phase != is.Status.Phase || was.Status.PhaseMessage != is.Status.PhaseMessage ||
		!equality.Semantic.DeepEqual(meta.FindStatusCondition(was.Status.Conditions, workerv1.PoolClientEndpointPublished),
			meta.FindStatusCondition(is.Status.Conditions, workerv1.PoolClientEndpointPublished))
}

func (r *Reconciler) poolsOfBackend(ctx context.Context, o client.Object) []reconcile.Request {
	pools := &workerv1.KVCachePoolList{}
	if err := r.Client.List(ctx, pools, client.MatchingFields{index.PoolBackend: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(pools.Items))
	for _, p := range pools.Items {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}})
	}
	return out
}

// Reconcile reads the pool and its backend, decides with PoolStatus and applies the result when the
// pool does not already say it. A pool being deleted is left alone.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pool := &workerv1.KVCachePool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if pool.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	var backend *workerv1.KVCacheBackend
	if name := backendName(pool); name != "" {
		backend = &workerv1.KVCacheBackend{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, backend); apierrors.IsNotFound(err) {
			backend = nil
		} else if err != nil {
			return reconcile.Result{}, fmt.Errorf("reading KVCacheBackend %s of KVCachePool %s: %w", name, pool.Name, err)
		}
	}
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	s := PoolStatus(pool, backend, metav1.NewTime(clk.Now()))
	if !Changed(pool, s) {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, r.apply(ctx, pool.Name, s)
}

// applied is the status document the apply sends: the fields left empty are not in it.
type applied struct {
	ClientEndpoint string             `json:"clientEndpoint,omitempty"`
	Phase          string             `json:"phase,omitempty"`
	PhaseMessage   string             `json:"phaseMessage,omitempty"`
	Conditions     []metav1.Condition `json:"conditions"`
}

// apply server-side applies s under FieldOwner: the fields it leaves out and this owner held before
// are withdrawn, the ones other owners hold stay.
func (r *Reconciler) apply(ctx context.Context, pool string, s Status) error {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&applied{ClientEndpoint: s.ClientEndpoint, Phase: s.Phase,
		PhaseMessage: s.PhaseMessage, Conditions: []metav1.Condition{s.Condition}})
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": workerv1.SchemeGroupVersion.String(), "kind": workerv1.KVCachePoolKind,
		"metadata": map[string]any{"name": pool}, "status": status}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("publishing the endpoint of KVCachePool %s: %w", pool, err)
	}
	return nil
}
