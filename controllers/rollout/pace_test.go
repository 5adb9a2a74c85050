package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// running is an admitted replica on a revision; queued one whose group was never admitted.
func running(ordinal int32, revision string) Slot {
	return Slot{Ordinal: ordinal, Replica: "r" + string(rune('0'+ordinal)), Revision: revision, Admitted: true, EverAdmitted: true}
}

func queued(ordinal int32, revision string) Slot {
	return Slot{Ordinal: ordinal, Replica: "r" + string(rune('0'+ordinal)), Revision: revision}
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
	}{
		{"every replica current: nothing to do", "b", 2, []Slot{running(0, "b"), running(1, "b")}, -1, "", -1},
		{"the highest outdated ordinal leaves first once all are admitted", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), running(2, "a")}, -1, "r2", 2},
		{"an empty slot holds the next departure: one replica missing at a time", "b", 3,
			[]Slot{running(0, "a"), running(1, "a")}, 2, "", 2},
		{"a replacement waiting for admission holds the next departure", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), queued(2, "b")}, 2, "", 2},
		{"an admitted replacement resolves, and the next outdated leaves", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), running(2, "b")}, 2, "r1", 1},
		{"a replica that is not admitted holds the rollout", "b", 3,
			[]Slot{running(0, "a"), running(1, "a"), func() Slot { s := running(2, "b"); s.Admitted = false; return s }()}, -1, "", -1},
		{"a queued replacement superseded by a newer edit is replaced at once", "c", 3,
			[]Slot{running(0, "a"), running(1, "a"), queued(2, "b")}, 2, "r2", 2},
		{"a group still waiting for its first admission is replaced before admitted siblings", "b", 2,
			[]Slot{running(0, "a"), queued(1, "a")}, -1, "r1", 1},
		{"an ordinal above replicas is a scale-down, not a rollout", "b", 1,
			[]Slot{running(0, "b"), running(1, "a")}, -1, "", -1},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			for i := range tc.slots {
				tc.slots[i].Outdated = tc.slots[i].Revision != tc.current
			}
			step := Pace(tc.current, tc.replicas, tc.slots, tc.inFlight)
			assert.Equal(t, tc.replace, step.Replace, step.Message)
			assert.Equal(t, tc.next, step.InFlight, step.Message)
			assert.NotEmpty(t, step.Message)
		})
	}
}

func TestStranded(t *testing.T) {
	standing := corev1.Pod{}
	leaving := corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}
	assert.False(t, Stranded(nil), "a group without Pods is the garbage collector's")
	assert.False(t, Stranded([]corev1.Pod{leaving, standing}), "a standing member keeps the Workload")
	assert.True(t, Stranded([]corev1.Pod{leaving, leaving}), "every member leaving: the Workload goes")
}
