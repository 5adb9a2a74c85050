package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	policyv1 "k8s.io/api/policy/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
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
		{"unset replicas and size count as one each: nothing is held", 0, 0, 0},
		{"one replica of two members keeps its other member while the first goes", 1, 2, 1},
	} {
		t.Run(row.rule, func(t *testing.T) {
			pdb := renderroles.RenderDisruptionBudget("ns", "md", workerv1.ModelDeploymentRole{Name: "server", Replicas: row.replicas, Size: row.size})
			assert.Equal(t, "md-server", pdb.Name)
			assert.Equal(t, row.minAvailable, pdb.Spec.MinAvailable.IntValue())
			assert.Nil(t, pdb.Spec.MaxUnavailable, "a ModelReplica has no scale subresource, which maxUnavailable needs")
			assert.Equal(t, map[string]string{"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "md", "app.kubernetes.io/component": "server"},
				pdb.Spec.Selector.MatchLabels)
			assert.Equal(t, policyv1.AlwaysAllow, *pdb.Spec.UnhealthyPodEvictionPolicy)
		})
	}
}
