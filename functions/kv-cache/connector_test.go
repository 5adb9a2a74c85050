package kvcache_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

var binding = &kvcache.Binding{Endpoint: "master.pool.svc:50051", Domain: workerv1.KVCacheDomain{Name: "chat", BlockSize: 16, Dtype: "fp8_e4m3"}}

func role(name string, kind workerv1.RoleKind) workerv1.ModelDeploymentRole {
	return workerv1.ModelDeploymentRole{Name: name, Kind: kind, InstanceType: "a10g"}
}

// transferConfig decodes the --kv-transfer-config document of an amendment.
func transferConfig(t *testing.T, a kvcache.Amendment) map[string]any {
	t.Helper()
	for i, arg := range a.Args {
		if arg == "--kv-transfer-config" {
			doc := map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(a.Args[i+1]), &doc))
			return doc
		}
	}
	return nil
}

func TestVLLMTransferConfig(t *testing.T) {
	llmd := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	rdma := &workerv1.ModelDeploymentKVTransfer{Protocol: workerv1.TransferRDMA}
	cases := []struct {
		rule string
		d    kvcache.Deployment
		role workerv1.ModelDeploymentRole
		want string
	}{
		{"store only on a Server: kv_both", kvcache.Deployment{Binding: binding}, role("s", workerv1.RoleKindServer),
			`{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}`},
		{"store only on an unrouted prefiller: the kind is only the store's discriminator", kvcache.Deployment{Binding: binding}, role("p", workerv1.RoleKindPrefill),
			`{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_producer"}`},
		{"store only on an unrouted decoder", kvcache.Deployment{Binding: binding}, role("d", workerv1.RoleKindDecode),
			`{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_consumer"}`},
		{"pair only: MooncakeConnector with the protocol, tcp when unset", kvcache.Deployment{Router: llmd}, role("p", workerv1.RoleKindPrefill),
			`{"kv_connector":"MooncakeConnector","kv_role":"kv_producer","kv_connector_extra_config":{"mooncake_protocol":"tcp"}}`},
		{"pair only with RDMA", kvcache.Deployment{Router: llmd, KVTransfer: rdma}, role("d", workerv1.RoleKindDecode),
			`{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"mooncake_protocol":"rdma"}}`},
		{"pair and store on a prefiller: MultiConnector, the store kv_both", kvcache.Deployment{Router: llmd, Binding: binding}, role("p", workerv1.RoleKindPrefill),
			`{"kv_connector":"MultiConnector","kv_role":"kv_producer","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeConnector","kv_role":"kv_producer","kv_connector_extra_config":{"mooncake_protocol":"tcp"}},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}]}}`},
		{"pair and store on a decoder: the store kv_consumer", kvcache.Deployment{Router: llmd, Binding: binding}, role("d", workerv1.RoleKindDecode),
			`{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"mooncake_protocol":"tcp"}},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_consumer"}]}}`},
		{"a routed Server has no leg", kvcache.Deployment{Router: llmd, Binding: binding}, role("s", workerv1.RoleKindServer),
			`{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}`},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			tc.d.Engine = workerv1.EngineVLLM
			want := map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(tc.want), &want))
			assert.Equal(t, want, transferConfig(t, kvcache.RenderRole(tc.d, tc.role)))
		})
	}
}

func TestCacheClientRules(t *testing.T) {
	vllm := kvcache.Deployment{Engine: workerv1.EngineVLLM, Binding: binding}
	sglang := kvcache.Deployment{Engine: workerv1.EngineSGLang, Binding: binding}
	env := func(a kvcache.Amendment, name string) (string, bool) {
		for _, e := range a.Env {
			if e.Name == name {
				return e.Value, true
			}
		}
		return "", false
	}
	t.Run("vLLM reads the client JSON from its own annotation; tenant is the domain", func(t *testing.T) {
		a := kvcache.RenderRole(vllm, role("s", ""))
		doc := map[string]any{}
		require.NoError(t, json.Unmarshal([]byte(a.Annotations[kvcache.AnnotationClientConfig]), &doc))
		assert.Equal(t, map[string]any{"metadata_server": "P2PHANDSHAKE", "master_server_address": "master.pool.svc:50051",
			"protocol": "tcp", "device_name": "", "mode": "standalone-store", "global_segment_size": 0.0,
			"local_buffer_size": 134217728.0, "tenant_id": "chat"}, doc)
		path, _ := env(a, "MOONCAKE_CONFIG_PATH")
		assert.Equal(t, "/etc/gpustack/kvcache/mooncake.json", path)
		require.Len(t, a.Volumes, 1)
		assert.Equal(t, "metadata.annotations['kvcache.gpustack.ai/client-config']", a.Volumes[0].DownwardAPI.Items[0].FieldRef.FieldPath)
		assert.True(t, a.Mounts[0].ReadOnly)
	})
	t.Run("the Binding's dtype is rendered while kvCache is set", func(t *testing.T) {
		for _, d := range []kvcache.Deployment{vllm, sglang} {
			a := kvcache.RenderRole(d, role("s", ""))
			assert.Contains(t, a.Args, "--kv-cache-dtype")
			assert.Contains(t, a.Args, "fp8_e4m3")
		}
	})
	t.Run("SGLang gets no file: the environment only, its own IP from the downward API", func(t *testing.T) {
		a := kvcache.RenderRole(sglang, role("s", ""))
		assert.Empty(t, a.Volumes)
		assert.Empty(t, a.Annotations)
		tenant, _ := env(a, "MOONCAKE_TENANT_ID")
		assert.Equal(t, "chat", tenant)
		master, _ := env(a, "MOONCAKE_MASTER")
		assert.Equal(t, "master.pool.svc:50051", master)
		for _, e := range a.Env {
			if e.Name == "MOONCAKE_LOCAL_HOSTNAME" {
				assert.Equal(t, "status.podIP", e.ValueFrom.FieldRef.FieldPath)
			}
		}
		assert.Equal(t, []string{"--hicache-storage-backend", "mooncake", "--enable-hierarchical-cache", "--kv-cache-dtype", "fp8_e4m3"}, a.Args)
	})
	t.Run("a defaulted key the user sets is left to the user", func(t *testing.T) {
		r := role("s", "")
		r.Env = []workerv1.ModelDeploymentEnvVar{{Name: "MC_TE_METRIC", Value: "0"}}
		_, rendered := env(kvcache.RenderRole(vllm, r), "MC_TE_METRIC")
		assert.False(t, rendered)
		v, _ := env(kvcache.RenderRole(vllm, role("s", "")), "MC_TE_METRIC")
		assert.Equal(t, "1", v)
	})
	t.Run("MC_FORCE_TCP only on a tcp path", func(t *testing.T) {
		_, tcp := env(kvcache.RenderRole(vllm, role("s", "")), "MC_FORCE_TCP")
		assert.True(t, tcp)
		rdma := vllm
		rdma.StoreProtocols = map[string]string{"s": "rdma"}
		_, forced := env(kvcache.RenderRole(rdma, role("s", "")), "MC_FORCE_TCP")
		assert.False(t, forced)
		// The store client speaks the backend's transport; spec.kvTransfer is the direct leg's only.
		legOnly := vllm
		legOnly.KVTransfer = &workerv1.ModelDeploymentKVTransfer{Protocol: workerv1.TransferRDMA}
		_, forced = env(kvcache.RenderRole(legOnly, role("s", "")), "MC_FORCE_TCP")
		assert.True(t, forced, "a lone Server has no direct leg, so its only path is the tcp store")
	})
	t.Run("the store client speaks the matched backend transport", func(t *testing.T) {
		rdma := sglang
		rdma.StoreProtocols = map[string]string{"s": "rdma"}
		protocol, _ := env(kvcache.RenderRole(rdma, role("s", "")), "MOONCAKE_PROTOCOL")
		assert.Equal(t, "rdma", protocol)
		v := vllm
		v.StoreProtocols = map[string]string{"s": "efa"}
		assert.Contains(t, kvcache.RenderRole(v, role("s", "")).Annotations[kvcache.AnnotationClientConfig], `"protocol":"efa"`)
	})
	t.Run("nothing is rendered on a take-over role", func(t *testing.T) {
		r := role("s", "")
		r.Command = []string{"vllm", "serve", "x"}
		assert.Equal(t, kvcache.Amendment{}, kvcache.RenderRole(vllm, r))
	})
	t.Run("KV events only on block-producing vLLM roles under llm-d-router", func(t *testing.T) {
		routed := vllm
		routed.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
		assert.Contains(t, kvcache.RenderRole(routed, role("p", workerv1.RoleKindPrefill)).Args, "--kv-events-config")
		assert.NotContains(t, kvcache.RenderRole(routed, role("d", workerv1.RoleKindDecode)).Args, "--kv-events-config")
		assert.NotContains(t, kvcache.RenderRole(vllm, role("s", "")).Args, "--kv-events-config", "no router")
		sg := sglang
		sg.Router = routed.Router
		assert.NotContains(t, kvcache.RenderRole(sg, role("s", "")).Args, "--kv-events-config", "SGLang has no publisher")
	})
	t.Run("the SGLang pair follows the declared pair, not the router", func(t *testing.T) {
		pair := sglang
		pair.Roles = []workerv1.ModelDeploymentRole{role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)}
		p := kvcache.RenderRole(pair, pair.Roles[0])
		assert.Contains(t, p.Args, "--disaggregation-bootstrap-port")
		assert.Equal(t, "8998", p.Annotations[kvcache.AnnotationSGLangBoot])
		d := kvcache.RenderRole(pair, pair.Roles[1])
		assert.Contains(t, d.Args, "--disaggregation-decode-retraction-backup")
		assert.NotContains(t, d.Args, "--enable-hierarchical-cache", "not on a decode half")
		lone := sglang
		lone.Roles = pair.Roles[:1]
		assert.NotContains(t, kvcache.RenderRole(lone, lone.Roles[0]).Args, "--disaggregation-mode", "half a pair is no pair")
	})
}

func TestMatchStoreTransports(t *testing.T) {
	roles := []workerv1.ModelDeploymentRole{
		{Name: "prefill", Kind: workerv1.RoleKindPrefill, InstanceType: "910b"},
		{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: "h100"},
		{Name: "mine", InstanceType: "910b", Command: []string{"serve"}},
	}
	ascend := map[string]string{"910b": "ascend", "h100": "nvidia"}
	t.Run("each role takes the first offer its engine accepts", func(t *testing.T) {
		got, err := kvcache.MatchStoreTransports(workerv1.EngineVLLM, roles, ascend, []string{"rdma", "ascend"})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"prefill": "ascend", "decode": "rdma"}, got, "a take-over role gets no client")
	})
	t.Run("vLLM-Ascend without a CANN group fails the render", func(t *testing.T) {
		_, err := kvcache.MatchStoreTransports(workerv1.EngineVLLM, roles, ascend, []string{"tcp"})
		require.Error(t, err)
		assert.Contains(t, err.Error(), `role "prefill" on InstanceType "910b"`)
		assert.Contains(t, err.Error(), "TransportUnsupported")
		assert.Contains(t, err.Error(), "to CANN")
	})
	t.Run("near miss: SGLang on Ascend is not vllm-ascend", func(t *testing.T) {
		got, err := kvcache.MatchStoreTransports(workerv1.EngineSGLang, roles, ascend, []string{"tcp"})
		require.NoError(t, err)
		assert.Equal(t, "tcp", got["prefill"])
	})
}

func TestBackendOffersNeedTheBackend(t *testing.T) {
	pool := &workerv1.KVCachePool{Spec: workerv1.KVCachePoolSpec{Backends: []string{"mooncake-dram"}}}
	pool.Name = "dram"
	_, err := kvcache.BackendOffers(pool, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `KVCachePool dram names KVCacheBackend "mooncake-dram" in spec.backends, which does not exist`)
	offers, err := kvcache.BackendOffers(pool, &workerv1.KVCacheBackend{})
	require.NoError(t, err)
	assert.Equal(t, []string{"tcp"}, offers, "near miss: an existing backend with no protocol offers tcp")
}
