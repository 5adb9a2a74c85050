package kvcache_test

import (
	"context"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

// TestResolveDomain: the DomainRegistered condition; a missing Binding is a condition, not a
// failed render, and no cache client is rendered from it.
func TestResolveDomain(t *testing.T) {
	cached := func(status *workerv1.KVCacheStatus) *workerv1.ModelDeployment {
		return &workerv1.ModelDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "team-a"},
			Spec:       workerv1.ModelDeploymentSpec{KVCache: &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team-dram"}}},
			Status:     workerv1.ModelDeploymentStatus{KVCache: status},
		}
	}
	binding := func(domain string) *workerv1.KVCachePoolBinding {
		return &workerv1.KVCachePoolBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "team-dram", Namespace: "team-a"},
			Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: "dram"},
				Domain: workerv1.KVCacheDomain{Name: domain, BlockSize: 16, Dtype: "bfloat16"}},
		}
	}
	pool := &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: "dram"},
		Status: workerv1.KVCachePoolStatus{ClientEndpoint: "mooncake-master.gpustack-system.svc:50051"}}
	lastEcho := &workerv1.KVCacheStatus{Binding: "team-dram", Pool: "dram", Domain: &workerv1.KVCacheDomain{Name: "chat", BlockSize: 16, Dtype: "bfloat16"}}

	for _, row := range []struct {
		name       string
		md         *workerv1.ModelDeployment
		binding    *workerv1.KVCachePoolBinding
		pool       *workerv1.KVCachePool
		wantStatus string
		wantReason string
		wantClient bool
		wantEcho   *workerv1.KVCacheStatus
		wantErr    string
	}{
		{name: "a poolRef naming a missing Binding is DomainRegistered=False/BindingNotFound with no cache client",
			md: cached(nil), wantStatus: "False", wantReason: "BindingNotFound"},
		{name: "a lost Binding keeps the status.kvCache the deployment carries",
			md: cached(lastEcho), wantStatus: "False", wantReason: "BindingNotFound", wantEcho: lastEcho},
		{name: "a Binding holding its claim registers its domain and configures the client",
			md: cached(nil), binding: holding(binding("chat")), pool: pool, wantStatus: "True", wantReason: "Registered", wantClient: true, wantEcho: lastEcho},
		{name: "a Binding whose claim is not confirmed yet waits: the render fails until the claims controller reports it",
			md: cached(nil), binding: binding("chat"), pool: pool, wantErr: "does not hold the claim of its domain on the master yet"},
		{name: "a Binding whose claim is Unknown waits as an unconfirmed one does",
			md: cached(nil), binding: claimed(binding("chat"), metav1.ConditionUnknown, workerv1.ReasonMasterUnknown), pool: pool, wantErr: "does not hold the claim of its domain on the master yet"},
		{name: "a Binding declaring no domain name registers domain default",
			md: cached(nil), binding: holding(binding("")), pool: pool, wantStatus: "True", wantReason: "Registered", wantClient: true,
			wantEcho: &workerv1.KVCacheStatus{Binding: "team-dram", Pool: "dram", Domain: &workerv1.KVCacheDomain{Name: "default", BlockSize: 16, Dtype: "bfloat16"}}},
		{name: "a Binding another Binding's claim beat on the master is BindingNotReady with no cache client",
			md: cached(nil), binding: claimed(binding("chat"), metav1.ConditionFalse, workerv1.ReasonDomainTaken), pool: pool, wantStatus: "False", wantReason: "BindingNotReady"},
		{name: "an unclaimed Binding keeps the status.kvCache the deployment carries, as a lost one does",
			md: cached(lastEcho), binding: claimed(binding("chat"), metav1.ConditionFalse, workerv1.ReasonDomainTaken), pool: pool, wantStatus: "False", wantReason: "BindingNotReady", wantEcho: lastEcho},
		{name: "near miss: a Binding whose master is not known yet is judged by its pool, not its claim",
			md: cached(nil), binding: claimed(binding("chat"), metav1.ConditionUnknown, workerv1.ReasonMasterUnknown), wantErr: "names KVCachePool dram, which does not exist"},
		{name: "a deployment without spec.kvCache is NotApplicable",
			md: &workerv1.ModelDeployment{}, wantStatus: "True", wantReason: "NotApplicable"},
		{name: "a Binding naming a missing pool still fails the render",
			md: cached(nil), binding: binding("chat"), wantErr: "names KVCachePool dram, which does not exist"},
		{name: "a pool without a client endpoint still fails the render",
			md: cached(nil), binding: binding("chat"), pool: &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: "dram"}}, wantErr: "has not published status.clientEndpoint"},
	} {
		t.Run(row.name, func(t *testing.T) {
			d, err := kvcache.ResolveDomain(row.md, row.binding, row.pool)
			if row.wantErr != "" {
				require.ErrorContains(t, err, row.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, row.wantStatus, d.Registered.Status)
			assert.Equal(t, row.wantReason, d.Registered.Reason)
			assert.Equal(t, row.wantClient, d.Binding != nil)
			assert.Equal(t, row.wantEcho, d.KVCache)
		})
	}
}

// holding is b with the claim the claims controller confirmed.
func holding(b *workerv1.KVCachePoolBinding) *workerv1.KVCachePoolBinding {
	return claimed(b, metav1.ConditionTrue, workerv1.ReasonDomainClaimed)
}

func claimed(b *workerv1.KVCachePoolBinding, status metav1.ConditionStatus, reason string) *workerv1.KVCachePoolBinding {
	b.Status.Conditions = []metav1.Condition{{Type: workerv1.BindingDomainClaimed, Status: status, Reason: reason,
		Message: "KVCachePoolBinding team-b/team-dram already claims domain \"chat\""}}
	return b
}

// TestUnclaimedBindingMessage: the message names the Binding and passes on its own condition, which
// names the holder and the ways out.
func TestUnclaimedBindingMessage(t *testing.T) {
	md := &workerv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "team-a"},
		Spec:       workerv1.ModelDeploymentSpec{KVCache: &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team-dram"}}},
	}
	b := claimed(&workerv1.KVCachePoolBinding{ObjectMeta: metav1.ObjectMeta{Name: "team-dram", Namespace: "team-a"}}, metav1.ConditionFalse, workerv1.ReasonDomainTaken)
	d, err := kvcache.ResolveDomain(md, b, nil)
	require.NoError(t, err)
	for _, part := range []string{"KVCachePoolBinding team-a/team-dram does not hold its domain", "DomainClaimed",
		`team-b/team-dram already claims domain "chat"`, "without a cache client"} {
		assert.Contains(t, d.Registered.Message, part)
	}
}

// TestBindingNotFoundMessage: the message names the Binding, its namespace and the ways out, which
// are not an edit of spec.kvCache (it is frozen).
func TestBindingNotFoundMessage(t *testing.T) {
	md := &workerv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "chat", Namespace: "team-a"},
		Spec:       workerv1.ModelDeploymentSpec{KVCache: &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team-missing"}}},
	}
	d, err := kvcache.ResolveDomain(md, nil, nil)
	require.NoError(t, err)
	for _, part := range []string{`KVCachePoolBinding "team-missing"`, `namespace "team-a"`, "without a cache client",
		"an administrator grants this namespace a pool by creating that Binding", "create a new deployment", "spec.kvCache is frozen"} {
		assert.Contains(t, d.Registered.Message, part)
	}
}

// TestMissingBindingIsReportedNotFatal: the function reports DomainRegistered and leaves the role's
// template without a cache client, where it used to fail the whole composite; beside it, the same
// deployment with its Binding gets the client.
func TestMissingBindingIsReportedNotFatal(t *testing.T) {
	const deployment = `
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  kvCache: {poolRef: {name: team-dram}}
  roles:
  - {name: server, kind: Server, replicas: 1, size: 1, instanceType: a10g}
`
	for _, row := range []struct {
		name       string
		required   map[string]*fnv1.Resources
		wantStatus fnv1.Status
		wantReason string
		wantClient bool
	}{
		{name: "a missing Binding is DomainRegistered=False/BindingNotFound and renders no client",
			// Crossplane answered the requirement: no such Binding.
			required:   map[string]*fnv1.Resources{"binding": {}},
			wantStatus: fnv1.Status_STATUS_CONDITION_FALSE, wantReason: "BindingNotFound"},
		{name: "a Binding and its pool are Registered and render the client",
			required: map[string]*fnv1.Resources{
				"binding": {Items: []*fnv1.Resource{res(t, `{apiVersion: worker.gpustack.ai/v1, kind: KVCachePoolBinding, metadata: {name: team-dram, namespace: team-a},
				  spec: {poolRef: {name: dram}, domain: {name: chat, blockSize: 16, dtype: bfloat16}, quota: {ceiling: 1Gi}},
				  status: {conditions: [{type: DomainClaimed, status: "True", reason: Claimed, message: m, lastTransitionTime: "2026-01-01T00:00:00Z"}]}}`)}},
				"pool": {Items: []*fnv1.Resource{res(t, `{apiVersion: worker.gpustack.ai/v1, kind: KVCachePool, metadata: {name: dram},
				  spec: {backends: [m], quota: {total: 1Ti}}, status: {clientEndpoint: "mooncake-master:50051"}}`)}},
				"backend": {Items: []*fnv1.Resource{res(t, `{apiVersion: worker.gpustack.ai/v1, kind: KVCacheBackend, metadata: {name: m},
				  spec: {transport: {protocol: Auto}, connection: {external: {endpoints: [{name: Client, address: "m:50051"}, {name: Admin, address: "m:9003"}]}}}}`)}},
				"instancetype/a10g": {},
			},
			wantStatus: fnv1.Status_STATUS_CONDITION_TRUE, wantReason: "Registered", wantClient: true},
	} {
		t.Run(row.name, func(t *testing.T) {
			req := &fnv1.RunFunctionRequest{
				Observed: &fnv1.State{Composite: res(t, deployment)},
				Desired: &fnv1.State{
					Composite: res(t, `{apiVersion: worker.gpustack.ai/v1, kind: ModelDeployment}`),
					Resources: map[string]*fnv1.Resource{"role-server": res(t, desiredRole)},
				},
				RequiredResources: row.required,
			}
			req.RequiredResources["settings"] = &fnv1.Resources{} // no EnvironmentConfig: the defaults
			rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
			require.NoError(t, err)
			require.Empty(t, rsp.GetResults(), "neither is a fatal result")
			c := condition(rsp, "DomainRegistered")
			require.NotNil(t, c)
			assert.Equal(t, row.wantStatus, c.GetStatus())
			assert.Equal(t, row.wantReason, c.GetReason())
			template := rsp.GetDesired().GetResources()["role-server"].GetResource().AsMap()["spec"].(map[string]any)["template"].(map[string]any)
			annotations, _ := template["metadata"].(map[string]any)["annotations"].(map[string]any)
			assert.Equal(t, row.wantClient, annotations["kvcache.gpustack.ai/client-config"] != nil)
			roleMeta, _ := rsp.GetDesired().GetResources()["role-server"].GetResource().AsMap()["metadata"].(map[string]any)
			roleAnnotations, _ := roleMeta["annotations"].(map[string]any)
			held, _ := roleAnnotations["worker.gpustack.ai/rollout-held"].(string)
			if row.wantClient {
				assert.Empty(t, held, "a resolved Binding holds no rollout")
			} else {
				assert.True(t, strings.HasPrefix(held, "RolloutHeldByCache: BindingNotFound: "),
					"the role's running replicas keep their cache client instead of rolling onto none: %q", held)
			}
		})
	}
}
