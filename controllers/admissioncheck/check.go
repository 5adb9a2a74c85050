package admissioncheck

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"
)

// EnsureCheck applies the AdmissionCheck object itself: ClusterQueues name it, and a check that does
// not exist makes every such queue inactive.
func EnsureCheck(ctx context.Context, c client.Client) error {
	check := kueueac.AdmissionCheck(string(CheckName)).WithSpec(kueueac.AdmissionCheckSpec().WithControllerName(ControllerName))
	if err := c.Apply(ctx, check, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying AdmissionCheck %s: %w", CheckName, err)
	}
	return nil
}

// CheckReconciler keeps the AdmissionCheck Active while this controller runs: Kueue deactivates
// every ClusterQueue naming a check no controller vouches for.
type CheckReconciler struct {
	Client client.Client
}

// SetupWithManager watches the one AdmissionCheck this controller owns.
func (r *CheckReconciler) SetupWithManager(mgr ctrl.Manager) error {
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == string(CheckName) })
	return ctrl.NewControllerManagedBy(mgr).
		Named("joint_admission_check").
		For(&kueue.AdmissionCheck{}, builder.WithPredicates(ours)).
		Complete(r)
}

// Reconcile sets the Active condition, or reports a check some other controller claims.
func (r *CheckReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ac := &kueue.AdmissionCheck{}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: req.Name}, ac); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return reconcile.Result{}, EnsureCheck(ctx, r.Client) // deleted while running: put it back
		}
		return reconcile.Result{}, err
	}
	want := activeCondition(ac)
	if cur := apimeta.FindStatusCondition(ac.Status.Conditions, want.Type); cur != nil && sameCondition(*cur, want) {
		return reconcile.Result{}, nil
	}
	apimeta.SetStatusCondition(&ac.Status.Conditions, want)
	return reconcile.Result{}, r.Client.Status().Update(ctx, ac)
}

// activeCondition is the Active condition the AdmissionCheck should carry: True while it names this
// controller, False with the way out when it names another.
func activeCondition(ac *kueue.AdmissionCheck) metav1.Condition {
	want := metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active",
		Message: "mdplane holds every replica group of a ModelDeployment until the whole set has reserved quota", ObservedGeneration: ac.Generation}
	if ac.Spec.ControllerName != ControllerName {
		want.Status, want.Reason = metav1.ConditionFalse, "ControllerNameMismatch"
		want.Message = fmt.Sprintf("AdmissionCheck %s names controller %q; mdplane answers for %q only, so delete the object and let mdplane recreate it", CheckName, ac.Spec.ControllerName, ControllerName)
	}
	return want
}

// sameCondition reports whether a condition already says what want says (its time aside).
func sameCondition(cur, want metav1.Condition) bool {
	return cur.Status == want.Status && cur.Reason == want.Reason && cur.Message == want.Message && cur.ObservedGeneration == want.ObservedGeneration
}
