package workload

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

func withConditions(conds ...metav1.Condition) *kueue.Workload {
	return &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: conds}}
}

func condition(kind string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: kind, Status: status, Reason: "Test", LastTransitionTime: metav1.NewTime(time.Unix(100, 0))}
}

func TestWorkloadState(t *testing.T) {
	reserved := condition(kueue.WorkloadQuotaReserved, metav1.ConditionTrue)
	evicted := condition(kueue.WorkloadEvicted, metav1.ConditionTrue)
	for _, row := range []struct {
		rule                                  string
		wl                                    *kueue.Workload
		admitted, reserved, holds, wasEvicted bool
	}{
		{"a missing Workload is nothing", nil, false, false, false, false},
		{"a Workload without conditions waits", withConditions(), false, false, false, false},
		{"a reservation holds quota", withConditions(reserved), false, true, true, false},
		{"a reservation not True holds nothing", withConditions(condition(kueue.WorkloadQuotaReserved, metav1.ConditionFalse)), false, false, false, false},
		{"an evicted Workload keeps its reservation but is giving it up", withConditions(reserved, evicted), false, true, false, true},
		{"an Evicted condition gone False is no eviction", withConditions(reserved, condition(kueue.WorkloadEvicted, metav1.ConditionFalse)), false, true, true, false},
		{"admitted is its own condition", withConditions(reserved, condition(kueue.WorkloadAdmitted, metav1.ConditionTrue)), true, true, true, false},
	} {
		t.Run(row.rule, func(t *testing.T) {
			if got := Admitted(row.wl); got != row.admitted {
				t.Errorf("Admitted = %v", got)
			}
			if got := QuotaReserved(row.wl); got != row.reserved {
				t.Errorf("QuotaReserved = %v", got)
			}
			if got := HoldsQuota(row.wl); got != row.holds {
				t.Errorf("HoldsQuota = %v", got)
			}
			if got := Evicted(row.wl) != nil; got != row.wasEvicted {
				t.Errorf("Evicted = %v", got)
			}
			if since, ok := QuotaReservedSince(row.wl); ok != row.reserved || (ok && !since.Equal(time.Unix(100, 0))) {
				t.Errorf("QuotaReservedSince = %v, %v", since, ok)
			}
		})
	}
}

func TestPreemption(t *testing.T) {
	kueueMessage := "Preempted to accommodate a workload (UID: 5f1c-aa, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: /gpu; preemptee path: /gpu"
	preempted := func(status metav1.ConditionStatus, message string) metav1.Condition {
		return metav1.Condition{Type: kueue.WorkloadPreempted, Status: status, Reason: kueue.InClusterQueueReason, Message: message}
	}
	for _, row := range []struct {
		rule              string
		wl                *kueue.Workload
		reason, preemptor string
		ok                bool
	}{
		{"Kueue's message names the preemptor's Workload UID", withConditions(preempted(metav1.ConditionTrue, kueueMessage)), kueue.InClusterQueueReason, "5f1c-aa", true},
		{"near miss: a preemption Kueue cleared on readmission is none", withConditions(preempted(metav1.ConditionFalse, kueueMessage)), "", "", false},
		{"a message without a UID still tells the reason", withConditions(preempted(metav1.ConditionTrue, "Preempted")), kueue.InClusterQueueReason, "", true},
		{"an UNKNOWN UID is no preemptor", withConditions(preempted(metav1.ConditionTrue, "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN)")), kueue.InClusterQueueReason, "", true},
		{"a missing Workload was not preempted", nil, "", "", false},
	} {
		t.Run(row.rule, func(t *testing.T) {
			reason, preemptor, ok := Preemption(row.wl)
			if reason != row.reason || preemptor != row.preemptor || ok != row.ok {
				t.Errorf("Preemption = %q, %q, %v; want %q, %q, %v", reason, preemptor, ok, row.reason, row.preemptor, row.ok)
			}
		})
	}
}

func TestPodPreemption(t *testing.T) {
	stopped := func(reason, message string) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: "TerminationTarget", Status: corev1.ConditionTrue, Reason: reason, Message: message}}}}
	}
	message := func(words string) string {
		return "Preempted to accommodate a workload (UID: 5f1c-aa, JobUID: UNKNOWN) due to " + words + "; preemptor path: /gpu; preemptee path: /gpu"
	}
	for _, row := range []struct {
		rule              string
		pod               *corev1.Pod
		reason, preemptor string
		ok                bool
	}{
		{"a Pod stopped for its group's preemption names the preemptor and the reason in words",
			stopped("WorkloadEvictedDueToPreempted", message("prioritization in the ClusterQueue")), kueue.InClusterQueueReason, "5f1c-aa", true},
		{"a cohort's reclaim while borrowing is told from a plain reclaim",
			stopped("WorkloadEvictedDueToPreempted", message("reclamation within the cohort while borrowing")), kueue.InCohortReclaimWhileBorrowingReason, "5f1c-aa", true},
		{"a plain reclaim", stopped("WorkloadEvictedDueToPreempted", message("reclamation within the cohort")), kueue.InCohortReclamationReason, "5f1c-aa", true},
		{"words this release does not know leave the reason unsaid", stopped("WorkloadEvictedDueToPreempted", message("something new")), "", "5f1c-aa", true},
		{"near miss: a Pod stopped for another eviction was not preempted", stopped("WorkloadEvictedDueToPodsReadyTimeout", "Exceeded the PodsReady timeout"), "", "", false},
		{"a Pod Kueue did not stop", &corev1.Pod{}, "", "", false},
	} {
		t.Run(row.rule, func(t *testing.T) {
			reason, preemptor, ok := PodPreemption(row.pod)
			if reason != row.reason || preemptor != row.preemptor || ok != row.ok {
				t.Errorf("PodPreemption = %q, %q, %v; want %q, %q, %v", reason, preemptor, ok, row.reason, row.preemptor, row.ok)
			}
		})
	}
}

// TestProvisioning: what a group's provisioning check says of its nodes, one row per state Kueue's
// ProvisioningRequest controller gives it; near misses: another check, a Ready one, and a group
// still waiting for quota.
func TestProvisioning(t *testing.T) {
	const check = "mdplane-provisioning-best-effort-atomic-scale-up-1a2b3c4d"
	reserved := condition(kueue.WorkloadQuotaReserved, metav1.ConditionTrue)
	with := func(wl *kueue.Workload, checks ...kueue.AdmissionCheckState) *kueue.Workload {
		wl.Status.AdmissionChecks = checks
		return wl
	}
	refusedAt := metav1.NewTime(time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC))
	for _, row := range []struct {
		rule string
		wl   *kueue.Workload
		want string
	}{
		{"a reserved group whose request is not answered waits for its nodes",
			with(withConditions(reserved), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStatePending}),
			"waiting for its nodes to be provisioned (check " + check + ")"},
		{"the provisioner's progress is quoted",
			with(withConditions(reserved), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStatePending, Message: "Capacity is not found, CA will try to find it later."}),
			"waiting for its nodes to be provisioned (check " + check + "): Capacity is not found, CA will try to find it later."},
		{"a refusal Kueue holds until its backoff ends quotes the provisioner, counts and tells when Kueue asks again",
			with(withConditions(reserved), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStateRetry, LastTransitionTime: refusedAt,
				RequeueAfterSeconds: ptrTo(int32(120)), RetryCount: ptrTo(int32(1)), Message: "Retrying after failure: CA could not find requested capacity"}),
			"the node provisioner refused the group's nodes 2 time(s): CA could not find requested capacity; Kueue asks again at 2026-12-05T20:02:00Z"},
		{"asked again, the last refusal is still told",
			with(withConditions(reserved), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStatePending, RetryCount: ptrTo(int32(1)),
				Message: "Retrying after failure: CA could not find requested capacity"}),
			"the node provisioner refused the group's nodes 1 time(s): CA could not find requested capacity; Kueue is asking again"},
		{"between eviction and the next reservation, the refusals are counted",
			with(withConditions(), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStatePending, RetryCount: ptrTo(int32(2)),
				Message: "Reset to Pending after eviction. Previously: Retry"}),
			"the node provisioner refused the group's nodes 2 time(s); Kueue is asking again (check " + check + ")"},
		{"a rejected check says Kueue gave up",
			with(withConditions(reserved), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStateRejected, Message: "CA could not find requested capacity"}),
			"the node provisioner refused the group's nodes and Kueue gave up (it deactivates the group): CA could not find requested capacity"},
		{"near miss: a Ready check says nothing", with(withConditions(reserved), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStateReady}), ""},
		{"near miss: a group waiting for quota is not yet provisioning", with(withConditions(), kueue.AdmissionCheckState{Name: check, State: kueue.CheckStatePending}), ""},
		{"near miss: another check is not a provisioning check",
			with(withConditions(reserved), kueue.AdmissionCheckState{Name: "gpustack-model-deployment-joint", State: kueue.CheckStatePending, Message: "held"}), ""},
		{"near miss: no Workload", nil, ""},
	} {
		t.Run(row.rule, func(t *testing.T) {
			if got := Provisioning(row.wl); got != row.want {
				t.Errorf("got %q\nwant %q", got, row.want)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }

func TestByNamePointsIntoTheList(t *testing.T) {
	items := []kueue.Workload{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, {ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	got := ByName(items)
	if len(got) != 2 || got["a"] != &items[0] || got["b"] != &items[1] {
		t.Errorf("ByName = %v, want each name pointing at its item", got)
	}
	if got["c"] != nil {
		t.Errorf("a name not in the list found %v", got["c"])
	}
}
