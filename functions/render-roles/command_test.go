package renderroles_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// renderOn renders one role on an engine and returns its main container and what Services read.
func renderOn(t *testing.T, e workerv1.Engine, router *workerv1.ModelDeploymentRouter, role workerv1.ModelDeploymentRole) (corev1.Container, *renderroles.RenderedRole) {
	t.Helper()
	s := spec(role)
	s.Engine.Name, s.Router = e, router
	rendered, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: s, Role: role, InstanceType: h100()})
	require.NoError(t, err)
	return rendered.Template.Spec.Containers[0], rendered
}

// TestEngineCommandLine: what mdplane fills on the engine's line, in which order, and what the flags
// the user passes, in any spelling the engine accepts, change about ports, probes and TLS.
func TestEngineCommandLine(t *testing.T) {
	vllm, sglang := workerv1.EngineVLLM, workerv1.EngineSGLang
	llmd := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	server, decode := serverRole, decodeRole
	cases := []struct {
		rule   string
		engine workerv1.Engine
		router *workerv1.ModelDeploymentRouter
		role   workerv1.ModelDeploymentRole
		args   []string
		target int32
		probed bool
		scheme corev1.URIScheme
	}{
		{"argument order: --served-model-name before the user's extraArgs, --host and --port after", vllm, nil, server("--max-model-len", "8192"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--max-model-len", "8192", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTP},
		{"argument order: the user's own --served-model-name, in an abbreviation, is not filled", vllm, nil, server("--served-model=qwen"),
			[]string{"--served-model=qwen", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTP},

		{"an abbreviated --port is the engine's own: nothing filled, the container side follows it", vllm, nil, server("--por", "9200"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--por", "9200", "--host", "0.0.0.0"}, 9200, true, corev1.URISchemeHTTP},
		{"near miss: an ambiguous prefix (--p) is no --port, so mdplane fills its own", vllm, nil, server("--p", "9200"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--p", "9200", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTP},
		{"a direct decoder's own --port stays behind the proxy: the serving port is the proxy's", vllm, llmd, decode("--por=9200"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--por=9200", "--host", "0.0.0.0"}, 8000, true, corev1.URISchemeHTTP},

		{"an SGLang role passing its own --host gets no probes", sglang, nil, server("--host", "127.0.0.1"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--host", "127.0.0.1", "--port", "8000"}, 8000, false, corev1.URISchemeHTTP},
		{"an SGLang role passing its own --host as --ho gets no probes", sglang, nil, server("--ho=127.0.0.1"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--ho=127.0.0.1", "--port", "8000"}, 8000, false, corev1.URISchemeHTTP},
		{"near miss: SGLang's ambiguous --h is no --host, so the filled one is probed", sglang, nil, server("--h", "127.0.0.1"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--h", "127.0.0.1", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTP},

		{"SGLang does not accept --ssl_certfile: no TLS", sglang, nil, server("--ssl_certfile", "/tls.crt"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--ssl_certfile", "/tls.crt", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTP},
		{"near miss: SGLang's --ssl-certfile is TLS", sglang, nil, server("--ssl-certfile", "/tls.crt"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--ssl-certfile", "/tls.crt", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTPS},
		{"near miss: vLLM reads --ssl_certfile as --ssl-certfile: TLS", vllm, nil, server("--ssl_certfile", "/tls.crt"),
			[]string{"--served-model-name", "Qwen/Qwen3-32B", "--ssl_certfile", "/tls.crt", "--host", "0.0.0.0", "--port", "8000"}, 8000, true, corev1.URISchemeHTTPS},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			main, rendered := renderOn(t, tc.engine, tc.router, tc.role)
			assert.Equal(t, tc.args, main.Args)
			assert.Equal(t, tc.target, rendered.TargetPort)
			assert.Equal(t, tc.target, main.Ports[0].ContainerPort)
			assert.EqualValues(t, 8000, rendered.ServicePort)
			assert.Equal(t, tc.probed, main.ReadinessProbe != nil, "probes")
			assert.Equal(t, strings.ToLower(string(tc.scheme)), rendered.Scheme)
			if tc.probed {
				assert.Equal(t, tc.scheme, main.ReadinessProbe.HTTPGet.Scheme)
				assert.Equal(t, tc.target, main.ReadinessProbe.HTTPGet.Port.IntVal)
			}
		})
	}
}
