package replicas

import (
	"fmt"
	"slices"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/workload"
)

// Admission states of one instance, reported as ModelReplica status.quota and counted per role.
const (
	QuotaReserved    = "Reserved"
	QuotaPending     = "Pending"
	QuotaIncomplete  = "PodGroupIncomplete"
	QuotaPreempted   = "Preempted"
	QuotaParked      = "Parked"
	QuotaNoQueue     = "NoQueue"
	QuotaInFlight    = "InFlight"
	QuotaTerminating = "Terminating"
)

// InstanceQuota reads an instance's admission state from its group's Workload (nil while Kueue has
// built none) and its members on the API server.
func InstanceQuota(wl *kueue.Workload, members, terminating, size int) string {
	switch {
	case members == 0:
		return QuotaInFlight
	case terminating == members:
		return QuotaTerminating
	case wl == nil && members < size:
		return QuotaIncomplete // Kueue builds the group's Workload once all its Pods exist
	case wl == nil:
		return QuotaInFlight
	case wl.Annotations[workerv1.AnnotationParkedGeneration] != "" || (wl.Spec.Active != nil && !*wl.Spec.Active):
		return QuotaParked
	}
	if workload.HoldsQuota(wl) {
		return QuotaReserved
	}
	if evicted := workload.Evicted(wl); evicted != nil && evicted.Reason == kueue.WorkloadEvictedByPreemption {
		return QuotaPreempted
	}
	if c := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadQuotaReserved); c != nil && c.Reason == kueue.WorkloadInadmissible &&
		strings.HasPrefix(c.Message, "LocalQueue ") && strings.HasSuffix(c.Message, " doesn't exist") {
		return QuotaNoQueue
	}
	return QuotaPending
}

// WaitsAfterPreemption reports whether an instance in admission state, whose group Kueue preempted
// (its PreemptedBy is known), still waits because of it: counted Preempted until its group holds
// quota again, whatever Kueue's Workload says meanwhile (Kueue deletes the preempted Pods, and the
// replacements' group waits in the queue as any other). Parked and Terminating say more.
func WaitsAfterPreemption(state string) bool {
	return state == QuotaPending || state == QuotaIncomplete || state == QuotaInFlight || state == QuotaPreempted
}

// preemptionReasons say Kueue's preemption reasons in words.
var preemptionReasons = map[string]string{
	kueue.InClusterQueueReason:                "it has a higher priority in the same ClusterQueue",
	kueue.InCohortReclamationReason:           "its ClusterQueue took back quota this one borrowed in their cohort",
	kueue.InCohortReclaimWhileBorrowingReason: "its ClusterQueue took back quota in their cohort while borrowing",
	kueue.InCohortFairSharingReason:           "fair sharing in their cohort gave it the quota",
}

// PreemptedBy says who Kueue preempted an instance's group for and why: preemptor describes the
// preemptor (its Workload and what it belongs to; "" when Kueue did not name it) and reason is
// Kueue's reason, quoted as well for a reader who searches Kueue's documentation.
func PreemptedBy(reason, preemptor string) string {
	who := "another workload"
	if preemptor != "" {
		who = preemptor
	}
	why, known := preemptionReasons[reason]
	switch {
	case reason == "":
		return "Kueue preempted this replica's group for " + who
	case !known:
		return fmt.Sprintf("Kueue preempted this replica's group for %s (reason %s)", who, reason)
	}
	return fmt.Sprintf("Kueue preempted this replica's group for %s: %s (reason %s)", who, why, reason)
}

// PodReady reports whether a Pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// countLive counts the live members of an instance for WeightsReady: deleting, Succeeded and Failed
// Pods are skipped.
func countLive(members []*corev1.Pod) v1alpha1.MemberCounts {
	var w v1alpha1.MemberCounts
	for _, pod := range members {
		if pod == nil || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		w.Live++
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReadyToStartContainers && c.Status == corev1.ConditionTrue {
				w.Started++
			}
		}
		for _, s := range pod.Status.ContainerStatuses {
			if s.Name == naming.MainContainer && s.Ready {
				w.MainReady++
			}
		}
	}
	return w
}

// ReplicaPodsCreated is a replica's PodsCreated condition: True, or False with the API server's
// message of the refused create.
func ReplicaPodsCreated(refusal string) xpv2.Condition {
	if refusal == "" {
		return xpv2.Condition{Type: v1alpha1.PodsCreatedConditionType, Status: corev1.ConditionTrue, Reason: v1alpha1.PodsCreatedReason, LastTransitionTime: metav1.Now(),
			Message: "the API server accepted every member's Pod"}
	}
	return xpv2.Condition{Type: v1alpha1.PodsCreatedConditionType, Status: corev1.ConditionFalse, Reason: v1alpha1.PodRefusedReason, Message: refusal, LastTransitionTime: metav1.Now()}
}

// MemberStatus reports an instance from its member Pods on the API server and its group's Workload
// (nil while Kueue has built none): how many members exist and are Ready, and its admission.
func MemberStatus(members []*corev1.Pod, wl *kueue.Workload, group, role string, size int) v1alpha1.ModelReplicaStatus {
	var ready, terminating int32
	for _, pod := range members {
		if PodReady(pod) {
			ready++
		}
		if pod.DeletionTimestamp != nil {
			terminating++
		}
	}
	quota := InstanceQuota(wl, len(members), int(terminating), size)
	admitted := workload.Admitted(wl)
	return v1alpha1.ModelReplicaStatus{
		Members: ptr.To(int32(len(members))), ReadyMembers: ptr.To(ready), Size: ptr.To(int32(size)), Workload: group,
		Quota: quota, QuotaReserved: ptr.To(quota == QuotaReserved), Admitted: ptr.To(admitted),
		Live: ptr.To(countLive(members)), Flavors: AssignedFlavors(wl, role),
	}
}

// AssignedFlavors are the ResourceFlavors a Workload was admitted on for the PodSet of a role: the
// PodSet is named by the members' kueue.x-k8s.io/role-hash, which the render sets to the role's
// name. Sorted and distinct; nil before admission.
func AssignedFlavors(wl *kueue.Workload, role string) []string {
	if wl == nil || wl.Status.Admission == nil {
		return nil
	}
	var out []string
	for _, a := range wl.Status.Admission.PodSetAssignments {
		if string(a.Name) != role {
			continue
		}
		for _, f := range a.Flavors {
			if !slices.Contains(out, string(f)) {
				out = append(out, string(f))
			}
		}
	}
	slices.Sort(out)
	return out
}
