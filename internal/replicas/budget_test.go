package replicas_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// TestDisruptionBudget: a role's budget lets a drain take one member, and so one replica, at a time,
// only while every member stands Ready; members not Ready may always go.
func TestDisruptionBudget(t *testing.T) {
	for _, row := range []struct {
		rule           string
		replicas, size int32
		minAvailable   int
	}{
		{"every member of every replica but one must stand: replicas×size−1", 3, 2, 5},
		{"a single-member role keeps all replicas but one", 4, 1, 3},
		{"a role of no replicas holds nothing", 0, 2, 0},
		{"one replica of two members keeps its other member while the first goes", 1, 2, 1},
	} {
		t.Run(row.rule, func(t *testing.T) {
			role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: "ns", UID: "role-uid"},
				Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Replicas: row.replicas, Size: row.size}}
			pdb := replicas.DisruptionBudget(role)
			require.NotNil(t, pdb)
			assert.Equal(t, "md-server", pdb.Name)
			assert.Equal(t, row.minAvailable, pdb.Spec.MinAvailable.IntValue())
			assert.Nil(t, pdb.Spec.MaxUnavailable, "a ModelReplica has no scale subresource, which maxUnavailable needs")
			assert.Equal(t, map[string]string{"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "md", "app.kubernetes.io/component": "server"},
				pdb.Spec.Selector.MatchLabels)
			assert.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy)
			owner := metav1.GetControllerOf(pdb)
			require.NotNil(t, owner, "the role controls its budget: the budget leaves with it")
			assert.Equal(t, "role-uid", string(owner.UID))
		})
	}
	t.Run("an Elastic EP role has none: its width moves under it", func(t *testing.T) {
		role := &v1alpha1.ModelRole{Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "ep", Replicas: 4, Size: 1,
			Elastic: &v1alpha1.ElasticRole{Part: v1alpha1.ElasticMembers}}}
		assert.Nil(t, replicas.DisruptionBudget(role))
	})
}
