package kvcachepools

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/internal/tenantclaim"
)

const operatorNamespace = "mdplane-system"

func chatBinding(namespace string) *workerv1.KVCachePoolBinding {
	return &workerv1.KVCachePoolBinding{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "cache", Generation: 1},
		Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: poolName}, Domain: workerv1.KVCacheDomain{Name: "chat"}}}
}

func claimsCluster(objs ...client.Object) client.Client {
	return fakecluster.Builder(objs...).WithStatusSubresource(&workerv1.KVCachePoolBinding{}).Build()
}

// claimAt reconciles Binding namespace/cache at t and returns its DomainClaimed condition.
func claimAt(t *testing.T, c client.Client, namespace string, at time.Time) (*metav1.Condition, reconcile.Result) {
	t.Helper()
	r := &ClaimReconciler{Client: c, Reader: c, Namespace: operatorNamespace, Clock: clocktesting.NewFakePassiveClock(at)}
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: "cache"}})
	require.NoError(t, err)
	b := &workerv1.KVCachePoolBinding{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: "cache"}, b); err != nil {
		return nil, res
	}
	return meta.FindStatusCondition(b.Status.Conditions, workerv1.BindingDomainClaimed), res
}

func leases(t *testing.T, c client.Client) []coordinationv1.Lease {
	var l coordinationv1.LeaseList
	require.NoError(t, c.List(context.Background(), &l))
	return l.Items
}

// Two Bindings of one domain created before their pool: admitted unclaimed, the master unknown. Once
// the pool exists the controller claims for both, and exactly one holds the domain.
func TestClaimsOfBindingsCreatedBeforeTheirPool(t *testing.T) {
	ctx := context.Background()
	c := claimsCluster(chatBinding("team-a"), chatBinding("team-b"))
	t0 := time.Unix(1000, 0)

	for _, ns := range []string{"team-a", "team-b"} {
		cond, _ := claimAt(t, c, ns, t0)
		require.NotNil(t, cond)
		assert.Equal(t, metav1.ConditionUnknown, cond.Status, "the master is not known")
		assert.Equal(t, workerv1.ReasonMasterUnknown, cond.Reason)
		assert.Contains(t, cond.Message, `KVCachePool "dram" does not exist or names no KVCacheBackend`)
	}
	assert.Empty(t, leases(t, c), "no claim without a master")

	require.NoError(t, c.Create(ctx, pool()))
	won, res := claimAt(t, c, "team-a", t0)
	require.NotNil(t, won)
	assert.Equal(t, metav1.ConditionTrue, won.Status)
	assert.Equal(t, workerv1.ReasonDomainClaimed, won.Reason)
	assert.Zero(t, res)
	lost, res := claimAt(t, c, "team-b", t0)
	require.NotNil(t, lost)
	assert.Equal(t, metav1.ConditionFalse, lost.Status)
	assert.Equal(t, workerv1.ReasonDomainTaken, lost.Reason)
	for _, part := range []string{`KVCachePoolBinding team-a/cache already claims domain "chat" on the master of KVCachePool "dram"`,
		"deployments naming this Binding get no cache client", "create one with another spec.domain.name", "reference Binding team-a/cache"} {
		assert.Contains(t, lost.Message, part)
	}
	assert.Equal(t, loserRecheck, res.RequeueAfter, "the loser looks again now and then, besides the holder's deletion")
	require.Len(t, leases(t, c), 1)

	again, _ := claimAt(t, c, "team-a", t0.Add(time.Hour))
	assert.Equal(t, metav1.ConditionTrue, again.Status, "the holder keeps its claim")
	lostAgain, _ := claimAt(t, c, "team-b", t0.Add(time.Hour))
	assert.Equal(t, metav1.ConditionFalse, lostAgain.Status, "a stored holder keeps its claim however old")

	t.Run("the holder going releases the claim, and the other Binding takes it", func(t *testing.T) {
		require.NoError(t, c.Delete(ctx, chatBinding("team-a")))
		gone, _ := claimAt(t, c, "team-a", t0.Add(time.Hour))
		assert.Nil(t, gone)
		assert.Empty(t, leases(t, c), "released")
		taken, _ := claimAt(t, c, "team-b", t0.Add(time.Hour))
		assert.Equal(t, metav1.ConditionTrue, taken.Status)
		assert.Equal(t, tenantclaim.Holder("team-b", "cache"), *leases(t, c)[0].Spec.HolderIdentity)
	})
}

func TestClaimRules(t *testing.T) {
	t0 := time.Unix(1000, 0)
	t.Run("a Binding being deleted keeps its claim: its deployments still hold the domain", func(t *testing.T) {
		b := chatBinding("team-a")
		c := claimsCluster(pool(), b)
		claimAt(t, c, "team-a", t0)
		deleting := chatBinding("team-a")
		require.NoError(t, c.Get(context.Background(), client.ObjectKeyFromObject(deleting), deleting))
		deleting.Finalizers = []string{"example.com/in-use"}
		require.NoError(t, c.Update(context.Background(), deleting))
		require.NoError(t, c.Delete(context.Background(), deleting))
		claimAt(t, c, "team-a", t0.Add(time.Hour))
		assert.Len(t, leases(t, c), 1)
	})
	t.Run("a Binding the cache lost but the API server holds keeps its claim", func(t *testing.T) {
		stored := claimsCluster(pool(), chatBinding("team-a"))
		claimAt(t, stored, "team-a", t0)
		cached := claimsCluster(pool())
		r := &ClaimReconciler{Client: cached, Reader: stored, Namespace: operatorNamespace}
		_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "cache"}})
		require.NoError(t, err)
		assert.Len(t, leases(t, stored), 1)
	})
	t.Run("a claim the webhook took for a create not stored yet is looked at again shortly, and taken over once InFlight passes", func(t *testing.T) {
		c := claimsCluster(pool(), chatBinding("team-b"))
		_, err := tenantclaim.Take(context.Background(), c, c, tenantclaim.For(operatorNamespace, mooncake, chatBinding("team-a")),
			func(context.Context, string) (bool, error) { return false, nil }, t0)
		require.NoError(t, err)
		cond, res := claimAt(t, c, "team-b", t0.Add(time.Second))
		assert.Equal(t, metav1.ConditionFalse, cond.Status)
		assert.Equal(t, releaseSettle, res.RequeueAfter)
		cond, _ = claimAt(t, c, "team-b", t0.Add(tenantclaim.InFlight))
		assert.Equal(t, metav1.ConditionTrue, cond.Status, "team-a's create never got stored: the claim is stale, and taken over")
	})
	t.Run("an unchanged condition costs no write", func(t *testing.T) {
		c := claimsCluster(pool(), chatBinding("team-a"))
		claimAt(t, c, "team-a", t0)
		b := &workerv1.KVCachePoolBinding{}
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "cache"}, b))
		claimAt(t, c, "team-a", t0.Add(time.Minute))
		again := &workerv1.KVCachePoolBinding{}
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: "cache"}, again))
		assert.Equal(t, b.ResourceVersion, again.ResourceVersion)
	})
	t.Run("a pool's creation reaches the Bindings naming it; a Binding's deletion the others of its domain", func(t *testing.T) {
		other := chatBinding("team-c")
		other.Spec.PoolRef.Name, other.Spec.Domain.Name = "elsewhere", "code"
		c := claimsCluster(chatBinding("team-a"), chatBinding("team-b"), other)
		r := &ClaimReconciler{Client: c}
		names := func(reqs []reconcile.Request) (out []string) {
			for _, q := range reqs {
				out = append(out, q.Namespace)
			}
			return out
		}
		assert.ElementsMatch(t, []string{"team-a", "team-b"}, names(r.bindingsOfPool(context.Background(), pool())))
		assert.ElementsMatch(t, []string{"team-a", "team-b"}, names(r.bindingsOfDomain(context.Background(), chatBinding("team-x"))))
	})
}

// TestALoserLooksAgainShortlyWhileItsHolderLeaves: a holder the API server no longer has, whose
// claim stands until its own reconcile releases it, has the loser look again within releaseSettle
// rather than loserRecheck, or InFlight when the claim is younger than that; a holder that stays is
// the near miss.
func TestALoserLooksAgainShortlyWhileItsHolderLeaves(t *testing.T) {
	ctx := context.Background()
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		rule         string
		holderSet    bool // the holder still on the API server
		holderCached bool // the holder still in the loser's cache
		after        time.Duration
		requeue      time.Duration
	}{
		{rule: "the holder gone from the API server, the cache behind: look again shortly", holderCached: true, after: time.Hour, requeue: releaseSettle},
		{rule: "the holder gone from both, its young claim not released yet: look again shortly", after: time.Second, requeue: releaseSettle},
		{rule: "near miss: the holder stays: look again now and then", holderSet: true, holderCached: true, after: time.Hour, requeue: loserRecheck},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			c := claimsCluster(chatBinding("team-a"), chatBinding("team-b"), pool())
			won, _ := claimAt(t, c, "team-a", t0)
			require.Equal(t, metav1.ConditionTrue, won.Status)
			if !tc.holderCached {
				require.NoError(t, c.Delete(ctx, chatBinding("team-a")))
			}
			server := interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, binding := obj.(*workerv1.KVCachePoolBinding); binding && key.Namespace == "team-a" && !tc.holderSet {
						return apierrors.NewNotFound(workerv1.SchemeGroupVersion.WithResource("kvcachepoolbindings").GroupResource(), key.Name)
					}
					return cl.Get(ctx, key, obj, opts...)
				}})
			r := &ClaimReconciler{Client: c, Reader: server, Namespace: operatorNamespace, Clock: clocktesting.NewFakePassiveClock(t0.Add(tc.after))}
			res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-b", Name: "cache"}})
			require.NoError(t, err)
			assert.Equal(t, tc.requeue, res.RequeueAfter)
		})
	}
}
