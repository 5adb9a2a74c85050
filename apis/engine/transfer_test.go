package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestDirectLegRules(t *testing.T) {
	llmd := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	vllmRouter := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterVLLM}
	prefill := workerv1.ModelDeploymentRole{Name: "p", Kind: workerv1.RoleKindPrefill}
	decode := workerv1.ModelDeploymentRole{Name: "d", Kind: workerv1.RoleKindDecode}
	pair := []workerv1.ModelDeploymentRole{prefill, decode}
	cases := []struct {
		rule         string
		router       *workerv1.ModelDeploymentRouter
		manufacturer string
		roles        []workerv1.ModelDeploymentRole
		want         bool
	}{
		{"vLLM-Ascend: a leg under llm-d-router with both halves", llmd, "ascend", pair, true},
		{"vLLM-Ascend: no leg under vllm-router", vllmRouter, "ascend", pair, false},
		{"vLLM-Ascend: no leg without a router", nil, "ascend", pair, false},
		{"vLLM-Ascend: no leg for half a pair", llmd, "ascend", pair[:1], false},
		{"near miss: native vLLM's leg follows the router alone", vllmRouter, "nvidia", pair[:1], true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, engine.RendersDirectLeg(workerv1.EngineVLLM, tc.router, tc.manufacturer, tc.roles, prefill))
		})
	}
	t.Run("vLLM-Ascend's leg has no protocol: spec.kvTransfer.protocol is not read", func(t *testing.T) {
		spec := &workerv1.ModelDeploymentSpec{Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM},
			KVTransfer: &workerv1.ModelDeploymentKVTransfer{Protocol: workerv1.TransferRDMA}}
		assert.Equal(t, workerv1.TransferProtocol(""), engine.DirectLegProtocol(spec, "ascend"))
		assert.Equal(t, workerv1.TransferRDMA, engine.DirectLegProtocol(spec, "nvidia"), "near miss: native vLLM reads it")
	})
	t.Run("no KV events on vLLM-Ascend", func(t *testing.T) {
		server := workerv1.ModelDeploymentRole{Name: "s", Kind: workerv1.RoleKindServer}
		assert.False(t, engine.PublishesKVEvents(workerv1.EngineVLLM, "ascend", llmd, server))
		assert.True(t, engine.PublishesKVEvents(workerv1.EngineVLLM, "nvidia", llmd, server), "near miss: native vLLM publishes")
	})
	t.Run("the vLLM-Ascend prefiller still opens the bootstrap port", func(t *testing.T) {
		assert.True(t, engine.OpensBootstrap(workerv1.EngineVLLM, llmd, "ascend", pair, prefill))
		assert.False(t, engine.OpensBootstrap(workerv1.EngineVLLM, llmd, "ascend", pair, decode))
	})
}

func TestVLLMAscendTensorParallelRule(t *testing.T) {
	cases := []struct {
		rule             string
		prefill, decode  []string
		manufacturer     string
		router           workerv1.RouterName
		wantRefusedTexts string
	}{
		{"prefill tp below decode tp is refused RoleUnsupported", []string{"-tp", "2"}, []string{"--tensor-parallel-size=4"}, "ascend", workerv1.RouterLLMD,
			"RoleUnsupported: the vLLM-Ascend transfer leg requires the prefill tp_size to be at least the decode one, but the pair declares prefill 2 and decode 4; narrow the decode role's tensor parallelism or widen the prefill role's"},
		{"near miss: equal tp is admitted", []string{"-tp", "4"}, []string{"-tp", "4"}, "ascend", workerv1.RouterLLMD, ""},
		{"near miss: undeclared on both is 1 and 1", nil, nil, "ascend", workerv1.RouterLLMD, ""},
		{"near miss: native vLLM has no such rule", []string{"-tp", "2"}, []string{"-tp", "4"}, "nvidia", workerv1.RouterLLMD, ""},
		{"near miss: under vllm-router no leg renders, so nothing is refused", []string{"-tp", "2"}, []string{"-tp", "4"}, "ascend", workerv1.RouterVLLM, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			roles := []workerv1.ModelDeploymentRole{
				{Name: "p", Kind: workerv1.RoleKindPrefill, InstanceType: "910b", ExtraArgs: tc.prefill},
				{Name: "d", Kind: workerv1.RoleKindDecode, InstanceType: "910b", ExtraArgs: tc.decode},
			}
			err := engine.ValidateAscendLeg(workerv1.EngineVLLM, &workerv1.ModelDeploymentRouter{Name: tc.router}, roles, map[string]string{"910b": tc.manufacturer})
			if tc.wantRefusedTexts == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.wantRefusedTexts, err.Error())
		})
	}
}
