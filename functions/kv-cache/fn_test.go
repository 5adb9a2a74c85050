package kvcache_test

import (
	"context"
	"fmt"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

func res(t *testing.T, manifest string) *fnv1.Resource {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &m))
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return &fnv1.Resource{Resource: s}
}

const routedDeployment = `
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: SGLang, image: lmsysorg/sglang:v0.5.21}
  router: {name: sglang-gateway}
  roles:
  - {name: server, kind: Server, replicas: 2, size: 1, instanceType: a10g}
`

const desiredRole = `
apiVersion: internal.mdplane.io/v1alpha1
kind: ModelRole
metadata: {name: chat-server}
spec:
  template: {spec: {containers: [{name: main, ports: [{name: http, containerPort: 8000}]}]}}
`

func routerRequest(t *testing.T, observedDeployment string) *fnv1.RunFunctionRequest {
	req := &fnv1.RunFunctionRequest{
		Observed: &fnv1.State{Composite: res(t, routedDeployment), Resources: map[string]*fnv1.Resource{}},
		Desired: &fnv1.State{
			Composite: res(t, `{apiVersion: worker.gpustack.ai/v1, kind: ModelDeployment, status: {endpoint: "http://chat.team-a.svc:8000"}}`),
			Resources: map[string]*fnv1.Resource{
				"role-server":    res(t, desiredRole),
				"service-server": res(t, `{apiVersion: v1, kind: Service, metadata: {name: chat-server}, spec: {ports: [{name: http, port: 8000}]}}`),
			},
		},
		RequiredResources: map[string]*fnv1.Resources{"settings": {}}, // no EnvironmentConfig: the defaults
	}
	if observedDeployment != "" {
		req.Observed.Resources["router-deployment"] = res(t, observedDeployment)
	}
	return req
}

func condition(rsp *fnv1.RunFunctionResponse, typ string) *fnv1.Condition {
	for _, c := range rsp.GetConditions() {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

func TestRouterEndpoint(t *testing.T) {
	t.Run("no address while the router does not serve", func(t *testing.T) {
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), routerRequest(t, ""))
		require.NoError(t, err)
		require.Empty(t, rsp.GetResults())
		status := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
		assert.NotContains(t, status, "endpoint", "the deployment Service is not the address behind a router")
		assert.Equal(t, "NotDeployed", condition(rsp, "RouterReady").GetReason())
		assert.Contains(t, rsp.GetDesired().GetResources(), "router-deployment")
		assert.Equal(t, fnv1.Ready_READY_FALSE, rsp.GetDesired().GetComposite().GetReady(), "the deployment is not Ready while its router serves no replica")
	})
	t.Run("the router's address once a replica is available", func(t *testing.T) {
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(),
			routerRequest(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: chat-router}, status: {readyReplicas: 1}}`))
		require.NoError(t, err)
		status := rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
		assert.Equal(t, "http://chat-router.team-a.svc:8081", status["endpoint"])
		assert.Equal(t, fnv1.Status_STATUS_CONDITION_TRUE, condition(rsp, "RouterReady").GetStatus())
		assert.Equal(t, fnv1.Ready_READY_TRUE, rsp.GetDesired().GetResources()["router-deployment"].GetReady())
		router := status["router"].(map[string]any)
		role := router["roles"].([]any)[0].(map[string]any)
		assert.Equal(t, "http://chat-server.team-a.svc:8000", role["endpoint"])
		assert.NotContains(t, role, "kvEvents", "SGLang publishes no KV events")
	})
	t.Run("a router needs every role on one serving port", func(t *testing.T) {
		req := routerRequest(t, "")
		two := routedDeployment + "  - {name: other, kind: Server, replicas: 1, size: 1, instanceType: a10g, ports: [{port: 9000}]}\n"
		req.Observed.Composite = res(t, two)
		req.Desired.Resources["role-other"] = res(t, `{apiVersion: internal.mdplane.io/v1alpha1, kind: ModelRole, metadata: {name: chat-other},
		  spec: {template: {spec: {containers: [{name: main, ports: [{name: http, containerPort: 9000}]}]}}}}`)
		req.Desired.Resources["service-other"] = res(t, `{apiVersion: v1, kind: Service, metadata: {name: chat-other}, spec: {ports: [{name: http, port: 8000}]}}`)
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
		require.NoError(t, err)
		require.Len(t, rsp.GetResults(), 1)
		assert.Equal(t, fnv1.Severity_SEVERITY_FATAL, rsp.GetResults()[0].GetSeverity())
		assert.Contains(t, rsp.GetResults()[0].GetMessage(), "a router needs every role on one serving port")
	})
}

const ascendPairDeployment = `
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: quay.io/ascend/vllm-ascend:v0.11.0}
  router: {name: llm-d-router}
  roles:
  - {name: prefill, kind: Prefill, replicas: 1, size: 1, instanceType: 910b, extraArgs: [-tp, "%s"]}
  - {name: decode, kind: Decode, replicas: 1, size: 1, instanceType: 910b, extraArgs: [-tp, "%s"]}
`

// ascendRequest runs the kv-cache step over a vLLM-Ascend pair with the given tensor degrees; the
// InstanceType is served as Crossplane serves a required resource.
func ascendRequest(t *testing.T, prefillTP, decodeTP string) *fnv1.RunFunctionRequest {
	md := fmt.Sprintf(ascendPairDeployment, prefillTP, decodeTP)
	desired := map[string]*fnv1.Resource{}
	for _, r := range []string{"prefill", "decode"} {
		desired["role-"+r] = res(t, `{apiVersion: internal.mdplane.io/v1alpha1, kind: ModelRole, metadata: {name: chat-`+r+`},
		  spec: {template: {spec: {containers: [{name: main, args: [--port, "8000"], ports: [{name: http, containerPort: 8000}]}]}}}}`)
		desired["service-"+r] = res(t, `{apiVersion: v1, kind: Service, metadata: {name: chat-`+r+`}, spec: {ports: [{name: http, port: 8000}]}}`)
	}
	return &fnv1.RunFunctionRequest{
		Observed: &fnv1.State{Composite: res(t, md), Resources: map[string]*fnv1.Resource{}},
		Desired:  &fnv1.State{Composite: res(t, `{apiVersion: worker.gpustack.ai/v1, kind: ModelDeployment}`), Resources: desired},
		RequiredResources: map[string]*fnv1.Resources{"settings": {}, "instancetype/910b": {Items: []*fnv1.Resource{res(t,
			`{apiVersion: worker.gpustack.ai/v1, kind: InstanceType, metadata: {name: 910b}, status: {detail: {manufacturer: ascend}}}`)}}},
	}
}

func TestVLLMAscendRender(t *testing.T) {
	t.Run("the InstanceType is required for a routed vLLM deployment without a Binding", func(t *testing.T) {
		req := ascendRequest(t, "2", "2")
		req.RequiredResources = nil
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
		require.NoError(t, err)
		assert.Contains(t, rsp.GetRequirements().GetResources(), "instancetype/910b")
	})
	t.Run("prefill tp below decode tp fails the render RoleUnsupported", func(t *testing.T) {
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), ascendRequest(t, "2", "4"))
		require.NoError(t, err)
		require.Len(t, rsp.GetResults(), 1)
		assert.Equal(t, fnv1.Severity_SEVERITY_FATAL, rsp.GetResults()[0].GetSeverity())
		assert.Contains(t, rsp.GetResults()[0].GetMessage(), "RoleUnsupported: the vLLM-Ascend transfer leg requires the prefill tp_size to be at least the decode one, but the pair declares prefill 2 and decode 4")
	})
	t.Run("near miss: equal tp renders; no KV events, so KVEventsPublishing is PublisherDisabled", func(t *testing.T) {
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), ascendRequest(t, "2", "2"))
		require.NoError(t, err)
		require.Empty(t, rsp.GetResults())
		c := condition(rsp, "KVEventsPublishing")
		assert.Equal(t, fnv1.Status_STATUS_CONDITION_FALSE, c.GetStatus())
		assert.Equal(t, "PublisherDisabled", c.GetReason())
		assert.Contains(t, c.GetMessage(), `roles ["prefill"] run vLLM-Ascend`)
		decode := rsp.GetDesired().GetResources()["role-decode"].GetResource().AsMap()
		initContainers, _, _ := unstructured.NestedSlice(decode, "spec", "template", "spec", "initContainers")
		require.Len(t, initContainers, 1)
		assert.Contains(t, initContainers[0].(map[string]any)["args"], "--kv-connector=nixlv2")
	})
}

func TestConditionsReportWhatIsDeployed(t *testing.T) {
	t.Run("SGLang behind sglang-gateway reports KVEventsPublishing=False/PublisherDisabled", func(t *testing.T) {
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), routerRequest(t, ""))
		require.NoError(t, err)
		c := condition(rsp, "KVEventsPublishing")
		assert.Equal(t, fnv1.Status_STATUS_CONDITION_FALSE, c.GetStatus())
		assert.Equal(t, "PublisherDisabled", c.GetReason())
	})
	// A managed vLLM pair under llm-d-router on nvidia publishes; render-roles, earlier in the
	// pipeline, reports from the standing replicas whether a role still runs a take-over command.
	nvidiaPair := func(desiredStatus string) *fnv1.RunFunctionRequest {
		req := ascendRequest(t, "2", "2")
		req.RequiredResources["instancetype/910b"] = &fnv1.Resources{Items: []*fnv1.Resource{res(t,
			`{apiVersion: worker.gpustack.ai/v1, kind: InstanceType, metadata: {name: 910b}, status: {detail: {manufacturer: nvidia}}}`)}}
		req.Desired.Composite = res(t, `{apiVersion: worker.gpustack.ai/v1, kind: ModelDeployment, status: `+desiredStatus+`}`)
		return req
	}
	for _, tc := range []struct {
		rule, status, reason string
	}{
		{"every deployed producer managed: Publishing", `{roles: [{name: prefill}, {name: decode}]}`, "Publishing"},
		{"a producer whose standing replicas still run a take-over command: RoleUnmanaged, though its spec is managed",
			`{roles: [{name: prefill, unmanaged: true}, {name: decode}]}`, "RoleUnmanaged"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), nvidiaPair(tc.status))
			require.NoError(t, err)
			require.Empty(t, rsp.GetResults())
			assert.Equal(t, tc.reason, condition(rsp, "KVEventsPublishing").GetReason())
		})
	}
}
