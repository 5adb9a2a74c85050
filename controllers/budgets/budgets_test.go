package budgets_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/controllers/budgets"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/internal/replicas"
)

var ctx = context.Background()

var budgetKey = types.NamespacedName{Namespace: "team-a", Name: "md-server"}

func role(replicas int32) *v1alpha1.ModelRole {
	return &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: "team-a", UID: "role-uid"},
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Replicas: replicas, Size: 2, Revision: "r1"}}
}

func reconcileRole(t *testing.T, c client.Client) reconcile.Result {
	t.Helper()
	res, err := (&budgets.Reconciler{Client: c}).Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "md-server"}})
	require.NoError(t, err)
	return res
}

func minAvailable(t *testing.T, c client.Client) int {
	t.Helper()
	got := &policyv1.PodDisruptionBudget{}
	require.NoError(t, c.Get(ctx, budgetKey, got))
	return got.Spec.MinAvailable.IntValue()
}

// TestARoleKeepsItsBudget: the controller creates the budget a role's replicas and size call for,
// follows a scale, restores a hand edit, and leaves a budget of the same name that another object
// controls until that one is gone.
func TestARoleKeepsItsBudget(t *testing.T) {
	t.Run("a role without a budget gets one", func(t *testing.T) {
		c := fakecluster.Builder(role(3)).Build()
		reconcileRole(t, c)
		assert.Equal(t, 5, minAvailable(t, c))
	})
	t.Run("a scaled role's budget follows its replicas", func(t *testing.T) {
		r := role(3)
		c := fakecluster.Builder(r, replicas.DisruptionBudget(r)).Build()
		r.Spec.Replicas = 5
		require.NoError(t, c.Update(ctx, r))
		reconcileRole(t, c)
		assert.Equal(t, 9, minAvailable(t, c))
	})
	t.Run("a hand edit of the budget's spec is put back", func(t *testing.T) {
		r := role(3)
		edited := replicas.DisruptionBudget(r)
		edited.Spec.MinAvailable = ptr.To(intOrString(0))
		c := fakecluster.Builder(r, edited).Build()
		reconcileRole(t, c)
		assert.Equal(t, 5, minAvailable(t, c))
	})
	t.Run("a budget another object controls is left alone and looked at again", func(t *testing.T) {
		r := role(3)
		foreign := replicas.DisruptionBudget(r)
		foreign.OwnerReferences[0].UID, foreign.OwnerReferences[0].Kind = "composite-uid", "ModelDeployment"
		foreign.Spec.MinAvailable = ptr.To(intOrString(1))
		c := fakecluster.Builder(r, foreign).Build()
		res := reconcileRole(t, c)
		assert.Equal(t, 1, minAvailable(t, c))
		assert.Equal(t, budgets.ForeignRetry, res.RequeueAfter)
		require.NoError(t, c.Delete(ctx, foreign))
		reconcileRole(t, c)
		assert.Equal(t, 5, minAvailable(t, c), "once the other object's budget is gone, the role's is created")
	})
	t.Run("an Elastic EP role gets none", func(t *testing.T) {
		r := role(3)
		r.Spec.Elastic = &v1alpha1.ElasticRole{Part: v1alpha1.ElasticMembers}
		c := fakecluster.Builder(r).Build()
		reconcileRole(t, c)
		err := c.Get(ctx, budgetKey, &policyv1.PodDisruptionBudget{})
		assert.True(t, apierrors.IsNotFound(err), "got %v", err)
	})
	t.Run("a role gone needs nothing", func(t *testing.T) {
		c := fakecluster.Builder().Build()
		assert.Equal(t, reconcile.Result{}, reconcileRole(t, c))
	})
}

func intOrString(n int32) intstr.IntOrString { return intstr.FromInt32(n) }
