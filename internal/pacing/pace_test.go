package pacing

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// running is an admitted replica on a revision; queued one whose group was never admitted.
func running(ordinal int32, revision string) Slot {
	return Slot{Ordinal: ordinal, Replica: "r" + strconv.Itoa(int(ordinal)), Revision: revision, Admitted: true, EverAdmitted: true, Ready: true}
}

// starting is a replica admitted whose members are not all Ready yet.
func starting(ordinal int32, revision string) Slot {
	s := running(ordinal, revision)
	s.Ready = false
	return s
}

func queued(ordinal int32, revision string) Slot {
	return Slot{Ordinal: ordinal, Replica: "r" + strconv.Itoa(int(ordinal)), Revision: revision}
}

func TestPace(t *testing.T) {
	cases := []struct {
		rule     string
		current  string
		replicas int32
		slots    []Slot
		inFlight int32
		replace  string
		next     int32
		cadence  workerv1.RolloutCadence // the admission cadence when empty
	}{
		{"every replica current: nothing to do", "b", 2, []Slot{running(0, "b"), running(1, "b")}, -1, "", -1, ""},
		{"the highest outdated ordinal leaves first once all are admitted", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), running(2, "a")}, -1, "r2", 2, ""},
		{"an empty slot holds the next departure: one replica missing at a time", "b", 3,
			[]Slot{running(0, "a"), running(1, "a")}, 2, "", 2, ""},
		{"a replacement waiting for admission holds the next departure", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), queued(2, "b")}, 2, "", 2, ""},
		{"an admitted replacement resolves, and the next outdated leaves", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), running(2, "b")}, 2, "r1", 1, ""},
		{"a replica that is not admitted holds the rollout", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), func() Slot { s := running(2, "b"); s.Admitted = false; return s }()}, -1, "", -1, ""},
		{"a queued replacement superseded by a newer edit is replaced at once", "c", 3,
			[]Slot{running(0, "a"), running(1, "a"), queued(2, "b")}, 2, "r2", 2, ""},
		{"a group still waiting for its first admission is replaced before admitted siblings", "b", 2,
			[]Slot{running(0, "a"), queued(1, "a")}, -1, "r1", 1, ""},
		{"a broken old replica is rebuilt before the next healthy one leaves", "b", 3,
			[]Slot{running(0, "a"), func() Slot { s := running(1, "a"); s.Broken = true; return s }(), running(2, "b")}, 2, "", 1, ""},
		{"a broken replica waits behind the replacement in flight", "b", 3,
			[]Slot{running(0, "a"), func() Slot { s := running(1, "a"); s.Broken = true; return s }(), queued(2, "b")}, 2, "", 2, ""},
		{"a broken replica is rebuilt on a role with nothing outdated", "b", 2,
			[]Slot{running(0, "b"), func() Slot { s := running(1, "b"); s.Broken = true; return s }()}, -1, "", 1, ""},
		{"an ordinal above replicas is a scale-down, not a rollout", "b", 1,
			[]Slot{running(0, "b"), running(1, "a")}, -1, "", -1, ""},
		{"admission cadence: an admitted replacement that is not Ready yet resolves", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), starting(2, "b")}, 2, "r1", 1, ""},
		{"capacity cadence: a replacement that is admitted but not Ready holds the next departure", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), starting(2, "b")}, 2, "", 2, workerv1.RolloutCadenceCapacity},
		{"capacity cadence: a Ready replacement resolves, and the next outdated leaves", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), running(2, "b")}, 2, "r1", 1, workerv1.RolloutCadenceCapacity},
		{"capacity cadence: any replica on the current revision not Ready holds the next departure", "b", 3,
			[]Slot{running(0, "a"), starting(1, "b"), running(2, "b")}, -1, "", -1, workerv1.RolloutCadenceCapacity},
		{"capacity cadence: an outdated replica that is not Ready leaves before a Ready one", "b", 3,
			[]Slot{starting(0, "a"), running(1, "a"), running(2, "a")}, -1, "r0", 0, workerv1.RolloutCadenceCapacity},
		{"capacity cadence: a queued replacement superseded by a newer edit is still replaced at once", "c", 3,
			[]Slot{running(0, "a"), running(1, "a"), queued(2, "b")}, 2, "r2", 2, workerv1.RolloutCadenceCapacity},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			for i := range tc.slots {
				tc.slots[i].Outdated = tc.slots[i].Revision != tc.current
			}
			cadence := tc.cadence
			if cadence == "" {
				cadence = workerv1.RolloutCadenceAdmission
			}
			step := Pace(tc.current, tc.replicas, tc.slots, tc.inFlight, cadence)
			assert.Equal(t, tc.replace, step.Replace, step.Message)
			assert.Equal(t, tc.next, step.InFlight, step.Message)
			assert.NotEmpty(t, step.Message)
		})
	}
}

func TestReadSlots(t *testing.T) {
	role := &v1alpha1.ModelRole{}
	replica := func(name string, uid types.UID, ordinal int32) v1alpha1.ModelReplica {
		r := v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}}
		r.Spec.Ordinal = ordinal
		return r
	}
	pod := func(owner types.UID, ordinal string, gated, leaving bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workerv1.LabelPodOrdinal: ordinal},
			OwnerReferences: []metav1.OwnerReference{{UID: owner, Controller: ptr.To(true)}}}}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: AdmissionGate}}
		}
		if leaving {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	cases := []struct {
		rule     string
		pods     []corev1.Pod
		admitted bool
		want     Slot
	}{
		{"a replica with an ungated Pod of its own in an admitted group is admitted", []corev1.Pod{pod("new", "2", false, false)}, true,
			Slot{Ordinal: 2, Replica: "r2-new", Admitted: true, EverAdmitted: true}},
		{"a replacement's gated Pods are not admitted though the group is", []corev1.Pod{pod("new", "2", true, false)}, true,
			Slot{Ordinal: 2, Replica: "r2-new"}},
		{"the retired replica's re-created Pod in the old admitted group does not admit its replacement",
			[]corev1.Pod{pod("old", "2", false, false), pod("new", "2", true, false)}, true,
			Slot{Ordinal: 2, Replica: "r2-new"}},
		{"a leaving Pod of its own says nothing of admission, and marks the replica broken", []corev1.Pod{pod("new", "2", false, true)}, true,
			Slot{Ordinal: 2, Replica: "r2-new", Broken: true}},
		{"an ungated Pod in a group no longer admitted was admitted once", []corev1.Pod{pod("new", "2", false, false)}, false,
			Slot{Ordinal: 2, Replica: "r2-new", EverAdmitted: true}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			slots, present := ReadSlots(role, []v1alpha1.ModelReplica{replica("r2-new", "new", 2)}, c.pods, map[int32]bool{2: c.admitted})
			assert.Equal(t, []Slot{c.want}, slots)
			assert.Equal(t, map[int32]bool{2: true}, present)
		})
	}
}
