package v1alpha1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
)

// A RoleRevision is stored as the data of a ControllerRevision and read back whole: the Pods of a
// replica are stamped from what comes back, so nothing may be lost on the way.
func TestRoleRevisionRoundTripsThroughTheScheme(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	codecs := serializer.NewCodecFactory(scheme)
	encoder := codecs.LegacyCodec(v1alpha1.SchemeGroupVersion)

	in := &v1alpha1.RoleRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.RoleRevisionKind},
		Revision: "5f7c9d",
		Size:     2,
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/component": "server"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "vllm/vllm-openai:v0.25.1"}}},
		},
	}
	data, err := runtime.Encode(encoder, in)
	require.NoError(t, err)

	out, _, err := codecs.UniversalDeserializer().Decode(data, nil, nil)
	require.NoError(t, err)
	assert.Equal(t, in, out)
}

func TestReplicaUpToDate(t *testing.T) {
	role := v1alpha1.ModelRoleSpec{Revision: "rev2", ConfigDigest: "cfg", RenderVersion: 3, MinRenderVersion: 2}
	cases := []struct {
		rule         string
		replica      v1alpha1.ModelReplicaSpec
		want, compat bool
	}{
		{"the current configuration on the current baseline", v1alpha1.ModelReplicaSpec{Revision: "rev2", ConfigDigest: "cfg", RenderVersion: 3}, true, false},
		{"an older baseline at or above the floor stays in place, older compatible", v1alpha1.ModelReplicaSpec{Revision: "rev1", ConfigDigest: "cfg", RenderVersion: 2}, true, true},
		{"a baseline below the floor is rolled", v1alpha1.ModelReplicaSpec{Revision: "rev0", ConfigDigest: "cfg", RenderVersion: 1}, false, false},
		{"another configuration is rolled", v1alpha1.ModelReplicaSpec{Revision: "rev9", ConfigDigest: "other", RenderVersion: 3}, false, false},
		{"a replica recorded without a digest is judged by revision", v1alpha1.ModelReplicaSpec{Revision: "rev2"}, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.replica.UpToDate(role))
			assert.Equal(t, tc.compat, tc.replica.OlderCompatible(role))
		})
	}
}
