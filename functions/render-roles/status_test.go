package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

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
			assert.Equal(t, tc.want, renderroles.QuotaCondition(tc.desired, tc.states, nil, nil))
		})
	}
	t.Run("what a waiting role's InstanceType lacks lengthens the message, once, and keeps the reason", func(t *testing.T) {
		lacks := map[string]string{"prefill": "InstanceType h20 has no nodes: none", "decode": "InstanceType h20 has no nodes: none"}
		got := renderroles.QuotaCondition(pd, map[string]map[string]int32{"prefill": {"Pending": 2}, "decode": {"PodGroupIncomplete": 1, "Reserved": 1}}, lacks, nil)
		assert.Equal(t, renderroles.Condition{Status: "False", Reason: "PodGroupIncomplete",
			Message: "1 of 4 instances hold quota (Pending: prefill 2; PodGroupIncomplete: decode 1): InstanceType h20 has no nodes: none"}, got)
	})
	t.Run("who Kueue preempted a role's instance for lengthens the message and keeps the reason", func(t *testing.T) {
		who := "r1: Kueue preempted this replica's group for Workload team-b/big-r0 of ModelDeployment team-b/big: it has a higher priority in the same ClusterQueue (reason InClusterQueue)"
		got := renderroles.QuotaCondition(pd, map[string]map[string]int32{"prefill": {"Reserved": 2}, "decode": {"Reserved": 1, "Preempted": 1}},
			nil, map[string]string{"decode": who, "gone": "r0: a role no longer declared"})
		assert.Equal(t, renderroles.Condition{Status: "False", Reason: "PreemptedInPart", Message: "3 of 4 instances hold quota (Preempted: decode 1): role decode " + who}, got)
	})
	t.Run("a role holding all its quota is not said to lack anything", func(t *testing.T) {
		got := renderroles.QuotaCondition(pd, map[string]map[string]int32{"prefill": {"Reserved": 2}, "decode": {"Parked": 2}},
			map[string]string{"prefill": "InstanceType h20 has no free cards (0 of 8 free)"}, nil)
		assert.Equal(t, "2 of 4 instances hold quota (Parked: decode 2)", got.Message)
	})
}

func TestTypeShortage(t *testing.T) {
	typeWith := func(edit func(*workerv1.InstanceTypeStatus)) *workerv1.InstanceType {
		it := &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h20"}, Spec: workerv1.InstanceTypeSpec{Acceleratable: true},
			Status: workerv1.InstanceTypeStatus{Accelerator: &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("16")),
				Remaining: ptr.To(resource.MustParse("6")), OnceMaxRequest: ptr.To(resource.MustParse("4"))}}}
		if edit != nil {
			edit(&it.Status)
		}
		return it
	}
	for _, row := range []struct {
		rule  string
		it    *workerv1.InstanceType
		cards int64
		want  string
	}{
		{"no schedulable node: the inventory's NodesAvailable says why", typeWith(func(s *workerv1.InstanceTypeStatus) {
			s.Conditions = []metav1.Condition{{Type: workerv1.InstanceTypeNodesAvailable, Status: metav1.ConditionFalse, Reason: workerv1.ReasonNoMatchingNodes, Message: "no node offers accelerator group nvidia-h20"}}
		}), 1, "InstanceType h20 has no nodes: no node offers accelerator group nvidia-h20"},
		{"every card held", typeWith(func(s *workerv1.InstanceTypeStatus) { s.Accelerator.Remaining = ptr.To(resource.MustParse("0")) }), 1,
			"InstanceType h20 has no free cards (0 of 16 free)"},
		{"free cards, but not that many on one node", typeWith(nil), 8,
			"no node of InstanceType h20 has 8 free cards (at most 4 on one node, 6 of 16 free in all)"},
		{"room for the Pod", typeWith(nil), 4, ""},
		{"an autoscaled pool without nodes lacks nothing: its nodes come with the request", func() *workerv1.InstanceType {
			it := typeWith(func(s *workerv1.InstanceTypeStatus) {
				s.Conditions = []metav1.Condition{{Type: workerv1.InstanceTypeNodesAvailable, Status: metav1.ConditionFalse, Reason: workerv1.ReasonNoMatchingNodes, Message: "no node offers accelerator group nvidia-h20"}}
			})
			it.Annotations = map[string]string{workerv1.AnnotationAutoscaledCapacity: "32"}
			return it
		}(), 8, ""},
		{"a status nobody counted says nothing", &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h20"}, Spec: workerv1.InstanceTypeSpec{Acceleratable: true}}, 1, ""},
		{"a slice asks no whole card", typeWith(func(s *workerv1.InstanceTypeStatus) { s.Accelerator.Remaining = ptr.To(resource.MustParse("0")) }), 0, ""},
	} {
		t.Run(row.rule, func(t *testing.T) {
			assert.Equal(t, row.want, renderroles.TypeShortage(row.it, row.cards))
		})
	}
}

func TestRoleShortage(t *testing.T) {
	full := &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h20"}, Spec: workerv1.InstanceTypeSpec{Acceleratable: true},
		Status: workerv1.InstanceTypeStatus{Accelerator: &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("16")), Remaining: ptr.To(resource.MustParse("0"))}}}
	roomy := full.DeepCopy()
	roomy.Status.Accelerator.Remaining = ptr.To(resource.MustParse("16"))
	racked := workerv1.ModelDeploymentRole{Name: "server", Size: 3, Topology: &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "topology.gpustack.ai/rack"}}
	for _, row := range []struct {
		rule string
		it   *workerv1.InstanceType
		role workerv1.ModelDeploymentRole
		want string
	}{
		{"a required level is named, with the Pods each replica fits in one domain of it", roomy, racked,
			"role server needs the 3 Pods of each replica within one domain of topology level topology.gpustack.ai/rack"},
		{"after the type's shortage", full, racked,
			"InstanceType h20 has no free cards (0 of 16 free); role server needs the 3 Pods of each replica within one domain of topology level topology.gpustack.ai/rack"},
		{"near miss: an empty required level names none", full, workerv1.ModelDeploymentRole{Name: "server", Topology: &workerv1.ModelDeploymentRoleTopology{}},
			"InstanceType h20 has no free cards (0 of 16 free)"},
		{"near miss: room and no topology say nothing", roomy, workerv1.ModelDeploymentRole{Name: "server"}, ""},
	} {
		t.Run(row.rule, func(t *testing.T) {
			assert.Equal(t, row.want, renderroles.RoleShortage(row.it, row.role))
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
		{"the gate each role's next departure waits at is named", map[string]renderroles.RoleRollout{
			"p": {Desired: 3, UpToDate: 1, Observed: true, Replacing: true, Gate: workerv1.ReplacementGateReady},
			"d": {Desired: 2, UpToDate: 1, Observed: true, Replacing: true, Gate: workerv1.ReplacementGateAdmitted}}, "",
			renderroles.Condition{Status: "False", Reason: "ReplacementInProgress", Message: "2 of 5 instances run the current configuration (d 1 of 2, p 1 of 3); one replica per role is replaced at a time: " +
				"d waits for its replacement to be admitted, p waits for its replacement to be Ready (capacity-preserving cadence)"}},
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
		{"held by the cache: the outdated instances stay while the KV cache connection is unresolved", map[string]renderroles.RoleRollout{
			"s": {Desired: 3, UpToDate: 1, Observed: true, Held: "RolloutHeldByCache: BindingNotFound: KVCachePoolBinding ns/b does not exist"}}, "",
			renderroles.Condition{Status: "False", Reason: "RolloutHeldByCache", Message: "1 of 3 instances run the current configuration (s 1 of 3); the outdated replicas keep serving with the cache client they have until the KV cache connection resolves: BindingNotFound: KVCachePoolBinding ns/b does not exist"}},
		{"the cache hold outranks a replacement in flight: no further departure starts", map[string]renderroles.RoleRollout{
			"s": {Desired: 2, UpToDate: 0, Observed: true, Replacing: true, Gate: workerv1.ReplacementGateAdmitted, Held: "RolloutHeldByCache: BindingNotFound: gone"}}, "",
			renderroles.Condition{Status: "False", Reason: "RolloutHeldByCache", Message: "0 of 2 instances run the current configuration (s 0 of 2); the outdated replicas keep serving with the cache client they have until the KV cache connection resolves: BindingNotFound: gone"}},
		{"the cache hold named is the first held role's, by name", map[string]renderroles.RoleRollout{
			"p": {Desired: 1, UpToDate: 0, Observed: true, Held: "RolloutHeldByCache: BindingNotFound: p's"},
			"d": {Desired: 1, UpToDate: 0, Observed: true, Held: "RolloutHeldByCache: BindingNotFound: d's"}}, "",
			renderroles.Condition{Status: "False", Reason: "RolloutHeldByCache", Message: "0 of 2 instances run the current configuration (d 0 of 1, p 0 of 1); the outdated replicas keep serving with the cache client they have until the KV cache connection resolves: BindingNotFound: d's"}},
		{"near miss: a cache hold with no rollout pending is up to date", map[string]renderroles.RoleRollout{
			"s": {Desired: 2, UpToDate: 2, Observed: true, Held: "RolloutHeldByCache: BindingNotFound: gone"}}, "",
			renderroles.Condition{Status: "True", Reason: "UpToDate", Message: "all 2 instances run the current configuration"}},
		{"near miss: a cache hold on a current role does not hold another role's rollout", map[string]renderroles.RoleRollout{
			"p": {Desired: 1, UpToDate: 1, Observed: true, Held: "RolloutHeldByCache: BindingNotFound: gone"},
			"d": {Desired: 2, UpToDate: 1, Observed: true}}, "",
			renderroles.Condition{Status: "False", Reason: "RolloutInProgress", Message: "2 of 3 instances run the current configuration (d 1 of 2)"}},
		{"near miss: the weights hold outranks the cache hold", map[string]renderroles.RoleRollout{
			"s": {Desired: 1, UpToDate: 0, Observed: true, Held: "RolloutHeldByWeights: ClaimNotBound: claim w is Pending"}},
			"RolloutHeldByWeights: ClaimNotBound: claim w is Pending",
			renderroles.Condition{Status: "False", Reason: "RolloutHeldByWeights", Message: "0 of 1 instances run the current configuration (s 0 of 1); no Pod is created until the weights can be delivered: ClaimNotBound: claim w is Pending"}},
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
