package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestLostMember(t *testing.T) {
	notReady := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m0"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}}
	deleted := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m1", DeletionTimestamp: &metav1.Time{}}}
	assert.Nil(t, lostMember([]corev1.Pod{notReady}), "a member that is merely not Ready (a NotReady node) is not a departure")
	assert.Equal(t, "m1", lostMember([]corev1.Pod{notReady, deleted}).Name, "a member being deleted retires the whole replica")
}

func TestServesMembers(t *testing.T) {
	old := &metav1.OwnerReference{UID: "old", Controller: ptr.To(true)}
	pod := func(owner string, leaving bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{UID: types.UID(owner), Controller: ptr.To(true)}}}}
		if leaving {
			p.DeletionTimestamp = &metav1.Time{}
		}
		return p
	}
	assert.True(t, servesMembers(old, []corev1.Pod{pod("old", false)}), "its own replica's member is still here")
	assert.True(t, servesMembers(old, []corev1.Pod{pod("other", true)}), "a leaving Pod of the slot is an old member")
	assert.False(t, servesMembers(old, []corev1.Pod{pod("new", false)}), "the next replica's standing Pods do not hold it")
	assert.False(t, servesMembers(old, nil), "no member left")
}
