package replicas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
)

func TestNewReplica(t *testing.T) {
	r := replicas.NewReplica(&v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "chat-server", Namespace: "team-a", UID: "u"},
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "chat", RoleName: "server", Revision: "newrevisio", ConfigDigest: "d", RenderVersion: 2}}, 1)
	assert.Equal(t, "chat-server-r1-", r.GenerateName, "a replacement never collides with the replica it replaces")
	assert.Equal(t, v1alpha1.ModelReplicaSpec{DeploymentName: "chat", RoleName: "server", Ordinal: 1, Revision: "newrevisio",
		RevisionName: "chat-server-newrevisio", ConfigDigest: "d", RenderVersion: 2}, r.Spec)
	assert.Equal(t, "1", r.Labels["modeldeployment.gpustack.ai/pod-ordinal"])
	owner := metav1.GetControllerOf(r)
	require.NotNil(t, owner)
	assert.Equal(t, metav1.OwnerReference{APIVersion: "internal.mdplane.io/v1alpha1", Kind: "ModelRole", Name: "chat-server", UID: "u",
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}, *owner)
}
