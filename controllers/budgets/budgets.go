package budgets

import (
	"context"
	"fmt"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// ForeignRetry is how often a role whose budget's name another object holds looks again.
const ForeignRetry = 10 * time.Second

// Reconciler creates each ModelRole's PodDisruptionBudget and keeps its spec as the role's replicas
// and size say (replicas.DisruptionBudget).
type Reconciler struct {
	Client client.Client
}

// SetupWithManager watches ModelRoles' specs and the budgets they control; a budget's status,
// which moves with every member, wakes nothing.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("disruption_budget").
		For(&v1alpha1.ModelRole{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&policyv1.PodDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile creates the role's budget, or updates its spec and labels when they drifted. A budget of
// the same name that another controls (one an earlier version's composition made) is left alone and
// looked at again after ForeignRetry: its owner deletes it once it no longer composes it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	role := &v1alpha1.ModelRole{}
	if err := r.Client.Get(ctx, req.NamespacedName, role); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want := replicas.DisruptionBudget(role)
	if role.DeletionTimestamp != nil || want == nil {
		return reconcile.Result{}, nil // a deleted role's budget leaves with it, through its owner reference
	}
	got := &policyv1.PodDisruptionBudget{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return reconcile.Result{}, fmt.Errorf("creating PodDisruptionBudget %s/%s: %w", want.Namespace, want.Name, err)
		}
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	}
	if owner := metav1.GetControllerOf(got); owner == nil || owner.UID != role.UID || got.DeletionTimestamp != nil {
		return reconcile.Result{RequeueAfter: ForeignRetry}, nil
	}
	if equality.Semantic.DeepEqual(got.Spec, want.Spec) && labelsHeld(got.Labels, want.Labels) {
		return reconcile.Result{}, nil
	}
	patch := client.MergeFromWithOptions(got.DeepCopy(), client.MergeFromWithOptimisticLock{})
	got.Spec = want.Spec
	for k, v := range want.Labels {
		if got.Labels == nil {
			got.Labels = map[string]string{}
		}
		got.Labels[k] = v
	}
	if err := r.Client.Patch(ctx, got, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("updating PodDisruptionBudget %s/%s: %w", got.Namespace, got.Name, err))
	}
	return reconcile.Result{}, nil
}

// labelsHeld reports whether have carries every label of want.
func labelsHeld(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
