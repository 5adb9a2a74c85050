package queues

import (
	"cmp"
	"context"
	"fmt"
	"math/big"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/controllers/index"
)

// FieldOwner owns every queue object and the entrance this controller writes.
const FieldOwner = "worker.gpustack.ai/queues"

// AnnotationQueueManagement set to CheckOnly on an InstanceType leaves its ClusterQueue to the
// platform: mdplane only adds the joint check to it (and still creates the LocalQueues).
const (
	AnnotationQueueManagement = "worker.gpustack.ai/queue-management"
	QueueManagementCheckOnly  = "CheckOnly"
)

// Reconciler publishes every InstanceType's entrance, and gives every selected type its
// ResourceFlavor and ClusterQueue (named after the type; the flavor with a hash too when the type
// asks for a Topology, which it then also gets) and a LocalQueue named by its entrance in each
// namespace whose deployments name it.
type Reconciler struct {
	Client client.Client
	// Selector picks the InstanceTypes whose queues mdplane manages; everything when empty.
	Selector labels.Selector
	// Settings reads the mdplane-settings EnvironmentConfig (uncached) for the administrator's
	// transient taints; nil reads no Settings (the built-in transient taints only).
	Settings settings.Getter
}

// SetupWithManager watches InstanceTypes, and deployments so that a namespace naming a type for the
// first time gets its LocalQueue: their creation and spec changes, not their status, which changes
// with every replica of a rollout. An InstanceType's status moves with every Pod bound to its nodes;
// only what the queue objects are made of wakes it (queueInputsChanged). Nodes wake the types whose
// label they gain, lose or carry while their taints change: the flavor tolerates the taints. The
// mdplane-settings EnvironmentConfig wakes every type: it names taints the flavors never tolerate.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	environmentConfig := &unstructured.Unstructured{}
	environmentConfig.SetGroupVersionKind(settings.GroupVersionKind)
	return ctrl.ControllerManagedBy(mgr).
		Named("instancetype_queues").
		For(&workerv1.InstanceType{}, ctrl.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return queueInputsChanged(e.ObjectOld.(*workerv1.InstanceType), e.ObjectNew.(*workerv1.InstanceType))
		}})).
		Watches(&workerv1.ModelDeployment{}, handler.EnqueueRequestsFromMapFunc(typesOfDeployment), ctrl.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, r.nodeEvents()).
		Watches(environmentConfig, handler.EnqueueRequestsFromMapFunc(r.everyType), ctrl.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == settings.EnvironmentConfigName
		}))).
		Complete(r)
}

// queueInputsChanged reports a change of what the entrance and the queue objects are made of: the
// spec, the labels the selector reads, the annotations (CheckOnly), the entrance itself, or the
// quotas the status gives (its capacity, its manufacturer).
func queueInputsChanged(old, new *workerv1.InstanceType) bool {
	if old.Generation != new.Generation || old.Status.Entrance != new.Status.Entrance || (old.DeletionTimestamp == nil) != (new.DeletionTimestamp == nil) ||
		!equality.Semantic.DeepEqual(old.Labels, new.Labels) || !equality.Semantic.DeepEqual(old.Annotations, new.Annotations) {
		return true
	}
	was, errOld := Quotas(old)
	is, errNew := Quotas(new)
	return (errOld == nil) != (errNew == nil) || !equality.Semantic.DeepEqual(was, is)
}

// everyType enqueues every InstanceType.
func (r *Reconciler) everyType(ctx context.Context, _ client.Object) []reconcile.Request {
	list := &workerv1.InstanceTypeList{}
	if err := r.Client.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "listing the InstanceTypes a Settings change reaches")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
	}
	return reqs
}

func (r *Reconciler) selects(l map[string]string) bool {
	return r.Selector == nil || r.Selector.Matches(labels.Set(l))
}

func typesOfDeployment(_ context.Context, obj client.Object) []reconcile.Request {
	md, ok := obj.(*workerv1.ModelDeployment)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, role := range md.Spec.Roles {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: role.InstanceType}})
	}
	return reqs
}

// Reconcile applies the type's queue objects; each apply is idempotent and owned by FieldOwner.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	it := &workerv1.InstanceType{}
	if err := r.Client.Get(ctx, req.NamespacedName, it); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if it.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	// Every type's entrance: it is a hash of the name, the same whoever publishes it, and a
	// deployment renders only once its type has one.
	if err := r.publishEntrance(ctx, it); err != nil {
		return reconcile.Result{}, err
	}
	if !r.selects(it.Labels) {
		return reconcile.Result{}, nil
	}
	for _, apply := range []func(context.Context, *workerv1.InstanceType) error{r.applyClusterQueue, r.applyLocalQueues} {
		if err := apply(ctx, it); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// publishEntrance applies status.entrance alone, so the reconciler that writes the rest of the
// InstanceType's status keeps it.
func (r *Reconciler) publishEntrance(ctx context.Context, it *workerv1.InstanceType) error {
	entrance := workerv1.EntranceName(it.Name)
	if it.Status.Entrance == entrance {
		return nil
	}
	status := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "worker.gpustack.ai/v1", "kind": workerv1.InstanceTypeKind,
		"metadata": map[string]any{"name": it.Name}, "status": map[string]any{"entrance": entrance}}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(status), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("publishing the entrance of InstanceType %s: %w", it.Name, err)
	}
	return nil
}

// applyLocalQueues applies the LocalQueue named by the type's entrance in each namespace whose
// deployments name the type.
func (r *Reconciler) applyLocalQueues(ctx context.Context, it *workerv1.InstanceType) error {
	namespaces, err := r.namespacesNaming(ctx, it.Name)
	if err != nil {
		return err
	}
	entrance := workerv1.EntranceName(it.Name)
	for _, ns := range namespaces {
		lq := kueueac.LocalQueue(entrance, ns).WithLabels(managedLabels).WithSpec(kueueac.LocalQueueSpec().WithClusterQueue(kueue.ClusterQueueReference(it.Name)))
		if err := r.apply(ctx, "LocalQueue", entrance, lq); err != nil {
			return err
		}
	}
	return nil
}

// applyClusterQueue applies the type's flavor and queue, or only the joint check on a queue the
// platform manages.
func (r *Reconciler) applyClusterQueue(ctx context.Context, it *workerv1.InstanceType) error {
	checks := kueueac.AdmissionChecksStrategy().WithAdmissionChecks(kueueac.AdmissionCheckStrategyRule().WithName(admissioncheck.CheckName))
	if it.Annotations[AnnotationQueueManagement] == QueueManagementCheckOnly {
		existing := &kueue.ClusterQueue{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: it.Name}, existing); apierrors.IsNotFound(err) {
			return nil // nothing to add the check to until the platform creates it
		} else if err != nil {
			return err
		}
		return r.apply(ctx, "ClusterQueue", it.Name, kueueac.ClusterQueue(it.Name).WithSpec(kueueac.ClusterQueueSpec().WithAdmissionChecksStrategy(checks)))
	}
	quotas, err := Quotas(it)
	if err != nil {
		return err
	}
	provisioning, err := r.applyProvisioning(ctx, it)
	if err != nil {
		return err
	}
	if provisioning != "" {
		checks.WithAdmissionChecks(kueueac.AdmissionCheckStrategyRule().WithName(provisioning))
	}
	var topologyName string
	if levels := topologyLevels(ctx, it); levels != nil {
		tp := topology(it.Name, levels)
		topologyName = *tp.Name
		if err := r.apply(ctx, "Topology", topologyName, tp); err != nil {
			return err
		}
	}
	s := settings.Defaults()
	if r.Settings != nil {
		read, _, err := settings.Get(ctx, r.Settings)
		if err != nil {
			return err // a bad value never falls back to the built-in taints alone: it names the key
		}
		s = read
	}
	transient := s.TransientTaints()
	flavor, flavorName, err := r.flavor(ctx, it, topologyName, transient)
	if err != nil {
		return err
	}
	if err := r.apply(ctx, "ResourceFlavor", flavorName, flavor); err != nil {
		return err
	}
	names := make([]string, 0, len(quotas))
	for name := range quotas {
		names = append(names, string(name))
	}
	sort.Strings(names)
	group := kueueac.ResourceGroup()
	flavorQuotas := kueueac.FlavorQuotas().WithName(kueue.ResourceFlavorReference(flavorName))
	for _, name := range names {
		group.WithCoveredResources(corev1.ResourceName(name))
		flavorQuotas.WithResources(resourceQuota(corev1.ResourceName(name), quotas[corev1.ResourceName(name)], s))
	}
	spec := kueueac.ClusterQueueSpec().
		WithNamespaceSelector(metav1ac.LabelSelector()).
		WithResourceGroups(group.WithFlavors(flavorQuotas)).
		WithAdmissionChecksStrategy(checks)
	if preemption := queuePreemption(s); preemption != nil {
		spec.WithPreemption(preemption)
	}
	if s.InstanceTypeCohort != "" {
		spec.WithCohortName(kueue.CohortReference(s.InstanceTypeCohort))
	}
	cq := kueueac.ClusterQueue(it.Name).WithLabels(managedLabels).WithSpec(spec)
	if err := r.apply(ctx, "ClusterQueue", it.Name, cq); err != nil {
		return err
	}
	return r.deleteReplaced(ctx, it.Name, flavorName, topologyName)
}

// queuePreemption is a type's ClusterQueue's preemption, nil for none. Within the queue, a Workload
// preempts as instance-type-preemption says (Kueue preempts one Workload, one replica group, at a
// time). In a cohort, what the type lends it takes back: a deployment that needs the quota preempts
// the borrowers, whatever their priority.
func queuePreemption(s settings.Settings) *kueueac.ClusterQueuePreemptionApplyConfiguration {
	within := cmp.Or(s.InstanceTypePreemption, settings.PreemptionNever)
	if within == settings.PreemptionNever && s.InstanceTypeCohort == "" {
		return nil
	}
	p := kueueac.ClusterQueuePreemption()
	if within != settings.PreemptionNever {
		p.WithWithinClusterQueue(kueue.PreemptionPolicy(within))
	}
	if s.InstanceTypeCohort != "" {
		p.WithReclaimWithinCohort(kueue.PreemptionPolicyAny)
	}
	return p
}

// resourceQuota is one resource's quota of a type's ClusterQueue: its nominal quota and, in a cohort,
// the Settings' shares of it as lending and borrowing limits (Kueue allows neither outside a cohort).
func resourceQuota(name corev1.ResourceName, nominal resource.Quantity, s settings.Settings) *kueueac.ResourceQuotaApplyConfiguration {
	q := kueueac.ResourceQuota().WithName(name).WithNominalQuota(nominal)
	if s.InstanceTypeCohort == "" {
		return q
	}
	if percent, ok := s.LendingLimit(); ok {
		q.WithLendingLimit(share(nominal, percent))
	}
	if percent, ok := s.BorrowingLimit(); ok {
		q.WithBorrowingLimit(share(nominal, percent))
	}
	return q
}

// share is percent of q, rounded down to a whole unit (a whole GPU, a whole CPU) where q is whole, so
// that a limit never lends or borrows part of an accelerator.
func share(q resource.Quantity, percent int64) resource.Quantity {
	if percent >= 100 {
		return q.DeepCopy()
	}
	scaled := func(v int64) int64 { // v × percent / 100 without overflow: memory counts bytes
		return new(big.Int).Quo(new(big.Int).Mul(big.NewInt(v), big.NewInt(percent)), big.NewInt(100)).Int64()
	}
	if whole := resource.NewQuantity(q.Value(), q.Format); whole.Cmp(q) == 0 {
		return *resource.NewQuantity(scaled(q.Value()), q.Format)
	}
	return *resource.NewMilliQuantity(scaled(q.MilliValue()), q.Format)
}

// Quotas is the capacity an InstanceType's ClusterQueue offers: its whole accelerators, and CPU,
// memory and local storage as the unit resources scaled by them (one unit on a type without
// accelerators, scaled by its CPU capacity). An autoscaled type offers what its node pool grows to
// (AnnotationAutoscaledCapacity), or its nodes' capacity where that is more.
func Quotas(it *workerv1.InstanceType) (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	declared, autoscaled, err := it.AutoscaledCapacity()
	if err != nil {
		return nil, err
	}
	units := int64(1)
	if it.Spec.Acceleratable {
		vendor, err := it.AcceleratorVendor()
		if err != nil {
			return nil, err
		}
		var cards int64
		if v := it.Status.Accelerator; v != nil && v.Capacity != nil {
			cards = v.Capacity.Value()
		}
		if autoscaled {
			cards = max(cards, declared)
		}
		out[vendor.Resource] = *resource.NewQuantity(cards, resource.DecimalSI)
		units = cards
		sharedModes(it, vendor, cards, out)
	} else if v := it.Status.CPU; v != nil && v.Capacity != nil {
		units = v.Capacity.Value()
	}
	if autoscaled && !it.Spec.Acceleratable {
		units = max(units, declared)
	}
	perUnit, err := it.UnitResourceList()
	if err != nil {
		return nil, err
	}
	for name, unit := range perUnit {
		total := unit.DeepCopy()
		total.Mul(units)
		out[name] = total
	}
	return out, nil
}

// sharedModes adds the keys a slice or a partition request carries, for a type that offers them: the
// slices or partitions the type's views count, every card's whole memory and cores as percentages,
// and each partition profile's total (allocated and remaining). The keys are the manufacturer's
// (vendor); a manufacturer without a partition kind gets no partition keys, as no request can carry
// them.
func sharedModes(it *workerv1.InstanceType, vendor workerv1.AcceleratorVendor, cards int64, out corev1.ResourceList) {
	count := func(n int64) resource.Quantity { return *resource.NewQuantity(n, resource.DecimalSI) }
	if v := it.Status.AcceleratorSliced; it.OffersSlicing() && v != nil && v.Capacity != nil {
		out[vendor.SlicedResource()] = count(v.Capacity.Value())
		out[vendor.SlicedMemoryPercentageResource()] = count(100 * cards)
		out[vendor.SlicedCoresPercentageResource()] = count(100 * cards)
	}
	if v := it.Status.AcceleratorPartitioned; vendor.PartitionKind != "" && len(it.PartitionProfiles()) > 0 && v != nil && v.Capacity != nil {
		out[vendor.PartitionedResource()] = count(v.Capacity.Value())
		profiles := map[string]int64{}
		for _, p := range append(append([]workerv1.ProfileCount{}, v.AllocatedProfiles...), v.RemainingProfiles...) {
			profiles[p.Name] += int64(p.Count)
		}
		for name, n := range profiles {
			key, _ := vendor.PartitionProfileResource(name)
			out[key] = count(n)
		}
	}
}

// namespacesNaming lists the namespaces with a deployment whose roles name the type.
func (r *Reconciler) namespacesNaming(ctx context.Context, instanceType string) ([]string, error) {
	list := &workerv1.ModelDeploymentList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{index.DeploymentInstanceType: instanceType}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, md := range list.Items {
		if !seen[md.Namespace] {
			seen[md.Namespace] = true
			out = append(out, md.Namespace)
		}
	}
	sort.Strings(out)
	return out, nil
}

// apply server-side applies a typed configuration under FieldOwner, taking over conflicting fields.
func (r *Reconciler) apply(ctx context.Context, kind, name string, obj runtime.ApplyConfiguration) error {
	if err := r.Client.Apply(ctx, obj, client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", kind, name, err)
	}
	return nil
}

// managedLabels label an object mdplane creates, so a person can tell where it came from.
var managedLabels = map[string]string{labelManagedBy: "mdplane"}
