package workload

import (
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// Admitted reports whether Kueue admitted the Workload: quota reserved and every check Ready. A
// missing Workload is not admitted.
func Admitted(wl *kueue.Workload) bool {
	return wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
}

// QuotaReserved reports whether the Workload's quota reservation stands, evicted or not: an evicted
// Workload keeps its reservation until its Pods are gone.
func QuotaReserved(wl *kueue.Workload) bool {
	return wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved)
}

// HoldsQuota reports whether the Workload holds a quota reservation it is not giving up: reserved
// and not evicted.
func HoldsQuota(wl *kueue.Workload) bool {
	return QuotaReserved(wl) && Evicted(wl) == nil
}

// QuotaReservedSince is when the Workload's quota reservation began, when it stands.
func QuotaReservedSince(wl *kueue.Workload) (time.Time, bool) {
	if !QuotaReserved(wl) {
		return time.Time{}, false
	}
	return apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved).LastTransitionTime.Time, true
}

// Evicted is the Workload's Evicted condition while it is True (its reason says who evicted it:
// preemption, a deactivation, a failed check), and nil otherwise.
func Evicted(wl *kueue.Workload) *metav1.Condition {
	if wl == nil {
		return nil
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadEvicted); c != nil && c.Status == metav1.ConditionTrue {
		return c
	}
	return nil
}
