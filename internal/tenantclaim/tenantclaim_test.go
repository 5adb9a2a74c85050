package tenantclaim_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/tenantclaim"
)

const namespace = "mdplane-system"

var now = time.Unix(1000, 0)

func cluster(objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func pool(name, backend string) *workerv1.KVCachePool {
	return &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: workerv1.KVCachePoolSpec{Backends: []string{backend}}}
}

func binding(ns, poolName, domain string) *workerv1.KVCachePoolBinding {
	return &workerv1.KVCachePoolBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cache"},
		Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: poolName}, Domain: workerv1.KVCacheDomain{Name: domain}}}
}

// claimBy is a stored claim of chat on mooncake, taken at takenAt by holder.
func claimBy(holder string, takenAt time.Time) *coordinationv1.Lease {
	at := metav1.NewMicroTime(takenAt)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: tenantclaim.Name("mooncake", "chat")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &at}}
}

func chat(holder string) tenantclaim.Claim {
	return tenantclaim.Claim{Namespace: namespace, Backend: "mooncake", Domain: "chat", Holder: holder}
}

func holderOf(t *testing.T, c client.Client, backend, domain string) string {
	t.Helper()
	l := &coordinationv1.Lease{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: tenantclaim.Name(backend, domain)}, l))
	return *l.Spec.HolderIdentity
}

func TestTake(t *testing.T) {
	for _, row := range []struct {
		rule     string
		objs     []client.Object
		claim    tenantclaim.Claim
		held     bool
		inFlight bool
		holder   string // the claim's holder after the Take
	}{
		{rule: "an unclaimed domain is the first Binding's", objs: []client.Object{pool("dram", "mooncake")},
			claim: chat("team-a/cache"), held: true, holder: "team-a/cache"},
		{rule: "a domain another stored Binding holds on the master is refused",
			objs:  []client.Object{pool("dram", "mooncake"), binding("team-a", "dram", "chat"), claimBy("team-a/cache", now.Add(-time.Hour))},
			claim: chat("team-b/cache"), holder: "team-a/cache"},
		{rule: "near miss: the holder's own retried create holds it",
			objs:  []client.Object{pool("dram", "mooncake"), binding("team-a", "dram", "chat"), claimBy("team-a/cache", now.Add(-time.Hour))},
			claim: chat("team-a/cache"), held: true, holder: "team-a/cache"},
		{rule: "a holder on another pool of the same master still holds it",
			objs: []client.Object{pool("dram", "mooncake"), pool("ssd", "mooncake"), binding("team-a", "ssd", "chat"),
				claimBy("team-a/cache", now.Add(-time.Hour))},
			claim: chat("team-b/cache"), holder: "team-a/cache"},
		{rule: "a claim whose holder is not stored is still its within InFlight: its create may not be stored yet",
			objs:  []client.Object{pool("dram", "mooncake"), claimBy("team-a/cache", now.Add(-tenantclaim.InFlight+time.Second))},
			claim: chat("team-b/cache"), inFlight: true, holder: "team-a/cache"},
		{rule: "near miss: past InFlight a claim whose holder is not stored is stale, and taken over",
			objs:  []client.Object{pool("dram", "mooncake"), claimBy("team-a/cache", now.Add(-tenantclaim.InFlight))},
			claim: chat("team-b/cache"), held: true, holder: "team-b/cache"},
		{rule: "a holder whose pool now names another master no longer holds the claim",
			objs:  []client.Object{pool("dram", "elsewhere"), binding("team-a", "dram", "chat"), claimBy("team-a/cache", now.Add(-time.Hour))},
			claim: chat("team-b/cache"), held: true, holder: "team-b/cache"},
		{rule: "a holder whose pool is gone no longer holds the claim",
			objs:  []client.Object{binding("team-a", "dram", "chat"), claimBy("team-a/cache", now.Add(-time.Hour))},
			claim: chat("team-b/cache"), held: true, holder: "team-b/cache"},
	} {
		t.Run(row.rule, func(t *testing.T) {
			c := cluster(row.objs...)
			out, err := tenantclaim.Take(context.Background(), c, c, row.claim, tenantclaim.BindingDeclares(c, "mooncake", "chat"), now)
			require.NoError(t, err)
			assert.Equal(t, row.held, out.Held, "held")
			assert.Equal(t, row.inFlight, out.InFlight, "in flight")
			if !row.held {
				assert.Equal(t, row.holder, out.Holder, "the holder named")
			}
			assert.Equal(t, row.holder, holderOf(t, c, "mooncake", "chat"))
		})
	}
}

func TestADomainIsClaimedPerMaster(t *testing.T) {
	c := cluster()
	declares := func(context.Context, string) (bool, error) { return true, nil }
	for _, claim := range []tenantclaim.Claim{chat("team-a/cache"),
		{Namespace: namespace, Backend: "other-master", Domain: "chat", Holder: "team-b/cache"},
		{Namespace: namespace, Backend: "mooncake", Domain: "code", Holder: "team-c/cache"}} {
		out, err := tenantclaim.Take(context.Background(), c, c, claim, declares, now)
		require.NoError(t, err)
		assert.True(t, out.Held, "%+v: another master or another domain is another claim", claim)
	}
	out, err := tenantclaim.Take(context.Background(), c, c, chat("team-d/cache"), declares, now)
	require.NoError(t, err)
	assert.False(t, out.Held, "the same domain on the same master")
	assert.Equal(t, "team-a/cache", out.Holder)
}

// Of many creates racing for one domain, and of many takeovers racing for one stale claim, exactly
// one wins: the API server keeps a name unique and refuses an update of a resourceVersion gone.
func TestRacingTakesHaveOneWinner(t *testing.T) {
	for _, row := range []struct {
		rule string
		objs []client.Object
	}{
		{rule: "creates racing for an unclaimed domain"},
		{rule: "takeovers racing for a stale claim", objs: []client.Object{claimBy("gone/cache", now.Add(-time.Hour))}},
	} {
		t.Run(row.rule, func(t *testing.T) {
			for range 20 {
				c := cluster(row.objs...)
				holders := []string{"team-a/cache", "team-b/cache", "team-c/cache", "team-d/cache"}
				// A holder declares the domain once it holds it: the others see a live holder.
				declares := func(_ context.Context, holder string) (bool, error) { return holder != "gone/cache", nil }
				won := make([]bool, len(holders))
				var wg sync.WaitGroup
				for i, h := range holders {
					wg.Go(func() {
						out, err := tenantclaim.Take(context.Background(), c, c, chat(h), declares, now)
						assert.NoError(t, err)
						won[i] = out.Held
					})
				}
				wg.Wait()
				winners := 0
				for i, w := range won {
					if w {
						winners++
						assert.Equal(t, holders[i], holderOf(t, c, "mooncake", "chat"), "the winner holds the claim")
					}
				}
				require.Equal(t, 1, winners, "exactly one of %v", holders)
			}
		})
	}
}

func TestPeekWritesNothing(t *testing.T) {
	c := cluster(pool("dram", "mooncake"), claimBy("gone/cache", now.Add(-time.Hour)))
	declares := tenantclaim.BindingDeclares(c, "mooncake", "chat")
	out, err := tenantclaim.Peek(context.Background(), c, chat("team-b/cache"), declares, now)
	require.NoError(t, err)
	assert.True(t, out.Held, "a stale claim would be taken over")
	assert.Equal(t, "gone/cache", holderOf(t, c, "mooncake", "chat"), "and is not")

	out, err = tenantclaim.Peek(context.Background(), c, tenantclaim.Claim{Namespace: namespace, Backend: "mooncake", Domain: "code", Holder: "team-b/cache"}, declares, now)
	require.NoError(t, err)
	assert.True(t, out.Held, "an unclaimed domain would be taken")
	var leases coordinationv1.LeaseList
	require.NoError(t, c.List(context.Background(), &leases))
	assert.Len(t, leases.Items, 1, "and no claim is created")
}

func TestRelease(t *testing.T) {
	c := cluster()
	declares := func(context.Context, string) (bool, error) { return false, nil }
	ctx := context.Background()
	for _, claim := range []tenantclaim.Claim{chat("team-a/cache"), {Namespace: namespace, Backend: "other-master", Domain: "chat", Holder: "team-a/cache"},
		{Namespace: namespace, Backend: "mooncake", Domain: "code", Holder: "team-b/cache"}} {
		_, err := tenantclaim.Take(ctx, c, c, claim, declares, now)
		require.NoError(t, err)
	}
	require.NoError(t, tenantclaim.Release(ctx, c, c, namespace, "team-a/cache"))
	var leases coordinationv1.LeaseList
	require.NoError(t, c.List(ctx, &leases))
	require.Len(t, leases.Items, 1, "every claim of the holder goes, another holder's stays")
	assert.Equal(t, tenantclaim.Name("mooncake", "code"), leases.Items[0].Name)
	require.NoError(t, tenantclaim.Release(ctx, c, c, namespace, "team-a/cache"), "releasing nothing is no error")
}
