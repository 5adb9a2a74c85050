package queues

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// CohortFieldOwner owns the InstanceType's Cohort condition: apart from FieldOwner, whose applies
// of the status carry the entrance alone.
const CohortFieldOwner = "worker.gpustack.ai/queues-cohort"

// CohortReporter says on each managed InstanceType in a cohort how much of its flavor's quota other
// queues of the cohort borrow from it, and how much its own queue borrows: the Cohort condition.
// Kueue reports only what a queue borrows; what a type lends is what the cohort's other queues
// borrow on its flavor, which only the type's ClusterQueue holds quota of.
type CohortReporter struct {
	Client client.Client
}

// SetupWithManager watches ClusterQueues, whose status moves with every admission: each event
// reaches the managed queues of its cohort.
func (r *CohortReporter) SetupWithManager(mgr manager.Manager) error {
	return ctrl.ControllerManagedBy(mgr).
		Named("instancetype_cohort").
		Watches(&kueue.ClusterQueue{}, handler.EnqueueRequestsFromMapFunc(r.managedOfCohort)).
		Complete(r)
}

// managedOfCohort maps a ClusterQueue to itself and to the managed queues of its cohort, by name
// (a managed queue is named after its type).
func (r *CohortReporter) managedOfCohort(ctx context.Context, o client.Object) []reconcile.Request {
	cq, ok := o.(*kueue.ClusterQueue)
	if !ok {
		return nil
	}
	out := []reconcile.Request{{NamespacedName: types.NamespacedName{Name: cq.Name}}}
	if cq.Spec.CohortName == "" {
		return out
	}
	var managed kueue.ClusterQueueList
	if err := r.Client.List(ctx, &managed, client.MatchingLabels(managedLabels)); err != nil {
		return out
	}
	for i := range managed.Items {
		if managed.Items[i].Spec.CohortName == cq.Spec.CohortName && managed.Items[i].Name != cq.Name {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: managed.Items[i].Name}})
		}
	}
	return out
}

// Reconcile applies the Cohort condition of the type whose managed ClusterQueue is named so, or
// removes it from a type whose queue left its cohort.
func (r *CohortReporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	cq := &kueue.ClusterQueue{}
	if err := r.Client.Get(ctx, req.NamespacedName, cq); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if cq.Labels[labelManagedBy] != managedLabels[labelManagedBy] {
		return reconcile.Result{}, nil
	}
	it := &workerv1.InstanceType{}
	if err := r.Client.Get(ctx, req.NamespacedName, it); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	var members []kueue.ClusterQueue
	if cq.Spec.CohortName != "" {
		var all kueue.ClusterQueueList
		if err := r.Client.List(ctx, &all); err != nil {
			return reconcile.Result{}, err
		}
		for i := range all.Items {
			if all.Items[i].Spec.CohortName == cq.Spec.CohortName && all.Items[i].Name != cq.Name {
				members = append(members, all.Items[i])
			}
		}
	}
	want := CohortCondition(cq, members)
	// SetStatusCondition keeps the transition time of a condition whose status stays, and says
	// whether anything changed; a type outside a cohort has its condition removed.
	conditions := slices.Clone(it.Status.Conditions)
	changed := apimeta.RemoveStatusCondition(&conditions, workerv1.InstanceTypeCohort)
	applied := []any{}
	if want != nil {
		conditions = slices.Clone(it.Status.Conditions)
		changed = apimeta.SetStatusCondition(&conditions, *want)
		c := apimeta.FindStatusCondition(conditions, workerv1.InstanceTypeCohort)
		applied = append(applied, map[string]any{"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
			"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339)})
	}
	if !changed {
		return reconcile.Result{}, nil
	}
	status := &unstructured.Unstructured{Object: map[string]any{"apiVersion": workerv1.SchemeGroupVersion.String(), "kind": workerv1.InstanceTypeKind,
		"metadata": map[string]any{"name": it.Name}, "status": map[string]any{"conditions": applied}}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status), client.FieldOwner(CohortFieldOwner), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying the Cohort condition of InstanceType %s: %w", it.Name, err)
	}
	return reconcile.Result{}, nil
}

// labelManagedBy is the key of managedLabels.
const labelManagedBy = "app.kubernetes.io/managed-by"

// CohortCondition is a type's Cohort condition from its ClusterQueue and the other queues of its
// cohort; nil outside a cohort. True while it lends or borrows: what other queues borrow on its
// flavor (lent, which it takes back by preemption when a deployment needs it) and what its own
// queue borrows (replicas admitted on it are preempted when a lender takes its quota back).
func CohortCondition(own *kueue.ClusterQueue, members []kueue.ClusterQueue) *metav1.Condition {
	if own.Spec.CohortName == "" {
		return nil
	}
	flavors := map[kueue.ResourceFlavorReference]bool{}
	for _, g := range own.Spec.ResourceGroups {
		for _, f := range g.Flavors {
			flavors[f.Name] = true
		}
	}
	lent := map[string]resource.Quantity{}
	for _, m := range members {
		addBorrowed(lent, m.Status.FlavorsUsage, flavors)
	}
	borrowed := map[string]resource.Quantity{}
	addBorrowed(borrowed, own.Status.FlavorsUsage, nil)
	cohort := string(own.Spec.CohortName)
	c := &metav1.Condition{Type: workerv1.InstanceTypeCohort, Status: metav1.ConditionFalse, Reason: workerv1.ReasonOwnQuota,
		Message: fmt.Sprintf("in cohort %s: neither lends nor borrows quota", cohort)}
	var parts []string
	if len(lent) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, workerv1.ReasonLending
		parts = append(parts, fmt.Sprintf("lends %s of its quota to other queues, which it takes back by preemption when a deployment needs it", quantities(lent)))
	}
	if len(borrowed) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, workerv1.ReasonBorrowing
		parts = append(parts, fmt.Sprintf("borrows %s beyond its own quota: the replicas admitted on it are preempted when a lender takes it back", quantities(borrowed)))
	}
	if len(parts) > 0 {
		c.Message = fmt.Sprintf("in cohort %s: %s", cohort, strings.Join(parts, "; "))
	}
	return c
}

// addBorrowed adds each resource's borrowed quantity of the usages (of the flavors only, when
// given) to sums, leaving out zeros.
func addBorrowed(sums map[string]resource.Quantity, usages []kueue.FlavorUsage, flavors map[kueue.ResourceFlavorReference]bool) {
	for _, u := range usages {
		if flavors != nil && !flavors[u.Name] {
			continue
		}
		for _, r := range u.Resources {
			if r.Borrowed.IsZero() {
				continue
			}
			sum := sums[string(r.Name)]
			sum.Add(r.Borrowed)
			sums[string(r.Name)] = sum
		}
	}
}

// quantities says resource quantities, accelerators first then by name: "4 nvidia.com/gpu, 1 cpu".
func quantities(q map[string]resource.Quantity) string {
	names := make([]string, 0, len(q))
	for n := range q {
		names = append(names, n)
	}
	slices.SortFunc(names, func(a, b string) int {
		if ga, gb := strings.Contains(a, "/"), strings.Contains(b, "/"); ga != gb {
			if ga {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	out := make([]string, 0, len(names))
	for _, n := range names {
		v := q[n]
		out = append(out, v.String()+" "+n)
	}
	return strings.Join(out, ", ")
}
