package routingproxy_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routingproxy"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// proxiedDecoder renders a decoder under llm-d-router as the pipeline does: render-roles moves the
// engine behind the proxy's port, then the routing proxy is added in front of it.
func proxiedDecoder(t *testing.T, e workerv1.Engine, args []string, ports ...int32) *corev1.PodTemplateSpec {
	t.Helper()
	role := workerv1.ModelDeploymentRole{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: "h100", ExtraArgs: args}
	for _, p := range ports {
		role.Ports = append(role.Ports, workerv1.ModelDeploymentPort{Port: p})
	}
	spec := &workerv1.ModelDeploymentSpec{
		Model:  workerv1.ModelDeploymentModel{Name: "Qwen/Qwen3-32B"},
		Engine: workerv1.ModelDeploymentEngine{Name: e, Image: "engine:v1"},
		Router: &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD},
		Roles:  []workerv1.ModelDeploymentRole{role},
	}
	it := &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec:   workerv1.InstanceTypeSpec{Acceleratable: true, UnitResources: workerv1.InstanceTypeUnitResources{CPU: "24", RAM: "224Gi"}},
		Status: workerv1.InstanceTypeStatus{Entrance: "gpustack-fnv64-0123456789abcdef", Detail: &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"}}}
	rendered, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "chat", Spec: spec, Role: role, InstanceType: it})
	require.NoError(t, err)
	tmpl := rendered.Template
	routingproxy.Apply(&tmpl, e, role)
	return &tmpl
}

// portArg is the --port the engine is given, in either spelling.
func portArg(args []string) []string {
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			return args[i : i+2]
		}
		if strings.HasPrefix(a, "--port=") {
			return args[i : i+1]
		}
	}
	return nil
}

func TestRoutingProxy(t *testing.T) {
	t.Run("the proxy owns the serving port and the engine moves to 8200", func(t *testing.T) {
		tmpl := proxiedDecoder(t, workerv1.EngineVLLM, []string{"--port", "8000"})
		require.Len(t, tmpl.Spec.InitContainers, 1)
		proxy := tmpl.Spec.InitContainers[0]
		assert.Equal(t, "routing-proxy", proxy.Name)
		assert.Equal(t, corev1.ContainerRestartPolicyAlways, *proxy.RestartPolicy, "a native sidecar")
		assert.Equal(t, []string{"--port=8000", "--model-server-port=8200", "--kv-connector=mooncake", "--mooncake-bootstrap-port=8998", "--secure-proxy=false"}, proxy.Args)
		main := tmpl.Spec.Containers[0]
		assert.Equal(t, []string{"--port", "8200"}, portArg(main.Args))
		assert.Equal(t, corev1.ContainerPort{Name: "model-server", ContainerPort: 8200, Protocol: corev1.ProtocolTCP}, main.Ports[0])
		assert.Equal(t, "/v1/models", main.ReadinessProbe.HTTPGet.Path, "Ready only when the proxy reaches the engine")
		assert.Equal(t, intstr.FromInt32(8000), main.ReadinessProbe.HTTPGet.Port)
		assert.Equal(t, "8200", tmpl.Annotations["prometheus.io/port"], "metrics are scraped from the engine itself")
	})
	t.Run("the internal port is bumped past every declared port", func(t *testing.T) {
		tmpl := proxiedDecoder(t, workerv1.EngineVLLM, []string{"--port=9000"}, 9000, 8200, 8201)
		assert.Equal(t, []string{"--port=8202"}, portArg(tmpl.Spec.Containers[0].Args), "the user's own --port is the proxy's")
		assert.Contains(t, tmpl.Spec.InitContainers[0].Args, "--port=9000")
	})
	t.Run("a TLS engine is reached over TLS; the proxy itself serves plain HTTP", func(t *testing.T) {
		tmpl := proxiedDecoder(t, workerv1.EngineVLLM, []string{"--ssl-certfile", "/etc/tls/tls.crt", "--port", "8000"})
		args := tmpl.Spec.InitContainers[0].Args
		assert.Equal(t, []string{"--secure-proxy=false", "--enable-tls=decoder", "--tls-insecure-skip-verify=decoder"}, args[len(args)-3:])
		assert.Equal(t, corev1.URISchemeHTTP, tmpl.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme)
	})
	t.Run("SGLang decoders use the sglang connector and are told the bootstrap port", func(t *testing.T) {
		tmpl := proxiedDecoder(t, workerv1.EngineSGLang, nil)
		proxy := tmpl.Spec.InitContainers[0]
		assert.Contains(t, proxy.Args, "--kv-connector=sglang")
		assert.Contains(t, proxy.Env, corev1.EnvVar{Name: "SGLANG_BOOTSTRAP_PORT", Value: "8998"})
	})
}
