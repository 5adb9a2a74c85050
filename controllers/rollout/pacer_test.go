package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
)

func TestStranded(t *testing.T) {
	standing := corev1.Pod{}
	leaving := corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}
	assert.False(t, Stranded(nil), "a group without Pods is the garbage collector's")
	assert.False(t, Stranded([]corev1.Pod{leaving, standing}), "a standing member keeps the Workload")
	assert.True(t, Stranded([]corev1.Pod{leaving, leaving}), "every member leaving: the Workload goes")
}

// TestPacedEvents: a pass runs on the changes it reads, not on every status change of a role's Pods.
func TestPacedEvents(t *testing.T) {
	gates := func(p *corev1.Pod) bool { return len(p.Spec.SchedulingGates) > 0 }
	pred := paced(func(old, new client.Object) bool { return gates(old.(*corev1.Pod)) != gates(new.(*corev1.Pod)) })
	gated := &corev1.Pod{Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}}}
	ready := gated.DeepCopy()
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	leaving := gated.DeepCopy()
	leaving.DeletionTimestamp = &metav1.Time{}
	for _, tc := range []struct {
		rule     string
		old, new *corev1.Pod
		wakes    bool
	}{
		{"a status change alone does not wake the pacer", gated, ready, false},
		{"a removed gate wakes it", gated, &corev1.Pod{}, true},
		{"a Pod starting to leave wakes it", gated, leaving, true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.wakes, pred.Update(ctrlevent.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.new}))
		})
	}
	assert.True(t, pred.Create(ctrlevent.CreateEvent{Object: gated}), "a new Pod wakes it")
}
