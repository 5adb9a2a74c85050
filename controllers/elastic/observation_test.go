package elastic_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/elastic"
)

func replica(ordinal int32, admitted bool) v1alpha1.ModelReplica {
	return v1alpha1.ModelReplica{Spec: v1alpha1.ModelReplicaSpec{Ordinal: ordinal}, Status: v1alpha1.ModelReplicaStatus{Admitted: ptr.To(admitted)}}
}

func master(uid, boot string) corev1.Pod {
	return corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Labels: map[string]string{workerv1.LabelPodOrdinal: "0"},
		Annotations: map[string]string{"worker.gpustack.ai/elastic-boot-width": boot}}}
}

// TestObserve: desired is the width, admitted the members Kueue admitted; the layers mdplane cannot
// read say so; the hold reason names what is missing.
func TestObserve(t *testing.T) {
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{UID: "u", Generation: 4},
		Spec: workerv1.ModelDeploymentSpec{Roles: []workerv1.ModelDeploymentRole{{Name: "server",
			ElasticEP: &workerv1.ModelDeploymentRoleElasticEP{Width: 3, HeadInstanceType: "cpu"}}}}}
	role := elastic.RoleOf(md)
	cases := []struct {
		rule     string
		replicas []v1alpha1.ModelReplica
		pods     []corev1.Pod
		admitted int
		reason   string
	}{
		{"no master yet", nil, nil, 0, "the master (ordinal 0) has no Pod yet"},
		{"members not admitted yet", []v1alpha1.ModelReplica{replica(0, true), replica(1, true), replica(2, false)}, []corev1.Pod{master("m", "3")},
			2, "2 of 3 members are admitted"},
		{"a width grown past the master's boot width is the resize pass's to judge", []v1alpha1.ModelReplica{replica(0, true), replica(1, true), replica(2, true)},
			[]corev1.Pod{master("m", "2")}, 3, ""},
		{"every member admitted at the boot width", []v1alpha1.ModelReplica{replica(0, true), replica(1, true), replica(2, true), replica(3, true)},
			[]corev1.Pod{master("m", "3")}, 3, ""},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			o := elastic.Observe(md, role, c.replicas, c.pods)
			assert.Equal(t, "u", o.DeploymentUID)
			assert.Equal(t, int64(4), o.ObservedGeneration)
			assert.Equal(t, elastic.Layer{Known: true, Value: 3}, o.Desired)
			assert.Equal(t, elastic.Layer{Known: true, Value: c.admitted}, o.Admitted)
			assert.Equal(t, elastic.Layer{Reason: elastic.AllocatedUnknown}, o.Allocated)
			assert.Equal(t, elastic.Layer{Reason: elastic.RayUnknown}, o.Ray)
			assert.Equal(t, elastic.Layer{Reason: elastic.EffectiveUnknown}, o.Effective)
			if c.reason == "" {
				assert.Empty(t, o.Reason)
			} else {
				assert.Contains(t, o.Reason, c.reason)
			}
		})
	}
}
