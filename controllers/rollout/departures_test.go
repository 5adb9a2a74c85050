package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLostMember(t *testing.T) {
	notReady := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m0"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	deleted := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m1", DeletionTimestamp: &metav1.Time{}}}
	assert.Nil(t, lostMember([]corev1.Pod{notReady}), "a member that is merely not Ready (a NotReady node) is not a departure")
	assert.Equal(t, "m1", lostMember([]corev1.Pod{notReady, deleted}).Name, "a member being deleted retires the whole replica")
}
