package kvcache_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

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
		{"an artifact's cache prefix on the store connector", kvcache.Deployment{Binding: binding, CachePrefix: "m-0123456789abcdef0123456789abcdef"}, role("s", workerv1.RoleKindServer),
			`{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","kv_connector_extra_config":{"cache_prefix":"m-0123456789abcdef0123456789abcdef"}}`},
		{"an artifact's cache prefix on the store connector inside MultiConnector, not on the leg", kvcache.Deployment{Router: llmd, Binding: binding, CachePrefix: "m-0123456789abcdef0123456789abcdef"}, role("d", workerv1.RoleKindDecode),
			`{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[{"kv_connector":"MooncakeConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"mooncake_protocol":"tcp"}},{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"cache_prefix":"m-0123456789abcdef0123456789abcdef"}}]}}`},
		{"near miss: a cache prefix without a store renders nothing", kvcache.Deployment{Router: llmd, CachePrefix: "m-0123456789abcdef0123456789abcdef"}, role("p", workerv1.RoleKindPrefill),
			`{"kv_connector":"MooncakeConnector","kv_role":"kv_producer","kv_connector_extra_config":{"mooncake_protocol":"tcp"}}`},
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

// ascendPair is a vLLM-Ascend prefill/decode pair under llm-d-router on InstanceType 910b, the
// prefiller at tp 4 (dp 2 via -dp), the decoder at tp 2 and no declared dp.
func ascendPair() kvcache.Deployment {
	prefill := workerv1.ModelDeploymentRole{Name: "p", Kind: workerv1.RoleKindPrefill, InstanceType: "910b",
		ExtraArgs: []string{"--tensor-parallel-size", "4", "-dp", "2"}}
	decode := workerv1.ModelDeploymentRole{Name: "d", Kind: workerv1.RoleKindDecode, InstanceType: "910b",
		ExtraArgs: []string{"-tp=2"}}
	return kvcache.Deployment{Engine: workerv1.EngineVLLM, Router: &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD},
		Roles: []workerv1.ModelDeploymentRole{prefill, decode}, Manufacturers: map[string]string{"910b": "ascend"},
		KVTransfer: &workerv1.ModelDeploymentKVTransfer{Protocol: workerv1.TransferRDMA}}
}

func TestVLLMAscendTransferConfig(t *testing.T) {
	const leg = `{"kv_connector":"MooncakeConnectorV1","kv_role":%q,"kv_port":8998,"kv_connector_extra_config":{"prefill":{"tp_size":4,"dp_size":2},"decode":{"tp_size":2,"dp_size":1}}}`
	bound := func(d kvcache.Deployment) kvcache.Deployment {
		d.Binding = binding
		d.StoreProtocols = map[string]string{"p": "ascend", "d": "ascend"}
		return d
	}
	router := func(d kvcache.Deployment, name workerv1.RouterName) kvcache.Deployment {
		d.Router = &workerv1.ModelDeploymentRouter{Name: name}
		return d
	}
	unrouted := ascendPair()
	unrouted.Router = nil
	cases := []struct {
		rule string
		d    kvcache.Deployment
		role int
		want string
	}{
		{"store only: AscendStoreConnector, kv_role by kind, no cache_prefix", bound(unrouted), 0,
			`{"kv_connector":"AscendStoreConnector","kv_role":"kv_producer"}`},
		{"leg on the prefiller: MooncakeConnectorV1 on kv_port 8998 with both halves' degrees, no protocol", ascendPair(), 0,
			fmt.Sprintf(leg, "kv_producer")},
		{"leg on the decoder: the same degrees", ascendPair(), 1, fmt.Sprintf(leg, "kv_consumer")},
		{"leg and store on the prefiller: MultiConnector [direct, store], the store kv_both", bound(ascendPair()), 0,
			`{"kv_connector":"MultiConnector","kv_role":"kv_producer","kv_connector_extra_config":{"connectors":[` + fmt.Sprintf(leg, "kv_producer") + `,{"kv_connector":"AscendStoreConnector","kv_role":"kv_both"}]}}`},
		{"leg and store on the decoder: the store kv_consumer", bound(ascendPair()), 1,
			`{"kv_connector":"MultiConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"connectors":[` + fmt.Sprintf(leg, "kv_consumer") + `,{"kv_connector":"AscendStoreConnector","kv_role":"kv_consumer"}]}}`},
		{"no leg under vllm-router, silently: the store alone", bound(router(ascendPair(), workerv1.RouterVLLM)), 0,
			`{"kv_connector":"AscendStoreConnector","kv_role":"kv_producer"}`},
		{"no leg and no store: no document", router(ascendPair(), workerv1.RouterVLLM), 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := transferConfig(t, kvcache.RenderRole(tc.d, tc.d.Roles[tc.role]))
			if tc.want == "" {
				assert.Nil(t, got)
				return
			}
			want := map[string]any{}
			require.NoError(t, json.Unmarshal([]byte(tc.want), &want))
			assert.Equal(t, want, got)
		})
	}
	t.Run("near miss: half a pair under llm-d-router gets no Ascend leg", func(t *testing.T) {
		d := ascendPair()
		d.Roles = d.Roles[:1]
		assert.Nil(t, transferConfig(t, kvcache.RenderRole(d, d.Roles[0])))
	})
	t.Run("undeclared degrees are 1; a take-over half's command is read", func(t *testing.T) {
		d := ascendPair()
		d.Roles[0].ExtraArgs = nil
		d.Roles[1].ExtraArgs, d.Roles[1].Command = nil, []string{"vllm", "serve", "m", "--tensor-parallel-size=1", "--data-parallel-size", "3"}
		extra := transferConfig(t, kvcache.RenderRole(d, d.Roles[0]))["kv_connector_extra_config"]
		assert.Equal(t, map[string]any{"prefill": map[string]any{"tp_size": 1.0, "dp_size": 1.0}, "decode": map[string]any{"tp_size": 1.0, "dp_size": 3.0}}, extra)
	})
}

func TestVLLMAscendRoleRules(t *testing.T) {
	env := func(a kvcache.Amendment, name string) (string, bool) {
		for _, e := range a.Env {
			if e.Name == name {
				return e.Value, true
			}
		}
		return "", false
	}
	driver := corev1.Volume{Name: "gpustack-ascend-driver", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: "/usr/local/Ascend/driver", Type: ptr.To(corev1.HostPathDirectory)}}}
	driverMount := corev1.VolumeMount{Name: "gpustack-ascend-driver", MountPath: "/usr/local/Ascend/driver", ReadOnly: true}
	t.Run("the prefiller declares mc-bootstrap 8998 but gets no VLLM_MOONCAKE_BOOTSTRAP_PORT", func(t *testing.T) {
		d := ascendPair()
		a := kvcache.RenderRole(d, d.Roles[0])
		assert.Contains(t, a.Ports, corev1.ContainerPort{Name: "mc-bootstrap", ContainerPort: 8998, Protocol: corev1.ProtocolTCP})
		_, set := env(a, "VLLM_MOONCAKE_BOOTSTRAP_PORT")
		assert.False(t, set)
	})
	t.Run("near miss: native vLLM's prefiller gets VLLM_MOONCAKE_BOOTSTRAP_PORT", func(t *testing.T) {
		d := ascendPair()
		d.Manufacturers = map[string]string{"910b": "nvidia"}
		v, _ := env(kvcache.RenderRole(d, d.Roles[0]), "VLLM_MOONCAKE_BOOTSTRAP_PORT")
		assert.Equal(t, "8998", v)
	})
	t.Run("the host driver is mounted read-only on both halves with the leg", func(t *testing.T) {
		d := ascendPair()
		for _, r := range d.Roles {
			a := kvcache.RenderRole(d, r)
			assert.Contains(t, a.Volumes, driver, r.Name)
			assert.Contains(t, a.Mounts, driverMount, r.Name)
		}
	})
	t.Run("near miss: no driver mount without the leg (store only)", func(t *testing.T) {
		d := ascendPair()
		d.Router, d.Binding, d.StoreProtocols = nil, binding, map[string]string{"p": "ascend"}
		a := kvcache.RenderRole(d, d.Roles[0])
		assert.NotContains(t, a.Volumes, driver)
		assert.NotContains(t, a.Mounts, driverMount)
	})
	t.Run("no KV events on Ascend under llm-d-router", func(t *testing.T) {
		d := ascendPair()
		d.Roles = []workerv1.ModelDeploymentRole{{Name: "s", Kind: workerv1.RoleKindServer, InstanceType: "910b"}}
		assert.NotContains(t, kvcache.RenderRole(d, d.Roles[0]).Args, "--kv-events-config")
		d.Manufacturers = nil
		assert.Contains(t, kvcache.RenderRole(d, d.Roles[0]).Args, "--kv-events-config", "near miss: native vLLM publishes")
	})
	t.Run("no MC_FORCE_TCP on the Ascend leg: it has no tcp protocol; MC_TE_METRIC still defaulted", func(t *testing.T) {
		d := ascendPair()
		d.KVTransfer = nil // unset is tcp on native vLLM
		a := kvcache.RenderRole(d, d.Roles[1])
		_, forced := env(a, "MC_FORCE_TCP")
		assert.False(t, forced)
		metric, _ := env(a, "MC_TE_METRIC")
		assert.Equal(t, "1", metric)
		d.Manufacturers = nil
		_, forced = env(kvcache.RenderRole(d, d.Roles[1]), "MC_FORCE_TCP")
		assert.True(t, forced, "near miss: native vLLM's tcp leg forces TCP")
	})
	t.Run("no MC_FORCE_TCP on an Ascend store client: it speaks ascend, not tcp", func(t *testing.T) {
		d := ascendPair()
		d.Router, d.Binding, d.StoreProtocols = nil, binding, map[string]string{"p": "ascend"}
		_, forced := env(kvcache.RenderRole(d, d.Roles[0]), "MC_FORCE_TCP")
		assert.False(t, forced)
	})
	t.Run("no Ascend-specific env", func(t *testing.T) {
		d := ascendPair()
		for _, e := range kvcache.RenderRole(d, d.Roles[0]).Env {
			assert.Contains(t, []string{"MC_TE_METRIC"}, e.Name)
		}
	})
}

// TestCachePrefix: vLLM-Ascend's AscendStoreConnector takes no cache prefix.
func TestCachePrefix(t *testing.T) {
	const id = "m-0123456789abcdef0123456789abcdef"
	d := ascendPair()
	d.Binding, d.CachePrefix = binding, id
	d.StoreProtocols = map[string]string{"p": "ascend", "d": "ascend"}
	doc := transferConfig(t, kvcache.RenderRole(d, d.Roles[1]))
	raw, err := json.Marshal(doc)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "AscendStoreConnector")
	assert.NotContains(t, string(raw), "cache_prefix")
}

// TestSGLangStoreConfiguration: SGLang reads its store configuration from the extra-config
// argument, else the config-path file, else the environment, and either of the first two replaces
// the whole environment configuration with defaults. So neither is rendered, not even to carry the
// weights' tag.
func TestSGLangStoreConfiguration(t *testing.T) {
	const id = "m-0123456789abcdef0123456789abcdef"
	withArtifact := func(e workerv1.Engine) kvcache.Deployment {
		return kvcache.Deployment{Engine: e, Binding: binding, CachePrefix: id}
	}
	pair := []workerv1.ModelDeploymentRole{role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)}
	for _, tc := range []struct {
		name string
		d    kvcache.Deployment
		role workerv1.ModelDeploymentRole
	}{
		{"a server with an artifact gets no extra-config and no config path", withArtifact(workerv1.EngineSGLang), role("s", workerv1.RoleKindServer)},
		{"a prefill half with an artifact gets none either",
			kvcache.Deployment{Engine: workerv1.EngineSGLang, Binding: binding, CachePrefix: id, Roles: pair}, pair[0]},
		{"a decode half with an artifact gets none either",
			kvcache.Deployment{Engine: workerv1.EngineSGLang, Binding: binding, CachePrefix: id, Roles: pair}, pair[1]},
		{"without an artifact, none", kvcache.Deployment{Engine: workerv1.EngineSGLang, Binding: binding}, role("s", workerv1.RoleKindServer)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := kvcache.RenderRole(tc.d, tc.role)
			assert.Contains(t, a.Args, "--hicache-storage-backend", "the store is still bound")
			assert.NotContains(t, a.Args, "--hicache-storage-backend-extra-config")
			for _, arg := range a.Args {
				assert.NotContains(t, arg, id, "the weights' tag travels nowhere on SGLang")
			}
			for _, e := range a.Env {
				assert.NotContains(t, []string{"SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "MOONCAKE_CONFIG_PATH"}, e.Name)
			}
			assert.Empty(t, a.Volumes, "no file to point a path at")
		})
	}
	t.Run("near miss: native vLLM's store keys its blocks by the weights' cache prefix", func(t *testing.T) {
		doc := transferConfig(t, kvcache.RenderRole(withArtifact(workerv1.EngineVLLM), role("s", workerv1.RoleKindServer)))
		assert.Equal(t, map[string]any{"cache_prefix": id}, doc["kv_connector_extra_config"])
	})
}

// TestSGLangCacheSwitches: SGLang's two defaulted cache switches are the hierarchical (host-memory)
// cache under a bound store on every role but a decode half, and the decode half's retraction backup
// to host memory, which follows the declared pair; a switch the user sets in any spelling is left to
// the user.
func TestSGLangCacheSwitches(t *testing.T) {
	const hierarchical, backup = "--enable-hierarchical-cache", "--disaggregation-decode-retraction-backup"
	pair := []workerv1.ModelDeploymentRole{role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)}
	sglang := func(b *kvcache.Binding, roles ...workerv1.ModelDeploymentRole) kvcache.Deployment {
		return kvcache.Deployment{Engine: workerv1.EngineSGLang, Binding: b, Roles: roles}
	}
	withArgs := func(r workerv1.ModelDeploymentRole, args ...string) workerv1.ModelDeploymentRole {
		r.ExtraArgs = args
		return r
	}
	count := func(args []string, flag string) int {
		n := 0
		for _, a := range args {
			if a == flag {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name                 string
		d                    kvcache.Deployment
		role                 workerv1.ModelDeploymentRole
		hierarchical, backup bool
	}{
		{"a bound server defaults the hierarchical cache", sglang(binding), role("s", workerv1.RoleKindServer), true, false},
		{"a bound prefill half defaults the hierarchical cache", sglang(binding, pair...), pair[0], true, false},
		{"near miss: an unbound server gets no hierarchical cache", sglang(nil), role("s", workerv1.RoleKindServer), false, false},
		{"near miss: a bound decode half gets no hierarchical cache, its backup instead", sglang(binding, pair...), pair[1], false, true},
		{"the user's own hierarchical cache wins, abbreviated too",
			sglang(binding), withArgs(role("s", workerv1.RoleKindServer), "--enable-hierarchical"), false, false},
		{"a decode half defaults the retraction backup, bound or not", sglang(nil, pair...), pair[1], false, true},
		{"near miss: a prefill half gets no retraction backup", sglang(nil, pair...), pair[0], false, false},
		{"near miss: a lone decode role is no half and gets no retraction backup", sglang(binding, pair[1]), pair[1], false, false},
		{"the user's own retraction backup wins, abbreviated too",
			sglang(binding, pair...), withArgs(pair[1], "--disaggregation-decode-retraction=cpu_tensor"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := kvcache.RenderRole(tc.d, tc.role)
			assert.Equal(t, b2i(tc.hierarchical), count(a.Args, hierarchical), hierarchical)
			assert.Equal(t, b2i(tc.backup), count(a.Args, backup), backup)
			if tc.backup {
				i := indexOf(a.Args, backup)
				require.Less(t, i+1, len(a.Args))
				assert.Equal(t, "cpu_tensor", a.Args[i+1])
			}
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}
