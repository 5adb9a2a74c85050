package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestServingPorts(t *testing.T) {
	for _, tc := range []struct {
		name            string
		role            workerv1.ModelDeploymentRole
		service, target int32
	}{
		{"nothing declared or passed", workerv1.ModelDeploymentRole{}, 8000, 8000},
		{"the first declared port is both", workerv1.ModelDeploymentRole{Ports: []workerv1.ModelDeploymentPort{{Port: 9000}, {Port: 9001}},
			ExtraArgs: []string{"--port", "7000"}}, 9000, 9000},
		{"a passed --port moves only the container side", workerv1.ModelDeploymentRole{ExtraArgs: []string{"--port=7000"}}, 8000, 7000},
		{"a take-over command's --port", workerv1.ModelDeploymentRole{Command: []string{"serve", "--port", "7001"}, ExtraArgs: []string{"--port", "7000"}}, 8000, 7001},
		{"an unreadable --port is ignored", workerv1.ModelDeploymentRole{ExtraArgs: []string{"--port", "x"}}, 8000, 8000},
		{"an abbreviated --port moves the container side too", workerv1.ModelDeploymentRole{ExtraArgs: []string{"--por=7000"}}, 8000, 7000},
		{"an ambiguous prefix names no port", workerv1.ModelDeploymentRole{ExtraArgs: []string{"--p", "7000"}}, 8000, 8000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			service, target := engine.ServingPorts(workerv1.EngineVLLM, nil, tc.role)
			assert.Equal(t, tc.service, service)
			assert.Equal(t, tc.target, target)
		})
	}
}

func TestRoutingProxyPorts(t *testing.T) {
	llmd := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	decode := workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode}
	assert.True(t, engine.BehindRoutingProxy(llmd, decode))
	assert.False(t, engine.BehindRoutingProxy(&workerv1.ModelDeploymentRouter{Name: workerv1.RouterVLLM}, decode))
	assert.False(t, engine.BehindRoutingProxy(llmd, workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode, Command: []string{"serve"}}))
	assert.False(t, engine.BehindRoutingProxy(nil, decode))
	assert.Equal(t, int32(8200), engine.PortBehindProxy([]int32{8000}))
	assert.Equal(t, int32(8202), engine.PortBehindProxy([]int32{9000, 8201, 8200}))
}

func TestProxiedDecoderPorts(t *testing.T) {
	llmd := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	for _, tc := range []struct {
		rule            string
		role            workerv1.ModelDeploymentRole
		service, target int32
		engine          int32
		own             bool
	}{
		{"user arguments are appended, never merged: the decoder's own --port is its engine's",
			workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode, ExtraArgs: []string{"--port=9100"}}, 8000, 8000, 9100, true},
		{"in any spelling the engine accepts",
			workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode, ExtraArgs: []string{"--por", "9100"}}, 8000, 8000, 9100, true},
		{"near miss: no --port of its own, the engine moves to 8200",
			workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode}, 8000, 8000, 8200, false},
		{"near miss: an ambiguous prefix is no --port",
			workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode, ExtraArgs: []string{"--p", "9100"}}, 8000, 8000, 8200, false},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			service, target := engine.ServingPorts(workerv1.EngineVLLM, llmd, tc.role)
			assert.Equal(t, tc.service, service)
			assert.Equal(t, tc.target, target, "the proxy keeps the serving port")
			port, own := engine.ListenerBehindProxy(workerv1.EngineVLLM, tc.role, []int32{target})
			assert.Equal(t, tc.engine, port)
			assert.Equal(t, tc.own, own)
		})
	}
}
