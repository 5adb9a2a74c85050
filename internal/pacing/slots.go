package pacing

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/workload"
)

// AdmissionGate is the scheduling gate Kueue holds a Pod with until its group is admitted.
const AdmissionGate = "kueue.x-k8s.io/admission"

// LeaseWindow is how long a departing replica's cache blocks stay leased to it (the Mooncake block
// lease), named in every departure event.
const LeaseWindow = "30s"

// SlotsOf is the role's slots exactly as a pass of the pacer reads them from the role's replicas,
// their Pods and the namespace's Workloads: what `mdplane plan` simulates the rollout from, so the
// plan and the pacer cannot drift.
func SlotsOf(role *v1alpha1.ModelRole, replicas []v1alpha1.ModelReplica, pods []corev1.Pod, workloads []kueue.Workload) []Slot {
	slots, _ := ReadSlots(role, replicas, pods, GroupsAdmitted(role, replicas, WorkloadsAdmitted(workloads)))
	return slots
}

// WorkloadsAdmitted is whether each Workload, by name, is admitted.
func WorkloadsAdmitted(workloads []kueue.Workload) map[string]bool {
	admitted := make(map[string]bool, len(workloads))
	for i := range workloads {
		admitted[workloads[i].Name] = workload.Admitted(&workloads[i])
	}
	return admitted
}

// GroupsAdmitted is, by ordinal, whether the group Workload of a standing replica's slot is admitted;
// an ordinal whose group has no Workload is absent.
func GroupsAdmitted(role *v1alpha1.ModelRole, replicas []v1alpha1.ModelReplica, admitted map[string]bool) map[int32]bool {
	groups := map[int32]bool{}
	for _, r := range replicas {
		if a, ok := admitted[workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, r.Spec.Ordinal)]; ok {
			groups[r.Spec.Ordinal] = a
		}
	}
	return groups
}

// OutsideRollout reports a role whose replicas are never replaced for configuration drift: the
// members and the Ray head of an Elastic EP deployment, whose profile pins the configuration. An
// edit reaches the members created later, by width growth or a departure's rebuild.
func OutsideRollout(role *v1alpha1.ModelRole) bool { return role.Spec.Elastic != nil }

// ReadSlots is each standing replica's slot, and which ordinals still have Pods. A slot's group name
// is its ordinal's, shared by the replica that left it and the one that replaces it, so the group's
// Workload alone cannot tell whose admission it is (Crossplane may even re-create a retired
// replica's Pod, which then rejoins the old, admitted group): a replica counts as admitted only
// through an ungated Pod of its own.
func ReadSlots(role *v1alpha1.ModelRole, roleReplicas []v1alpha1.ModelReplica, pods []corev1.Pod, admittedGroups map[int32]bool) ([]Slot, map[int32]bool) {
	ungated, lost, present := map[types.UID]bool{}, map[types.UID]bool{}, map[int32]bool{}
	ready := map[types.UID]int32{}
	for i := range pods {
		pod := &pods[i] // by index: a pass reads every Pod of the role, and a Pod is a large value
		o, err := strconv.ParseInt(pod.Labels[workerv1.LabelPodOrdinal], 10, 32)
		if err == nil {
			present[int32(o)] = true
		}
		owner := metav1.GetControllerOf(pod)
		if owner != nil && pod.DeletionTimestamp != nil {
			lost[owner.UID] = true
		}
		if err != nil || owner == nil || pod.DeletionTimestamp != nil {
			continue // a departing replica's Pods say nothing of its replacement
		}
		ungated[owner.UID] = ungated[owner.UID] || !Gated(pod)
		if replicas.PodReady(pod) {
			ready[owner.UID]++
		}
	}
	var slots []Slot
	for i := range roleReplicas {
		r := &roleReplicas[i]
		if r.DeletionTimestamp != nil {
			continue // leaving: its slot counts as empty
		}
		slots = append(slots, Slot{Ordinal: r.Spec.Ordinal, Replica: r.Name, Revision: r.Spec.Revision,
			Outdated: !OutsideRollout(role) && !r.Spec.UpToDate(role.Spec), EverAdmitted: ungated[r.UID],
			Admitted: admittedGroups[r.Spec.Ordinal] && ungated[r.UID], Broken: lost[r.UID], Ready: ready[r.UID] >= sizeOf(role, r)})
	}
	return slots, present
}

// sizeOf is how many members a replica's revision gives it: as its members controller reported, else
// the role's current size when the replica is on the current revision, else one.
func sizeOf(role *v1alpha1.ModelRole, r *v1alpha1.ModelReplica) int32 {
	switch {
	case r.Status.Size != nil && *r.Status.Size > 0:
		return *r.Status.Size
	case r.Spec.Revision == role.Spec.Revision && role.Spec.Size > 0:
		return role.Spec.Size
	}
	return 1
}

// Gated reports a Pod Kueue still holds at its admission gate: its group has not been admitted.
func Gated(pod *corev1.Pod) bool {
	for _, g := range pod.Spec.SchedulingGates {
		if g.Name == AdmissionGate {
			return true
		}
	}
	return false
}
