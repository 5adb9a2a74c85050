package workload

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// ByName indexes Workloads by name, pointing into items: a pass over a set of hundreds reads the
// cache's list in place.
func ByName(items []kueue.Workload) map[string]*kueue.Workload {
	out := make(map[string]*kueue.Workload, len(items))
	for i := range items {
		out[items[i].Name] = &items[i]
	}
	return out
}

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

// preemptorUID finds the preemptor's Workload UID in Kueue's preemption message ("Preempted to
// accommodate a workload (UID: <uid>, JobUID: <uid>) due to <words>; ...").
var preemptorUID = regexp.MustCompile(`\(UID: ([^,)\s]+)`)

// preemptorOf is the preemptor's Workload UID a preemption message names, "" when none.
func preemptorOf(message string) string {
	if m := preemptorUID.FindStringSubmatch(message); len(m) == 2 && m[1] != "UNKNOWN" {
		return m[1]
	}
	return ""
}

// Preemption is the Workload's latest preemption while it stands (Kueue clears it when the Workload
// reserves quota again): Kueue's reason (InClusterQueue, InCohortReclamation, ...) and the UID of
// the Workload it was preempted for, "" when the message does not name one.
func Preemption(wl *kueue.Workload) (reason, preemptor string, ok bool) {
	if wl == nil {
		return "", "", false
	}
	c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPreempted)
	if c == nil || c.Status != metav1.ConditionTrue {
		return "", "", false
	}
	return c.Reason, preemptorOf(c.Message), true
}

// The condition Kueue gives a Pod it stops, and its reason when the Pod's group was preempted.
const (
	podTerminationTarget = "TerminationTarget"
	podStoppedPreempted  = "WorkloadEvictedDueToPreempted"
)

// preemptionWords are Kueue's words for its preemption reasons in a preemption message, the
// longest first where one begins another.
var preemptionWords = []struct{ words, reason string }{
	{"reclamation within the cohort while borrowing", kueue.InCohortReclaimWhileBorrowingReason},
	{"reclamation within the cohort", kueue.InCohortReclamationReason},
	{"Fair Sharing within the cohort", kueue.InCohortFairSharingReason},
	{"prioritization in the ClusterQueue", kueue.InClusterQueueReason},
}

// PodPreemption is what Kueue told a Pod it stopped because its group was preempted (its
// TerminationTarget condition, which the Pod keeps while it terminates): the reason, read from the
// message's words, and the preemptor's Workload UID.
func PodPreemption(pod *corev1.Pod) (reason, preemptor string, ok bool) {
	if pod == nil {
		return "", "", false
	}
	for _, c := range pod.Status.Conditions {
		if string(c.Type) != podTerminationTarget || c.Status != corev1.ConditionTrue || c.Reason != podStoppedPreempted {
			continue
		}
		for _, w := range preemptionWords {
			if strings.Contains(c.Message, "due to "+w.words) {
				reason = w.reason
				break
			}
		}
		return reason, preemptorOf(c.Message), true
	}
	return "", "", false
}

// Provisioning is what the first of mdplane's provisioning checks (a ProvisioningRequest check, see
// workerv1.ProvisioningCheckPrefix) that is not Ready says of the group's nodes: the provisioner's
// refusals and when Kueue asks again, or that they are being provisioned; "" when none waits, and
// while the group waits for quota, before Kueue asks for nodes. Kueue holds a refused check in Retry
// (quota kept) until its backoff ends, then evicts the group, resets the check and asks again at
// once.
func Provisioning(wl *kueue.Workload) string {
	if wl == nil {
		return ""
	}
	for _, c := range wl.Status.AdmissionChecks {
		if !strings.HasPrefix(string(c.Name), workerv1.ProvisioningCheckPrefix) || c.State == kueue.CheckStateReady {
			continue
		}
		refusal, refused := strings.CutPrefix(c.Message, retryingAfterFailure)
		retries := int32(0)
		if c.RetryCount != nil {
			retries = *c.RetryCount
		}
		switch {
		case c.State == kueue.CheckStateRejected:
			return "the node provisioner refused the group's nodes and Kueue gave up (it deactivates the group): " + c.Message
		case c.State == kueue.CheckStateRetry:
			text := fmt.Sprintf("the node provisioner refused the group's nodes %d time(s): %s", retries+1, refusal)
			if c.RequeueAfterSeconds != nil {
				text += "; Kueue asks again at " + c.LastTransitionTime.Add(time.Duration(*c.RequeueAfterSeconds)*time.Second).UTC().Format(time.RFC3339)
			}
			return text
		case retries > 0 && refused:
			return fmt.Sprintf("the node provisioner refused the group's nodes %d time(s): %s; Kueue is asking again", retries, refusal)
		case retries > 0:
			return fmt.Sprintf("the node provisioner refused the group's nodes %d time(s); Kueue is asking again (check %s)", retries, c.Name)
		case !QuotaReserved(wl):
			continue
		case c.Message != "" && !strings.HasPrefix(c.Message, resetAfterEviction):
			return fmt.Sprintf("waiting for its nodes to be provisioned (check %s): %s", c.Name, c.Message)
		}
		return fmt.Sprintf("waiting for its nodes to be provisioned (check %s)", c.Name)
	}
	return ""
}

// Kueue's words on a provisioning check: a refused request it asks again, and a check it reset
// when it evicted the group.
const (
	retryingAfterFailure = "Retrying after failure: "
	resetAfterEviction   = "Reset to Pending after eviction."
)
