package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

func workloadWith(edit func(*kueue.Workload), conds ...metav1.Condition) *kueue.Workload {
	wl := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: conds}}
	if edit != nil {
		edit(wl)
	}
	return wl
}

func cond(typ, status, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionStatus(status), Reason: reason, Message: message}
}

func TestInstanceQuota(t *testing.T) {
	reserved := cond(kueue.WorkloadQuotaReserved, "True", "QuotaReserved", "")
	cases := []struct {
		rule                       string
		wl                         *kueue.Workload
		members, terminating, size int
		want                       string
	}{
		{"no Pods yet is in flight", nil, 0, 0, 2, "InFlight"},
		{"every member terminating", workloadWith(nil, reserved), 2, 2, 2, "Terminating"},
		{"a group short of members has no Workload", nil, 1, 0, 2, "PodGroupIncomplete"},
		{"a complete group Kueue has not built a Workload for yet", nil, 2, 0, 2, "InFlight"},
		{"a reservation held", workloadWith(nil, reserved), 2, 0, 2, "Reserved"},
		{"a reservation evicted by preemption", workloadWith(nil, cond(kueue.WorkloadQuotaReserved, "False", "Pending", ""),
			cond(kueue.WorkloadEvicted, "True", kueue.WorkloadEvictedByPreemption, "")), 2, 0, 2, "Preempted"},
		{"a Workload whose LocalQueue is missing", workloadWith(nil, cond(kueue.WorkloadQuotaReserved, "False", kueue.WorkloadInadmissible,
			"LocalQueue gpustack-fnv64-796ced4e2897a3b4 doesn't exist")), 1, 0, 1, "NoQueue"},
		{"a parked set's Workload", workloadWith(func(wl *kueue.Workload) { wl.Spec.Active = ptr.To(false) }), 1, 0, 1, "Parked"},
		{"a queued Workload", workloadWith(nil, cond(kueue.WorkloadQuotaReserved, "False", "Pending", "couldn't assign flavors")), 1, 0, 1, "Pending"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, renderroles.InstanceQuota(tc.wl, tc.members, tc.terminating, tc.size))
		})
	}
}

func TestQuotaCondition(t *testing.T) {
	pd := map[string]int32{"prefill": 2, "decode": 2}
	cases := []struct {
		rule    string
		desired map[string]int32
		states  map[string]map[string]int32
		want    renderroles.Condition
	}{
		{"every instance holding quota is Reserved", pd,
			map[string]map[string]int32{"prefill": {"Reserved": 2}, "decode": {"Reserved": 2}},
			renderroles.Condition{Status: "True", Reason: "Reserved", Message: "all 4 instances hold quota"}},
		{"a queued instance is Pending, named by role", pd,
			map[string]map[string]int32{"prefill": {"Reserved": 2}, "decode": {"Reserved": 1, "Pending": 1}},
			renderroles.Condition{Status: "False", Reason: "Pending", Message: "3 of 4 instances hold quota (Pending: decode 1)"}},
		{"a parked set outranks the rest", pd,
			map[string]map[string]int32{"prefill": {"Parked": 2}, "decode": {"Parked": 1, "Pending": 1}},
			renderroles.Condition{Status: "False", Reason: "Parked", Message: "0 of 4 instances hold quota (Parked: decode 1, prefill 2; Pending: decode 1)"}},
		{"a missing LocalQueue", map[string]int32{"s": 1}, map[string]map[string]int32{"s": {"NoQueue": 1}},
			renderroles.Condition{Status: "False", Reason: "NoQueueInReservedNamespace", Message: "0 of 1 instances hold quota (NoQueue: s 1)"}},
		{"preemption of part of the set", pd,
			map[string]map[string]int32{"prefill": {"Reserved": 2}, "decode": {"Reserved": 1, "Preempted": 1}},
			renderroles.Condition{Status: "False", Reason: "PreemptedInPart", Message: "3 of 4 instances hold quota (Preempted: decode 1)"}},
		{"a group still assembling", map[string]int32{"s": 2}, map[string]map[string]int32{"s": {"Reserved": 1, "PodGroupIncomplete": 1}},
			renderroles.Condition{Status: "False", Reason: "PodGroupIncomplete", Message: "1 of 2 instances hold quota (PodGroupIncomplete: s 1)"}},
		{"nothing observed yet is in flight", map[string]int32{"s": 2}, map[string]map[string]int32{},
			renderroles.Condition{Status: "Unknown", Reason: "AdmissionInFlight", Message: "0 of 2 instances hold quota"}},
		{"every instance terminating", map[string]int32{"s": 2}, map[string]map[string]int32{"s": {"Terminating": 2}},
			renderroles.Condition{Status: "Unknown", Reason: "AllReplicasTerminating", Message: "0 of 2 instances hold quota (Terminating: s 2)"}},
		{"no replicas", map[string]int32{}, nil, renderroles.Condition{Status: "Unknown", Reason: "NoReplicas", Message: "the deployment declares no replicas"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, renderroles.QuotaCondition(tc.desired, tc.states))
		})
	}
}

func TestUpToDateCondition(t *testing.T) {
	cases := []struct {
		rule  string
		roles map[string]renderroles.RoleRollout
		held  string
		want  renderroles.Condition
	}{
		{"every instance current", map[string]renderroles.RoleRollout{"s": {Desired: 2, UpToDate: 2, Observed: true}}, "",
			renderroles.Condition{Status: "True", Reason: "UpToDate", Message: "all 2 instances run the current configuration"}},
		{"a replacement in flight", map[string]renderroles.RoleRollout{"s": {Desired: 3, UpToDate: 1, Observed: true, Replacing: true}}, "",
			renderroles.Condition{Status: "False", Reason: "ReplacementInProgress", Message: "1 of 3 instances run the current configuration (s 1 of 3); one replica per role is replaced at a time"}},
		{"outdated instances waiting for the next pass", map[string]renderroles.RoleRollout{"p": {Desired: 2, UpToDate: 2, Observed: true}, "d": {Desired: 2, UpToDate: 1, Observed: true}}, "",
			renderroles.Condition{Status: "False", Reason: "RolloutInProgress", Message: "3 of 4 instances run the current configuration (d 1 of 2)"}},
		{"no role reported yet", map[string]renderroles.RoleRollout{"s": {Desired: 2}}, "",
			renderroles.Condition{Status: "Unknown", Reason: "RolloutNotObserved", Message: "no role has reported its replicas yet"}},
		{"held by the weights: outdated instances stay and no new one comes", map[string]renderroles.RoleRollout{"s": {Desired: 3, UpToDate: 0, Observed: true}},
			"RolloutHeldByWeights: ClaimNotBound: claim w is Pending",
			renderroles.Condition{Status: "False", Reason: "RolloutHeldByWeights", Message: "0 of 3 instances run the current configuration (s 0 of 3); no Pod is created until the weights can be delivered: ClaimNotBound: claim w is Pending"}},
		{"held by the weights before any role reported", map[string]renderroles.RoleRollout{"s": {Desired: 1}},
			"RolloutHeldByWeights: ArtifactNotFound: gone",
			renderroles.Condition{Status: "False", Reason: "RolloutHeldByWeights", Message: "0 of 1 instances run the current configuration (s 0 of 1); no Pod is created until the weights can be delivered: ArtifactNotFound: gone"}},
		{"older compatible instances are up to date, and told apart", map[string]renderroles.RoleRollout{"s": {Desired: 3, UpToDate: 3, Observed: true, OlderCompatible: 2}}, "",
			renderroles.Condition{Status: "True", Reason: "UpToDate", Message: "all 3 instances run the current configuration; 2 of them on an older compatible render baseline, kept in place until modeldeployment.gpustack.ai/min-render-version rises above it"}},
		{"a weights hold with every instance current is up to date", map[string]renderroles.RoleRollout{"s": {Desired: 1, UpToDate: 1, Observed: true}},
			"RolloutHeldByWeights: ArtifactNotResolved: revalidating",
			renderroles.Condition{Status: "True", Reason: "UpToDate", Message: "all 1 instances run the current configuration"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) { assert.Equal(t, tc.want, renderroles.UpToDateCondition(tc.roles, tc.held)) })
	}
}

func TestRenderFloor(t *testing.T) {
	floor := func(v string) int32 {
		return renderroles.RenderFloor(map[string]string{"modeldeployment.gpustack.ai/min-render-version": v})
	}
	assert.Equal(t, int32(renderroles.MinSupportedRenderVersion), renderroles.RenderFloor(nil), "absent: the lowest supported")
	assert.Equal(t, int32(renderroles.MinSupportedRenderVersion), floor("0"), "clamped up to the lowest supported")
	assert.Equal(t, int32(renderroles.RenderVersion), floor("99"), "clamped down to this release's baseline")
	assert.Equal(t, int32(renderroles.MinSupportedRenderVersion), floor("two"), "unreadable: the lowest supported")
}

func TestAssignedFlavors(t *testing.T) {
	admitted := func(assignments ...kueue.PodSetAssignment) *kueue.Workload {
		return &kueue.Workload{Status: kueue.WorkloadStatus{Admission: &kueue.Admission{PodSetAssignments: assignments}}}
	}
	assignment := func(podSet string, flavors map[corev1.ResourceName]kueue.ResourceFlavorReference) kueue.PodSetAssignment {
		return kueue.PodSetAssignment{Name: kueue.PodSetReference(podSet), Flavors: flavors}
	}
	cases := []struct {
		rule string
		wl   *kueue.Workload
		want []string
	}{
		{"no Workload yet: none", nil, nil},
		{"a Workload not admitted: none", &kueue.Workload{}, nil},
		{"the PodSet named by the role-hash gives the flavors, once each, sorted",
			admitted(assignment("server", map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "h100", "cpu": "default", "memory": "default"})),
			[]string{"default", "h100"}},
		{"another role's PodSet is not this role's",
			admitted(assignment("decode", map[corev1.ResourceName]kueue.ResourceFlavorReference{"cpu": "spot"})), nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, renderroles.AssignedFlavors(tc.wl, "server"))
		})
	}
}
