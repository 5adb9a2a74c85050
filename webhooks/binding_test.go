package webhooks_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/tenantclaim"
	"github.com/mdplane/mdplane/webhooks"
)

const operatorNamespace = "mdplane-system"

// apiServer is one fake API server that every webhook replica of a test reads and writes.
func apiServer(objs ...client.Object) client.Client {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

// replica is one webhook process on the API server, its clock at now.
func replica(c client.Client, now time.Time) *webhooks.BindingValidator {
	return &webhooks.BindingValidator{Reader: c, Claims: c, Namespace: operatorNamespace, Now: func() time.Time { return now }}
}

func bindingOn(t *testing.T, namespace, pool, domain string) map[string]any {
	var b map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"worker.gpustack.ai/v1","kind":"KVCachePoolBinding",
 "metadata":{"name":"cache","namespace":"`+namespace+`"},
 "spec":{"poolRef":{"name":"`+pool+`"},"domain":{"name":"`+domain+`","blockSize":64,"dtype":"bfloat16"},"quota":{"ceiling":"1Gi"}}}`), &b))
	return b
}

func poolOn(name, backend string) *workerv1.KVCachePool {
	return &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: workerv1.KVCachePoolSpec{Backends: []string{backend}}}
}

func claims(t *testing.T, c client.Client) map[string]string {
	var leases coordinationv1.LeaseList
	require.NoError(t, c.List(context.Background(), &leases))
	out := map[string]string{}
	for _, l := range leases.Items {
		out[l.Annotations[tenantclaim.AnnotationBackend]+"/"+l.Annotations[tenantclaim.AnnotationDomain]] = *l.Spec.HolderIdentity
	}
	return out
}

var t0 = time.Unix(1000, 0)

// The claim, not a replica's memory, keeps one domain to one Binding per master: each row admits
// team-a's Binding at one replica, not stored yet, and then judges team-b's at the other.
func TestBindingValidatorClaimsTheDomainAcrossReplicas(t *testing.T) {
	for _, row := range []struct {
		rule          string
		pools         []client.Object
		first, second map[string]any
		at            time.Duration // after the first
		dryRun        bool
		allowed       bool
		message       string
		claims        map[string]string
	}{
		{rule: "a domain taken at one replica is refused at the other, before the first create is stored",
			pools: []client.Object{poolOn("pool", "mooncake")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "chat"),
			message: `KVCachePoolBinding team-a/cache took domain "chat" on KVCacheBackend "mooncake" moments ago`,
			claims:  map[string]string{"mooncake/chat": "team-a/cache"}},
		{rule: "near miss: another domain on the master is another claim",
			pools: []client.Object{poolOn("pool", "mooncake")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "code"), allowed: true,
			claims: map[string]string{"mooncake/chat": "team-a/cache", "mooncake/code": "team-b/cache"}},
		{rule: "the same domain through another pool of the master is refused",
			pools: []client.Object{poolOn("pool", "mooncake"), poolOn("ssd", "mooncake")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "ssd", "chat"),
			message: `KVCachePoolBinding team-a/cache took domain "chat"`, claims: map[string]string{"mooncake/chat": "team-a/cache"}},
		{rule: "near miss: the same domain on another master is another claim",
			pools: []client.Object{poolOn("pool", "mooncake"), poolOn("ssd", "other-master")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "ssd", "chat"),
			allowed: true, claims: map[string]string{"mooncake/chat": "team-a/cache", "other-master/chat": "team-b/cache"}},
		{rule: "a claim whose create never got stored is taken over once InFlight passes",
			pools: []client.Object{poolOn("pool", "mooncake")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "chat"),
			at: tenantclaim.InFlight, allowed: true, claims: map[string]string{"mooncake/chat": "team-b/cache"}},
		{rule: "a dry run is judged and takes no claim",
			pools: []client.Object{poolOn("pool", "mooncake")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "code"),
			dryRun: true, allowed: true, claims: map[string]string{"mooncake/chat": "team-a/cache"}},
		{rule: "a dry run of a taken domain is refused",
			pools: []client.Object{poolOn("pool", "mooncake")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "chat"),
			dryRun: true, message: `KVCachePoolBinding team-a/cache took domain "chat"`, claims: map[string]string{"mooncake/chat": "team-a/cache"}},
		{rule: "a pool naming a backend that does not exist yet still names the master",
			pools: []client.Object{poolOn("pool", "not-yet")}, first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "chat"),
			message: `on KVCacheBackend "not-yet"`, claims: map[string]string{"not-yet/chat": "team-a/cache"}},
		{rule: "a Binding whose pool does not exist yet is admitted unclaimed: the controller claims once the pool exists",
			first: bindingOn(t, "team-a", "pool", "chat"), second: bindingOn(t, "team-b", "pool", "chat"), allowed: true, claims: map[string]string{}},
	} {
		t.Run(row.rule, func(t *testing.T) {
			c := apiServer(row.pools...)
			first := replica(c, t0).Handle(context.Background(), request(t, admissionv1.Create, row.first))
			require.True(t, first.Allowed, "%v", first.Result)
			req := request(t, admissionv1.Create, row.second)
			req.DryRun = ptr.To(row.dryRun)
			rsp := replica(c, t0.Add(row.at)).Handle(context.Background(), req)
			assert.Equal(t, row.allowed, rsp.Allowed)
			if !row.allowed {
				assert.Equal(t, metav1.StatusReasonInvalid, rsp.Result.Reason)
				require.NotNil(t, rsp.Result.Details)
				assert.Equal(t, "spec.domain.name", rsp.Result.Details.Causes[0].Field)
				assert.Contains(t, rsp.Result.Message, row.message)
				refusaltest.Cause(t, rsp.Result.Details.Causes[0].Field, rsp.Result.Details.Causes[0].Message)
			}
			assert.Equal(t, row.claims, claims(t, c))
		})
	}
}

// A stored holder keeps its claim whenever it was taken; the message names it and the ways out.
func TestBindingValidatorRefusesADomainAStoredBindingHolds(t *testing.T) {
	c := apiServer(poolOn("pool", "mooncake"))
	a := replica(c, t0)
	require.True(t, a.Handle(context.Background(), request(t, admissionv1.Create, bindingOn(t, "team-a", "pool", "chat"))).Allowed)
	stored := &workerv1.KVCachePoolBinding{}
	raw, err := json.Marshal(bindingOn(t, "team-a", "pool", "chat"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, stored))
	require.NoError(t, c.Create(context.Background(), stored))

	rsp := replica(c, t0.Add(time.Hour)).Handle(context.Background(), request(t, admissionv1.Create, bindingOn(t, "team-b", "pool", "chat")))
	require.False(t, rsp.Allowed)
	assert.Contains(t, rsp.Result.Message, `KVCachePoolBinding team-a/cache (pool "pool") already declares domain "chat" on KVCacheBackend "mooncake"`)
	assert.True(t, a.Handle(context.Background(), request(t, admissionv1.Create, bindingOn(t, "team-a", "pool", "chat"))).Allowed,
		"near miss: a retried create of the holder itself is no rival of its own")
}

// Many pairs of creates of one domain, each pair racing at the two replicas: exactly one of each
// pair is admitted.
func TestBindingValidatorAdmitsOneOfRacingCreates(t *testing.T) {
	c := apiServer(poolOn("pool", "mooncake"))
	replicas := []*webhooks.BindingValidator{replica(c, t0), replica(c, t0)}
	for pair := range 25 {
		domain := "d" + string(rune('a'+pair))
		admitted := make([]bool, 2)
		var wg sync.WaitGroup
		for i, r := range replicas {
			ns := []string{"team-a", "team-b"}[i]
			wg.Go(func() {
				admitted[i] = r.Handle(context.Background(), request(t, admissionv1.Create, bindingOn(t, ns, "pool", domain))).Allowed
			})
		}
		wg.Wait()
		assert.NotEqual(t, admitted[0], admitted[1], "domain %s: exactly one of the pair", domain)
	}
}
