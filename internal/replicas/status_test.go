package replicas_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
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
			assert.Equal(t, tc.want, replicas.InstanceQuota(tc.wl, tc.members, tc.terminating, tc.size))
		})
	}
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
			assert.Equal(t, tc.want, replicas.AssignedFlavors(tc.wl, "server"))
		})
	}
}

// TestMemberStatusCountsLive: deleting, Succeeded and Failed Pods are not counted for WeightsReady.
func TestMemberStatusCountsLive(t *testing.T) {
	started := corev1.PodCondition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}
	live := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{started},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true}, {Name: "routing-proxy", Ready: true}}}}
	waiting := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	failed := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	deleting := live.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{}
	s := replicas.MemberStatus([]*corev1.Pod{live, waiting, failed, deleting}, nil, "g", "server", 4)
	assert.Equal(t, &v1alpha1.MemberCounts{Live: 2, Started: 1, MainReady: 1}, s.Live)
}

func TestPreemptedBy(t *testing.T) {
	for _, row := range []struct{ rule, reason, preemptor, want string }{
		{"a priority preemption names the preemptor and says why", kueue.InClusterQueueReason, "Workload team-b/big-r0 of ModelDeployment team-b/big",
			"Kueue preempted this replica's group for Workload team-b/big-r0 of ModelDeployment team-b/big: it has a higher priority in the same ClusterQueue (reason InClusterQueue)"},
		{"a cohort's reclaim says the quota was borrowed", kueue.InCohortReclamationReason, "Workload batch/job-train",
			"Kueue preempted this replica's group for Workload batch/job-train: its ClusterQueue took back quota this one borrowed in their cohort (reason InCohortReclamation)"},
		{"a preemptor Kueue did not name is another workload", kueue.InClusterQueueReason, "",
			"Kueue preempted this replica's group for another workload: it has a higher priority in the same ClusterQueue (reason InClusterQueue)"},
		{"a reason this release does not know is quoted as it is", "InSomethingNew", "Workload a/b",
			"Kueue preempted this replica's group for Workload a/b (reason InSomethingNew)"},
		{"a reason Kueue did not give is not made up", "", "Workload a/b", "Kueue preempted this replica's group for Workload a/b"},
	} {
		t.Run(row.rule, func(t *testing.T) {
			if got := replicas.PreemptedBy(row.reason, row.preemptor); got != row.want {
				t.Errorf("PreemptedBy = %q\nwant %q", got, row.want)
			}
		})
	}
}

// TestLostNode: an instance names the first node its members stand on that stopped reporting.
func TestLostNode(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 12, 5, 15, 4, 5, 0, time.UTC))
	node := func(name string, status corev1.ConditionStatus) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: status, LastTransitionTime: since, Message: "Kubelet stopped posting node status."}}}}
	}
	member := func(name, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
	}
	nodes := map[string]*corev1.Node{"a": node("a", corev1.ConditionTrue), "b": node("b", corev1.ConditionUnknown), "gone": nil}
	for _, row := range []struct {
		rule    string
		members []*corev1.Pod
		want    string
	}{
		{"a member on a node whose Ready is Unknown names it, since when and why",
			[]*corev1.Pod{member("md-server-r0-m0", "a", corev1.PodRunning), member("md-server-r0-m1", "b", corev1.PodRunning)},
			"node b stopped reporting (Ready Unknown since 2026-12-05T15:04:05Z: Kubelet stopped posting node status); member md-server-r0-m1 stands on it until Kubernetes removes it: the Node's deletion or an out-of-service taint"},
		{"a member on a node since deleted names it",
			[]*corev1.Pod{member("md-server-r0-m0", "gone", corev1.PodRunning)},
			"node gone is gone; member md-server-r0-m0 stands on it until Kubernetes removes it"},
		{"near miss: every node Ready names none", []*corev1.Pod{member("md-server-r0-m0", "a", corev1.PodRunning)}, ""},
		{"near miss: a member not yet bound names none", []*corev1.Pod{member("md-server-r0-m0", "", corev1.PodPending)}, ""},
		{"near miss: a member that ended names none", []*corev1.Pod{member("md-server-r0-m0", "b", corev1.PodFailed)}, ""},
	} {
		t.Run(row.rule, func(t *testing.T) {
			assert.Equal(t, row.want, replicas.LostNode(row.members, nodes))
		})
	}
}
