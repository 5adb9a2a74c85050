package kvcache_test

import (
	"context"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

const llmdDeployment = `
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: SGLang, image: lmsysorg/sglang:v0.5.21}
  router: {name: llm-d-router%s}
  roles:
  - {name: server, kind: Server, replicas: %s, size: 1, instanceType: a10g}
`

// llmdRequest is a request for an SGLang deployment behind llm-d-router; router adds fields to
// spec.router, observed is the router Deployment as Crossplane last saw it ("" for none yet).
func llmdRequest(t *testing.T, router, replicas, observed string) *fnv1.RunFunctionRequest {
	req := routerRequest(t, observed)
	req.Observed.Composite = res(t, strings.NewReplacer("%s", router).Replace(strings.Replace(llmdDeployment, "replicas: %s", "replicas: "+replicas, 1)))
	return req
}

func runLLMD(t *testing.T, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, map[string]any) {
	t.Helper()
	rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
	require.NoError(t, err)
	return rsp, rsp.GetDesired().GetComposite().GetResource().AsMap()["status"].(map[string]any)
}

func TestLLMDRouterReady(t *testing.T) {
	cases := []struct {
		rule         string
		router       string
		observed     string
		status       fnv1.Status
		reason       string
		wantEndpoint bool
	}{
		{rule: "NotDeployed before Crossplane observes the router Deployment",
			status: fnv1.Status_STATUS_CONDITION_UNKNOWN, reason: "NotDeployed"},
		{rule: "NoReadyReplicas while no router Pod is ready, and no endpoint",
			observed: `{apiVersion: apps/v1, kind: Deployment, status: {replicas: 1, availableReplicas: 0}}`,
			status:   fnv1.Status_STATUS_CONDITION_FALSE, reason: "NoReadyReplicas"},
		{rule: "Ready once a router Pod is ready, and the endpoint is the router's",
			observed: `{apiVersion: apps/v1, kind: Deployment, status: {replicas: 2, readyReplicas: 1}}`,
			status:   fnv1.Status_STATUS_CONDITION_TRUE, reason: "Ready", wantEndpoint: true},
		{rule: "RenderFailed when the router's objects do not render",
			router: ", extraArgs: []", observed: `{apiVersion: apps/v1, kind: Deployment, status: {readyReplicas: 1}}`,
			status: fnv1.Status_STATUS_CONDITION_FALSE, reason: "RenderFailed"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			req := llmdRequest(t, tc.router, "2", tc.observed)
			if tc.reason == "RenderFailed" {
				req.Observed.Composite = res(t, strings.Replace(llmdRequestManifest(tc.router), "size: 1, instanceType: a10g}", "size: 1, instanceType: a10g}\n  - {name: other, kind: Server, replicas: 1, size: 1, instanceType: a10g, ports: [{port: 9000}]}", 1))
				req.Desired.Resources["role-other"] = res(t, desiredRole)
				req.Desired.Resources["service-other"] = res(t, `{apiVersion: v1, kind: Service, metadata: {name: chat-other}, spec: {ports: [{name: http, port: 9000}]}}`)
			}
			rsp, status := runLLMD(t, req)
			c := condition(rsp, "RouterReady")
			require.NotNil(t, c)
			assert.Equal(t, tc.status, c.GetStatus())
			assert.Equal(t, tc.reason, c.GetReason())
			if tc.wantEndpoint {
				assert.Equal(t, "http://chat-router.team-a.svc:8081", status["endpoint"])
			} else {
				assert.NotContains(t, status, "endpoint")
			}
			if tc.reason == "RenderFailed" {
				require.Len(t, rsp.GetResults(), 1, "the render still fails")
				assert.Contains(t, c.GetMessage(), "a router needs every role on one serving port")
				return
			}
			router := status["router"].(map[string]any)
			assert.Equal(t, "llm-d-router", router["name"])
			assert.Equal(t, map[string]any{"port": float64(8000), "queuedRequests": "sglang:num_queue_reqs",
				"runningRequests": "sglang:num_running_reqs", "kvCacheUtilization": "sglang:token_usage"}, router["metrics"])
		})
	}
	t.Run("NotApplicable without a router", func(t *testing.T) {
		rsp, status := runLLMD(t, func() *fnv1.RunFunctionRequest {
			req := routerRequest(t, "")
			req.Observed.Composite = res(t, strings.Replace(routedDeployment, "  router: {name: sglang-gateway}\n", "", 1))
			return req
		}())
		assert.Equal(t, "NotApplicable", condition(rsp, "RouterReady").GetReason())
		assert.NotContains(t, status, "router")
	})
}

func llmdRequestManifest(router string) string {
	return strings.Replace(strings.Replace(llmdDeployment, "replicas: %s", "replicas: 2", 1), "%s", router, 1)
}

// routerObjects renders the deployment and returns the router objects it composes, by resource name.
func routerObjects(t *testing.T, router, replicas string) map[string]map[string]any {
	rsp, _ := runLLMD(t, llmdRequest(t, router, replicas, ""))
	out := map[string]map[string]any{}
	for name, r := range rsp.GetDesired().GetResources() {
		if strings.HasPrefix(name, "router-") {
			out[name] = r.GetResource().AsMap()
		}
	}
	return out
}

func configHash(t *testing.T, objs map[string]map[string]any) string {
	t.Helper()
	tpl := objs["router-deployment"]["spec"].(map[string]any)["template"].(map[string]any)
	return tpl["metadata"].(map[string]any)["annotations"].(map[string]any)["modeldeployment.gpustack.ai/router-config-hash"].(string)
}

func TestLLMDRouterObjects(t *testing.T) {
	base := routerObjects(t, "", "2")
	t.Run("the six objects, each named <md>-router", func(t *testing.T) {
		for _, name := range []string{"router-configmap", "router-deployment", "router-service", "router-serviceaccount", "router-role", "router-rolebinding"} {
			require.Contains(t, base, name)
			assert.Equal(t, "chat-router", base[name]["metadata"].(map[string]any)["name"])
		}
	})
	t.Run("the ConfigMap's keys", func(t *testing.T) {
		data := base["router-configmap"]["data"].(map[string]any)
		assert.ElementsMatch(t, []string{"epp.yaml", "envoy.yaml", "endpoint-selector", "endpoint-target-ports", "extra-args.json"}, keys(data))
		assert.Equal(t, "8000", data["endpoint-target-ports"])
		assert.Equal(t, "null", data["extra-args.json"], "Go's JSON of an unset extraArgs")
		assert.Equal(t, "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=chat,modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router", data["endpoint-selector"])
	})
	t.Run("envoy then epp, the owned flags before the user's", func(t *testing.T) {
		objs := routerObjects(t, `, extraArgs: ["--v=4"]`, "2")
		containers := objs["router-deployment"]["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)
		require.Len(t, containers, 2)
		assert.Equal(t, "envoy", containers[0].(map[string]any)["name"])
		assert.Equal(t, []any{"-c", "/config/envoy.yaml"}, containers[0].(map[string]any)["args"])
		epp := containers[1].(map[string]any)
		assert.Equal(t, "epp", epp["name"])
		assert.Equal(t, []any{"--endpoint-selector=$(ENDPOINT_SELECTOR)", "--endpoint-target-ports=$(ENDPOINT_TARGET_PORTS)",
			"--config-file=/config/epp.yaml", "--secure-serving=false", "--grpc-health-port=9003", "--metrics-endpoint-auth=false", "--v=4"}, epp["args"])
	})
	t.Run("a replica-count change never rolls the router", func(t *testing.T) {
		assert.Equal(t, configHash(t, base), configHash(t, routerObjects(t, "", "5")))
		assert.Equal(t, configHash(t, base), configHash(t, routerObjects(t, ", replicas: 3", "2")), "nor does the router's own")
	})
	t.Run("an extraArgs edit rolls the router", func(t *testing.T) {
		assert.NotEqual(t, configHash(t, base), configHash(t, routerObjects(t, `, extraArgs: ["--v=4"]`, "2")))
	})
	t.Run("a timeout edit rolls the router", func(t *testing.T) {
		assert.NotEqual(t, configHash(t, base), configHash(t, routerObjects(t, ", requestTimeoutSeconds: 60", "2")))
	})
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
