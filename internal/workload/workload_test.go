package workload

import (
	"testing"
	"time"

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
