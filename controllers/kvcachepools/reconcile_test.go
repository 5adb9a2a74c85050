package kvcachepools

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

func reconcilePool(t *testing.T, c client.Client) *workerv1.KVCachePool {
	t.Helper()
	r := &Reconciler{Client: c, Clock: clocktesting.NewFakePassiveClock(time.Unix(100, 0))}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: poolName}})
	require.NoError(t, err)
	got := &workerv1.KVCachePool{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: poolName}, got))
	return got
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()

	t.Run("an external backend's endpoint is published once, and withdrawn when the backend goes", func(t *testing.T) {
		backend := external()
		c := fakecluster.Builder(pool(), backend).Build()
		got := reconcilePool(t, c)
		assert.Equal(t, clientAddr, got.Status.ClientEndpoint)
		assert.Equal(t, workerv1.KVCachePhaseReady, got.Status.Phase)
		assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, workerv1.PoolClientEndpointPublished))

		again := reconcilePool(t, c)
		assert.Equal(t, got.ResourceVersion, again.ResourceVersion, "an unchanged pool is not written")

		require.NoError(t, c.Delete(ctx, backend))
		gone := reconcilePool(t, c)
		assert.Empty(t, gone.Status.ClientEndpoint, "the endpoint mdplane published goes with its backend")
		assert.Equal(t, workerv1.KVCachePhaseError, gone.Status.Phase)
		cond := meta.FindStatusCondition(gone.Status.Conditions, workerv1.PoolClientEndpointPublished)
		require.NotNil(t, cond)
		assert.Equal(t, workerv1.ReasonBackendNotFound, cond.Reason)
	})

	t.Run("a managed backend's operator keeps its endpoint and phase; mdplane adds only the condition", func(t *testing.T) {
		p := withEndpoint(pool(), "master.example:50051")
		p.Status.Phase = workerv1.KVCachePhaseReady
		p.Status.PhaseMessage = "the operator's own words"
		got := reconcilePool(t, fakecluster.Builder(p, managedBackend()).Build())
		assert.Equal(t, "master.example:50051", got.Status.ClientEndpoint)
		assert.Equal(t, workerv1.KVCachePhaseReady, got.Status.Phase)
		assert.Equal(t, "the operator's own words", got.Status.PhaseMessage)
		cond := meta.FindStatusCondition(got.Status.Conditions, workerv1.PoolClientEndpointPublished)
		require.NotNil(t, cond)
		assert.Equal(t, workerv1.ReasonManagedBackend, cond.Reason)
	})

	t.Run("a managed backend whose operator has not published leaves the pool waiting", func(t *testing.T) {
		got := reconcilePool(t, fakecluster.Builder(pool(), managedBackend()).Build())
		assert.Empty(t, got.Status.ClientEndpoint, "never guessed from the backend's Service")
		assert.Empty(t, got.Status.Phase)
		cond := meta.FindStatusCondition(got.Status.Conditions, workerv1.PoolClientEndpointPublished)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, workerv1.ReasonAwaitingBackendOperator, cond.Reason)
	})

	t.Run("a pool being deleted is left alone", func(t *testing.T) {
		p := pool()
		p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		p.Finalizers = []string{"example.com/in-use"}
		got := reconcilePool(t, fakecluster.Builder(p, external()).Build())
		assert.Empty(t, got.Status.Conditions)
	})

	t.Run("a backend's change reaches the pools naming it, through the index", func(t *testing.T) {
		other := pool()
		other.Name, other.Spec.Backends = "other", []string{"elsewhere"}
		second := pool()
		second.Name = "dram-2"
		r := &Reconciler{Client: fakecluster.Builder(pool(), second, other).Build()}
		var names []string
		for _, req := range r.poolsOfBackend(ctx, external()) {
			names = append(names, req.Name)
		}
		assert.ElementsMatch(t, []string{poolName, "dram-2"}, names)
	})
}

func TestPoolUpdatesThatReconcile(t *testing.T) {
	base := func() *workerv1.KVCachePool {
		p := withEndpoint(pool(), clientAddr)
		p.Status.Phase = workerv1.KVCachePhaseReady
		p.Status.Conditions = []metav1.Condition{{Type: workerv1.PoolClientEndpointPublished, Status: metav1.ConditionTrue, Reason: workerv1.ReasonExternalBackend}}
		return p
	}
	cases := []struct {
		rule string
		edit func(*workerv1.KVCachePool)
		want bool
	}{
		{"usage moving is not read", func(p *workerv1.KVCachePool) {
			q := resource.MustParse("1Gi")
			p.Status.Usage = &workerv1.KVCachePoolUsage{Total: &q}
		}, false},
		{"another owner's condition is not read", func(p *workerv1.KVCachePool) {
			p.Status.Conditions = append(p.Status.Conditions, metav1.Condition{Type: "QuotaWithinTotal", Status: metav1.ConditionTrue})
		}, false},
		{"a new generation", func(p *workerv1.KVCachePool) { p.Generation++ }, true},
		{"the endpoint another operator publishes", func(p *workerv1.KVCachePool) { p.Status.ClientEndpoint = "other:1" }, true},
		{"the phase another writer moves", func(p *workerv1.KVCachePool) { p.Status.Phase = workerv1.KVCachePhaseError }, true},
		{"the condition this controller owns", func(p *workerv1.KVCachePool) { p.Status.Conditions[0].Reason = "Edited" }, true},
		{"deletion", func(p *workerv1.KVCachePool) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			updated := base()
			tc.edit(updated)
			assert.Equal(t, tc.want, poolChanged(base(), updated))
		})
	}
}
