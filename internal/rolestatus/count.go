package rolestatus

import (
	"slices"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// Condition is a condition as a status reports it.
type Condition struct {
	Status  string // True, False or Unknown
	Reason  string
	Message string
}

// Observed is what a role's status is summed from.
type Observed struct {
	Spec v1alpha1.ModelRoleSpec
	// Replicas are every ModelReplica of the role, standing, leaving or scaled away.
	Replicas []*v1alpha1.ModelReplica
	// TakesOver says, by revision, whether its Pods run a take-over command; a revision missing
	// here is not counted in Modes.
	TakesOver map[string]bool
	// Carried is whether the role already carries a PodsCreated condition.
	Carried bool
	// Workloads are the Workloads Kueue built for the declared slots' groups, by ordinal. A slot's
	// admission state and flavors are read from its Workload, which always has them first: its
	// replica reports them only when something else of it changes.
	Workloads map[int32]*kueue.Workload
}

// Summary is a role's status without its conditions, and the two conditions it decides.
type Summary struct {
	Status v1alpha1.ModelRoleStatus
	// Ready is whether every declared instance is Ready.
	Ready bool
	// PodsCreated is written when PodsCreatedKnown.
	PodsCreated      Condition
	PodsCreatedKnown bool
}

// Count sums a role's replicas of the declared ordinals. A slot counts its standing replica's
// admission state (its group's Workload's, once the replica's Pods exist), Terminating while its
// departed replica is still being deleted, and in flight while its replica is being created.
func Count(o Observed) Summary {
	standing := make([]*v1alpha1.ModelReplica, o.Spec.Replicas)
	leaving := map[int32]bool{}
	for _, r := range o.Replicas {
		switch n := r.Spec.Ordinal; {
		case n < 0 || n >= o.Spec.Replicas:
		case r.DeletionTimestamp != nil:
			leaving[n] = true
		case standing[n] == nil || r.Name < standing[n].Name:
			standing[n] = r
		}
	}
	var ready, upToDate, olderCompatible int32
	var live v1alpha1.MemberCounts
	var modes v1alpha1.DeployedModes
	var flavors []string
	quota := map[string]int32{}
	qualifications := make([]*v1alpha1.Qualification, 0, o.Spec.Replicas)
	for n, r := range standing {
		wl := o.Workloads[int32(n)]
		quota[slotState(r, wl, leaving[int32(n)])]++
		if r == nil {
			qualifications = append(qualifications, nil)
			continue
		}
		qualifications = append(qualifications, r.Status.Qualification)
		if r.Status.GetCondition(xpv2.TypeReady).Status == corev1.ConditionTrue { // written by the members controller
			ready++
		}
		if r.Status.Live != nil {
			live = live.Add(*r.Status.Live)
		}
		for _, f := range replicas.AssignedFlavors(wl, o.Spec.RoleName) {
			if !slices.Contains(flavors, f) {
				flavors = append(flavors, f)
			}
		}
		if r.Spec.UpToDate(o.Spec) {
			upToDate++
		}
		if r.Spec.OlderCompatible(o.Spec) {
			olderCompatible++
		}
		if over, known := o.TakesOver[r.Spec.Revision]; known && over {
			modes.Unmanaged++
		} else if known {
			modes.Managed++
		}
	}
	slices.Sort(flavors)
	s := Summary{Ready: ready == o.Spec.Replicas, Status: v1alpha1.ModelRoleStatus{
		Ready: &ready, UpToDate: &upToDate, OlderCompatible: &olderCompatible,
		QuotaReserved: ptr.To(quota[replicas.QuotaReserved]), Quota: quota, Members: &live, Modes: &modes, AssignedFlavors: flavors,
	}}
	s.Status.Eligible, s.Status.Eligibility, s.Status.EligibilityActive = RoleEligibility(qualifications)
	s.PodsCreated, s.PodsCreatedKnown = RolePodsCreated(standing, o.Carried)
	return s
}

// slotState is a slot's admission state: its Workload's while its standing replica's Pods exist
// (the replica's report of it may trail by its detail interval), else the replica's report.
func slotState(r *v1alpha1.ModelReplica, wl *kueue.Workload, leaving bool) string {
	switch {
	case r == nil && leaving:
		return replicas.QuotaTerminating
	case r == nil:
		return replicas.QuotaInFlight
	case wl != nil && r.Status.Quota != replicas.QuotaTerminating && ptr.Deref(r.Status.Members, 0) > 0:
		return replicas.InstanceQuota(wl, int(*r.Status.Members), 0, int(ptr.Deref(r.Status.Size, *r.Status.Members)))
	case r.Status.Quota != "":
		return r.Status.Quota
	}
	return replicas.QuotaInFlight
}
