package rolestatus

import (
	"cmp"
	"slices"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/workload"
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
	// Preemptions are the role's status.preemptions as last written: a slot keeps its entry while
	// its group waits for quota, after the preempted replica and Kueue's word are gone.
	Preemptions map[string]string
	// ReadyTimeouts are the role's status.readyTimeouts as last written: a slot keeps its entry
	// until its replica is Ready.
	ReadyTimeouts map[string]v1alpha1.ReadyTimeout
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
	standing, leaving, told, lost := slots(o)
	var ready, upToDate, olderCompatible int32
	var live v1alpha1.MemberCounts
	var modes v1alpha1.DeployedModes
	var flavors []string
	quota := map[string]int32{}
	preemptions := map[string]string{}
	readyTimeouts := map[string]v1alpha1.ReadyTimeout{}
	provisioning := map[int32]string{}
	qualifications := make([]*v1alpha1.Qualification, 0, o.Spec.Replicas)
	for n, r := range standing {
		wl := o.Workloads[int32(n)]
		state, why := slotAdmission(r, wl, leaving[int32(n)], cmp.Or(told[int32(n)], o.Preemptions[v1alpha1.SlotKey(int32(n))]))
		quota[state]++
		if why != "" {
			preemptions[v1alpha1.SlotKey(int32(n))] = why
		}
		if t, counted := o.ReadyTimeouts[v1alpha1.SlotKey(int32(n))]; counted && (r == nil || r.Status.GetCondition(xpv2.TypeReady).Status != corev1.ConditionTrue) {
			readyTimeouts[v1alpha1.SlotKey(int32(n))] = t
		}
		noteSlot(int32(n), r, wl, lost, provisioning)
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
	if len(preemptions) == 0 {
		preemptions = nil
	}
	if len(readyTimeouts) == 0 {
		readyTimeouts = nil
	}
	s := Summary{Ready: ready == o.Spec.Replicas, Status: v1alpha1.ModelRoleStatus{
		Ready: &ready, UpToDate: &upToDate, OlderCompatible: &olderCompatible,
		QuotaReserved: ptr.To(quota[replicas.QuotaReserved]), Quota: quota, PreemptedBy: FirstPreemption(preemptions), Members: &live, Modes: &modes, AssignedFlavors: flavors, Preemptions: preemptions,
		LostNode: firstSlotNote(lost), ReadyTimeouts: readyTimeouts, Provisioning: firstSlotNote(provisioning),
	}}
	s.Status.Eligible, s.Status.Eligibility, s.Status.EligibilityActive = RoleEligibility(qualifications)
	s.PodsCreated, s.PodsCreatedKnown = RolePodsCreated(standing, o.Carried)
	return s
}

// noteSlot notes what keeps slot n's replica r (nil: none stands) and its group's Workload from
// Ready beyond the counts: a node that stopped reporting, nodes being provisioned or refused.
func noteSlot(n int32, r *v1alpha1.ModelReplica, wl *kueue.Workload, lost, provisioning map[int32]string) {
	if r != nil && r.Status.LostNode != "" {
		lost[n] = r.Status.LostNode
	}
	if text := workload.Provisioning(wl); text != "" {
		provisioning[n] = text
	}
}

// firstSlotNote is the lowest slot's note of notes by slot, "r<ordinal>: <note>" (a role's LostNode,
// its Provisioning); "" for none.
func firstSlotNote(notes map[int32]string) string {
	first := int32(-1)
	for n, text := range notes {
		if text != "" && (first < 0 || n < first) {
			first = n
		}
	}
	if first < 0 {
		return ""
	}
	return v1alpha1.SlotKey(first) + ": " + notes[first]
}

// slots sorts a role's replicas by slot: the standing replica of each (the first by name), the
// slots whose replica is being deleted, and what those said last (a leaving replica is not
// reported again) of a preemption and of a node that stopped reporting.
func slots(o Observed) (standing []*v1alpha1.ModelReplica, leaving map[int32]bool, told, lost map[int32]string) {
	standing = make([]*v1alpha1.ModelReplica, o.Spec.Replicas)
	leaving, told, lost = map[int32]bool{}, map[int32]string{}, map[int32]string{}
	for _, r := range o.Replicas {
		switch n := r.Spec.Ordinal; {
		case n < 0 || n >= o.Spec.Replicas:
		case r.DeletionTimestamp != nil:
			leaving[n] = true
			told[n] = cmp.Or(told[n], r.Status.PreemptedBy)
			lost[n] = cmp.Or(lost[n], r.Status.LostNode)
		case standing[n] == nil || r.Name < standing[n].Name:
			standing[n] = r
		}
	}
	return standing, leaving, told, lost
}

// FirstPreemption is a role's PreemptedBy: its lowest preempted slot's entry, "r<ordinal>: <who and
// why>"; "" for none.
func FirstPreemption(preemptions map[string]string) string {
	key := v1alpha1.LowestSlot(preemptions)
	if key == "" {
		return ""
	}
	return key + ": " + preemptions[key]
}

// slotAdmission is a slot's admission state (admissionState) and, while a preemption explains its
// wait, Preempted and who for. carried is what the slot's leaving replica or the role's last status
// said of it.
func slotAdmission(r *v1alpha1.ModelReplica, wl *kueue.Workload, leaving bool, carried string) (state, preemptedBy string) {
	state = admissionState(r, wl, leaving)
	if state == replicas.QuotaTerminating {
		return state, carried // the preempted replica being rebuilt: its replacement reads it here
	}
	if why := slotPreemption(r, wl, state, carried); why != "" {
		return replicas.QuotaPreempted, why
	}
	return state, ""
}

// slotPreemption is who a slot waits behind since Kueue preempted its group, while it waits for
// quota: its replica's report, else Kueue's word on the Workload (the report may trail it; only the
// report names the preemptor), else what was carried from before the replica was rebuilt.
func slotPreemption(r *v1alpha1.ModelReplica, wl *kueue.Workload, state, carried string) string {
	if !replicas.WaitsAfterPreemption(state) {
		return ""
	}
	if r != nil && r.Status.PreemptedBy != "" {
		return r.Status.PreemptedBy
	}
	if reason, _, ok := workload.Preemption(wl); ok && carried == "" {
		return replicas.PreemptedBy(reason, "")
	}
	return carried
}

// admissionState is a slot's admission state: its Workload's while its standing replica's Pods
// exist (the replica's report of it may trail by its detail interval), else the replica's report.
func admissionState(r *v1alpha1.ModelReplica, wl *kueue.Workload, leaving bool) string {
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
