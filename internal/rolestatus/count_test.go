package rolestatus_test

import (
	"slices"
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/rolestatus"
)

// replica is a ModelReplica of slot ordinal on revision, Ready as ready.
func replica(name string, ordinal int32, revision string, ready bool) *v1alpha1.ModelReplica {
	r := &v1alpha1.ModelReplica{Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "chat", RoleName: "server", Ordinal: ordinal, Revision: revision}}
	r.Name = name
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	r.Status.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: status})
	return r
}

func leaving(r *v1alpha1.ModelReplica) *v1alpha1.ModelReplica {
	r.DeletionTimestamp = &metav1.Time{}
	return r
}

// reporting is a replica that reported its members and the admission state quota.
func reporting(r *v1alpha1.ModelReplica, quota string) *v1alpha1.ModelReplica {
	r.Status.Members, r.Status.Size, r.Status.Quota = ptr.To[int32](1), ptr.To[int32](1), quota
	return r
}

// workload is a group's Workload: waiting for quota, or holding it on flavors of the role's PodSet.
func workload(flavors ...string) *kueue.Workload {
	wl := &kueue.Workload{}
	if len(flavors) == 0 {
		return wl
	}
	wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}}
	assignment := kueue.PodSetAssignment{Name: "server", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{}}
	for i, f := range flavors {
		assignment.Flavors[corev1.ResourceName("r"+string(rune('0'+i)))] = kueue.ResourceFlavorReference(f)
	}
	wl.Status.Admission = &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{assignment}}
	return wl
}

func TestCount(t *testing.T) {
	spec := v1alpha1.ModelRoleSpec{DeploymentName: "chat", RoleName: "server", Replicas: 3, Size: 1, Revision: "new"}
	all := func(ready bool) []*v1alpha1.ModelReplica {
		return []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "new", true), replica("c", 2, "new", ready)}
	}
	t.Run("is ready once every slot holds a ready replica", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(false)})
		assert.False(t, s.Ready)
		assert.EqualValues(t, 2, *s.Status.Ready)
		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(true)})
		assert.True(t, s.Ready)
		assert.EqualValues(t, 3, *s.Status.Ready)
		assert.EqualValues(t, 3, *s.Status.UpToDate)
	})
	t.Run("counts a slot whose replica is being deleted as Terminating and an empty one as in flight", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{leaving(replica("a", 0, "new", true)), replica("b", 1, "old", true)}})
		assert.Equal(t, map[string]int32{"Terminating": 1, "InFlight": 2}, s.Status.Quota)
		assert.EqualValues(t, 0, *s.Status.UpToDate)
	})
	t.Run("counts the standing replicas by the mode of the revision each runs, not the role's current one", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "old", true)},
			TakesOver: map[string]bool{"new": true, "old": false}})
		assert.Equal(t, v1alpha1.DeployedModes{Managed: 1, Unmanaged: 1}, *s.Status.Modes)
	})
	t.Run("a replica whose revision is not read yet counts in no mode", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "old", true)},
			TakesOver: map[string]bool{"new": false}})
		assert.Equal(t, v1alpha1.DeployedModes{Managed: 1}, *s.Status.Modes)
	})
	t.Run("reports the flavors its standing replicas' Workloads hold quota on, once each, sorted", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "new", true)},
			Workloads: map[int32]*kueue.Workload{0: workload("h100-spot"), 1: workload("a-reserved", "h100-spot")}})
		assert.Equal(t, []string{"a-reserved", "h100-spot"}, s.Status.AssignedFlavors)
	})
	t.Run("reads a slot's admission state from its Workload once its replica's Pods exist, ahead of the replica's report", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			reporting(replica("a", 0, "new", false), "Pending"), reporting(replica("b", 1, "new", false), "Reserved"), reporting(replica("c", 2, "new", false), "Pending")},
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: workload()}})
		assert.Equal(t, map[string]int32{"Reserved": 1, "Pending": 2}, s.Status.Quota, "a reserved, b waiting again, c with no Workload as it reported")
		assert.EqualValues(t, 1, *s.Status.QuotaReserved)
	})
	t.Run("a replica whose Pods are not reported yet, or are all leaving, counts as it reported", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			replica("a", 0, "new", false), reporting(replica("b", 1, "new", false), "Terminating")},
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: workload("h100")}})
		assert.Equal(t, map[string]int32{"InFlight": 2, "Terminating": 1}, s.Status.Quota)
	})
	t.Run("a replica above replicas is not counted: the rollout controller retires it", func(t *testing.T) {
		one := spec
		one.Replicas = 1
		s := rolestatus.Count(rolestatus.Observed{Spec: one, Replicas: all(true)})
		assert.True(t, s.Ready)
		assert.EqualValues(t, 1, *s.Status.Ready)
	})
	t.Run("keeps a slot's PodsReady timeouts until its replica is Ready", func(t *testing.T) {
		timeouts := map[string]v1alpha1.ReadyTimeout{"r0": {Count: 2}, "r1": {Count: 1}, "r2": {Count: 3}}
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, ReadyTimeouts: timeouts,
			Replicas: []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "new", false)}})
		assert.Equal(t, map[string]v1alpha1.ReadyTimeout{"r1": {Count: 1}, "r2": {Count: 3}}, s.Status.ReadyTimeouts,
			"r0 Ready drops its count; r1 loading and r2 vacant keep theirs")
	})
	t.Run("names the lowest slot standing on a node that stopped reporting, leaving replicas by their last report", func(t *testing.T) {
		onLostNode := func(r *v1alpha1.ModelReplica, node string) *v1alpha1.ModelReplica {
			r.Status.LostNode = "node " + node + " stopped reporting"
			return r
		}
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			replica("a", 0, "new", true), onLostNode(leaving(replica("b", 1, "new", false)), "gpu-7"), onLostNode(replica("c", 2, "new", false), "gpu-8")}})
		assert.Equal(t, "r1: node gpu-7 stopped reporting", s.Status.LostNode)
		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(true)})
		assert.Empty(t, s.Status.LostNode, "near miss: every node reporting names none")
	})
	t.Run("says what the provisioning check tells its lowest slot waiting for nodes", func(t *testing.T) {
		waiting := func(message string) *kueue.Workload {
			wl := workload("h100")
			wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: "mdplane-provisioning-x", State: kueue.CheckStatePending, Message: message}}
			return wl
		}
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(false),
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: waiting("Capacity is not found"), 2: waiting("")}})
		assert.Equal(t, "r1: waiting for its nodes to be provisioned (check mdplane-provisioning-x): Capacity is not found", s.Status.Provisioning)
		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(true),
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: workload("h100"), 2: workload("h100")}})
		assert.Empty(t, s.Status.Provisioning, "near miss: groups without a provisioning check say nothing")
	})
	t.Run("names who preempted its lowest preempted slot, from the replica's report", func(t *testing.T) {
		preempted := func() *kueue.Workload {
			wl := workload()
			wl.Status.Conditions = []metav1.Condition{
				{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption},
				{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InClusterQueueReason, Message: "Preempted to accommodate a workload (UID: u1, JobUID: UNKNOWN)"}}
			return wl
		}
		told := reporting(replica("c", 2, "new", false), "Preempted")
		told.Status.PreemptedBy = "Kueue preempted this replica's group for Workload team-b/big-r0 of ModelDeployment team-b/big"
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			reporting(replica("a", 0, "new", true), "Reserved"), reporting(replica("b", 1, "new", false), "Reserved"), told},
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: preempted(), 2: preempted()}})
		assert.Equal(t, map[string]int32{"Reserved": 1, "Preempted": 2}, s.Status.Quota)
		assert.Equal(t, "r1: Kueue preempted this replica's group for another workload: it has a higher priority in the same ClusterQueue (reason InClusterQueue)",
			s.Status.PreemptedBy, "r1's report trails its Workload: Kueue's reason stands, the preemptor unnamed")

		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			reporting(replica("a", 0, "new", true), "Reserved"), reporting(replica("b", 1, "new", false), "Reserved"), told},
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: workload("h100"), 2: preempted()}})
		assert.Equal(t, "r2: "+told.Status.PreemptedBy, s.Status.PreemptedBy)

		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			reporting(replica("a", 0, "new", true), "Reserved"), reporting(replica("b", 1, "new", false), "Reserved"), told},
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: workload("h100"), 2: workload("h100")}})
		assert.Empty(t, s.Status.PreemptedBy, "near miss: a slot holding quota again waits behind no one, whatever its report still says")
		assert.Equal(t, map[string]int32{"Reserved": 3}, s.Status.Quota)

		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			reporting(replica("a", 0, "new", true), "Reserved"), reporting(replica("b", 1, "new", false), "Reserved"), told},
			Workloads: map[int32]*kueue.Workload{0: workload("h100"), 1: workload("h100"), 2: workload()}})
		assert.Equal(t, map[string]int32{"Reserved": 2, "Preempted": 1}, s.Status.Quota,
			"a preempted replica waiting in the queue counts Preempted though its Workload no longer says so")
		assert.Equal(t, "r2: "+told.Status.PreemptedBy, s.Status.PreemptedBy)
		assert.Equal(t, map[string]string{"r2": told.Status.PreemptedBy}, s.Status.Preemptions)
	})
	t.Run("a slot keeps its preemption through its replica's rebuild, until its group holds quota", func(t *testing.T) {
		who := "Kueue preempted this replica's group for Workload team-b/big-r0 of ModelDeployment team-b/big"
		leavingTold := leaving(reporting(replica("c-old", 2, "new", false), "Preempted"))
		leavingTold.Status.PreemptedBy = who
		rebuilt := reporting(replica("c-new", 2, "new", false), "Pending")
		base := []*v1alpha1.ModelReplica{reporting(replica("a", 0, "new", true), "Reserved"), reporting(replica("b", 1, "new", true), "Reserved")}
		held := map[int32]*kueue.Workload{0: workload("h100"), 1: workload("h100")}

		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: append(slices.Clone(base), leavingTold), Workloads: held})
		assert.Equal(t, map[string]string{"r2": who}, s.Status.Preemptions, "the leaving replica said so")
		assert.Equal(t, int32(1), s.Status.Quota["Terminating"])

		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: append(slices.Clone(base), rebuilt), Workloads: held, Preemptions: s.Status.Preemptions})
		assert.Equal(t, map[string]string{"r2": who}, s.Status.Preemptions, "kept for the rebuilt replica, whose group waits")
		assert.Equal(t, map[string]int32{"Reserved": 2, "Preempted": 1}, s.Status.Quota)

		held[2] = workload("h100")
		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: append(slices.Clone(base), rebuilt), Workloads: held, Preemptions: s.Status.Preemptions})
		assert.Nil(t, s.Status.Preemptions, "near miss: dropped once the group holds quota")
		assert.Empty(t, s.Status.PreemptedBy)
	})
	t.Run("a new role counts zero before any replica exists", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec})
		assert.Equal(t, ptr.To[int32](0), s.Status.Ready)
		assert.Equal(t, map[string]int32{"InFlight": 3}, s.Status.Quota)
		assert.False(t, s.PodsCreatedKnown, "no PodsCreated before any replica reports one")
	})
	t.Run("of two replicas of one slot, the first by name counts", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("b", 0, "new", false), replica("a", 0, "new", true)}})
		assert.EqualValues(t, 1, *s.Status.Ready)
	})
}
