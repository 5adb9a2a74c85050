package kvcachepools

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/tenantclaim"
)

// ClaimFieldOwner owns the DomainClaimed condition of a Binding's status, and its phase and quotas
// when the claim reconciler summarizes.
const ClaimFieldOwner = "worker.gpustack.ai/kv-cache-domain-claims"

// loserRecheck is how often a Binding that lost its domain's claim looks again, besides the events
// of the holder going: a holder whose pool is deleted gives the loser no event of its own.
const loserRecheck = 5 * time.Minute

// ClaimReconciler takes each KVCachePoolBinding's domain claim (package tenantclaim) on its pool's
// master, and says on the Binding whether it holds it (DomainClaimed). The webhook takes the claim
// at admission when the pool exists; this takes it for a Binding created before its pool, and for a
// Binding whose earlier holder went. A Binding that does not hold its claim gets no cache client. A
// Binding's claims are released once it is gone.
type ClaimReconciler struct {
	// Client reads Bindings and pools from the cache and writes claims and the condition.
	Client client.Client
	// Reader reads uncached: the Leases (never cached) and a Binding's absence before its release.
	Reader client.Reader
	// Namespace holds the claim Leases: the operator's own.
	Namespace string
	// Clock stamps the condition's transition; the real clock when nil.
	Clock clock.PassiveClock
	// Summarize also applies the Binding's phase and quotas (SummarizeBinding), where no other
	// operator writes them (--kv-cache-pool-endpoints).
	Summarize bool
}

// SetupWithManager watches Bindings (their creation, deletion and the condition this writes), the
// deletion of a Binding as the others' chance at its domain name, and the creation and deletion
// of pools, which make a Binding's master known or unknown.
func (r *ClaimReconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("kvcachepoolbinding_claims").
		For(&workerv1.KVCachePoolBinding{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return claimInputsChanged(e.ObjectOld, e.ObjectNew)
		}})).
		Watches(&workerv1.KVCachePoolBinding{}, handler.Funcs{DeleteFunc: r.afterRelease}).
		Watches(&workerv1.KVCachePool{}, handler.EnqueueRequestsFromMapFunc(r.bindingsOfPool), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool { return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() }})).
		Complete(r)
}

// claimInputsChanged is true when an update moves the Binding's deletion or the status this
// controller owns (another writer's edit is taken back).
func claimInputsChanged(oldObj, newObj client.Object) bool {
	was, okOld := oldObj.(*workerv1.KVCachePoolBinding)
	is, okNew := newObj.(*workerv1.KVCachePoolBinding)
	if !okOld || !okNew {
		return true
	}
	a, b := meta.FindStatusCondition(was.Status.Conditions, workerv1.BindingDomainClaimed), meta.FindStatusCondition(is.Status.Conditions, workerv1.BindingDomainClaimed)
	return (was.DeletionTimestamp == nil) != (is.DeletionTimestamp == nil) || was.Generation != is.Generation || (a == nil) != (b == nil) ||
		(a != nil && (a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message)) ||
		was.Status.Phase != is.Status.Phase || was.Status.PhaseMessage != is.Status.PhaseMessage ||
		!equality.Semantic.DeepEqual(was.Status.EffectiveQuota, is.Status.EffectiveQuota) ||
		!equality.Semantic.DeepEqual(was.Status.RequestedQuota, is.Status.RequestedQuota)
}

// releaseSettle is how long after a Binding's deletion the others of its domain look again: by then
// the gone Binding's own reconcile has released its claim, which they would otherwise find in flight.
const releaseSettle = 2 * time.Second

// afterRelease enqueues the other Bindings of a deleted Binding's domain name, once its claim is
// likely released.
func (r *ClaimReconciler) afterRelease(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	for _, req := range r.bindingsOfDomain(ctx, e.Object) {
		q.AddAfter(req, releaseSettle)
	}
}

// bindingsOfDomain are the other Bindings declaring the domain name of the Binding that went.
func (r *ClaimReconciler) bindingsOfDomain(ctx context.Context, o client.Object) []reconcile.Request {
	gone, ok := o.(*workerv1.KVCachePoolBinding)
	if !ok {
		return nil
	}
	return r.bindings(ctx, func(b *workerv1.KVCachePoolBinding) bool {
		return validation.DomainName(b) == validation.DomainName(gone)
	})
}

// bindingsOfPool are the Bindings naming the pool.
func (r *ClaimReconciler) bindingsOfPool(ctx context.Context, o client.Object) []reconcile.Request {
	return r.bindings(ctx, func(b *workerv1.KVCachePoolBinding) bool { return b.Spec.PoolRef.Name == o.GetName() })
}

func (r *ClaimReconciler) bindings(ctx context.Context, keep func(*workerv1.KVCachePoolBinding) bool) []reconcile.Request {
	var list workerv1.KVCachePoolBindingList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if keep(&list.Items[i]) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: list.Items[i].Namespace, Name: list.Items[i].Name}})
		}
	}
	return out
}

// Reconcile claims the Binding's domain and reports it, or releases the claims of a Binding gone. A
// Binding being deleted keeps its claim: its deployments still hold the domain until it is gone.
func (r *ClaimReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	holder := tenantclaim.Holder(req.Namespace, req.Name)
	b := &workerv1.KVCachePoolBinding{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.release(ctx, req.NamespacedName, holder)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if b.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	now := r.now()
	backend, known, err := tenantclaim.Master(ctx, r.Client, b.Spec.PoolRef.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !known {
		return reconcile.Result{}, r.report(ctx, b, nil, tenantclaim.Condition(b, "", tenantclaim.Outcome{}, now))
	}
	pool := &workerv1.KVCachePool{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: b.Spec.PoolRef.Name}, pool); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	c := tenantclaim.For(r.Namespace, backend, b)
	out, err := tenantclaim.Take(ctx, r.Reader, r.Client, c, tenantclaim.BindingDeclares(r.Client, backend, c.Domain), now.Time)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.report(ctx, b, pool, tenantclaim.Condition(b, r.Namespace+"/"+out.Lease, out, now)); err != nil {
		return reconcile.Result{}, err
	}
	if out.Held {
		return reconcile.Result{}, nil
	}
	// A holder the API server no longer has (or is deleting) releases the claim once its own
	// reconcile runs, which a loaded queue may delay past the one look afterRelease schedules, and
	// a claim taken less than InFlight ago looks in flight meanwhile: look again shortly until it
	// is released. A webhook's create not stored yet looks the same, and is looked at as often.
	if leaving, err := r.holderLeaving(ctx, out.Holder); err != nil || leaving {
		return reconcile.Result{RequeueAfter: releaseSettle}, err
	}
	if out.InFlight {
		return reconcile.Result{RequeueAfter: tenantclaim.InFlight}, nil
	}
	return reconcile.Result{RequeueAfter: loserRecheck}, nil
}

// holderLeaving reports whether the claim's holder Binding (<namespace>/<name>) is gone from the
// API server or being deleted.
func (r *ClaimReconciler) holderLeaving(ctx context.Context, holder string) (bool, error) {
	key, ok := tenantclaim.HolderBinding(holder)
	if !ok {
		return false, nil
	}
	b := &workerv1.KVCachePoolBinding{}
	err := r.Reader.Get(ctx, key, b)
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return err == nil && b.DeletionTimestamp != nil, err
}

// release deletes the claims of a Binding the cache says is gone, once the API server agrees: a
// Binding created again under the name keeps what it holds.
func (r *ClaimReconciler) release(ctx context.Context, key types.NamespacedName, holder string) error {
	err := r.Reader.Get(ctx, key, &workerv1.KVCachePoolBinding{})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	return tenantclaim.Release(ctx, r.Reader, r.Client, r.Namespace, holder)
}

func (r *ClaimReconciler) now() metav1.Time {
	if r.Clock == nil {
		return metav1.NewTime(clock.RealClock{}.Now())
	}
	return metav1.NewTime(r.Clock.Now())
}

// report applies the condition (and, when r.Summarize, the summary) under ClaimFieldOwner when the
// Binding does not already say it; pool is the Binding's pool, nil when unknown.
func (r *ClaimReconciler) report(ctx context.Context, b *workerv1.KVCachePoolBinding, pool *workerv1.KVCachePool, c metav1.Condition) error {
	type applied struct {
		Conditions []metav1.Condition `json:"conditions"`
		*BindingSummary
	}
	status := applied{Conditions: []metav1.Condition{c}}
	upToDate := false
	if was := meta.FindStatusCondition(b.Status.Conditions, c.Type); was != nil && was.Status == c.Status && was.Reason == c.Reason &&
		was.Message == c.Message && was.ObservedGeneration == c.ObservedGeneration {
		upToDate = true
	}
	if r.Summarize {
		summary := SummarizeBinding(b, pool, c)
		status.BindingSummary = &summary
		upToDate = upToDate && summarized(b, summary)
	}
	if upToDate {
		return nil
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": workerv1.SchemeGroupVersion.String(), "kind": workerv1.KVCachePoolBindingKind,
		"metadata": map[string]any{"namespace": b.Namespace, "name": b.Name}, "status": fields}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(ClaimFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("reporting the domain claim of KVCachePoolBinding %s/%s: %w", b.Namespace, b.Name, err)
	}
	return nil
}
