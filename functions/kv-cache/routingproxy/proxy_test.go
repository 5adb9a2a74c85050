package routingproxy_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	"github.com/mdplane/mdplane/functions/kv-cache/routingproxy"
)

// sidecarImage stands for the Setting's image, which Apply takes as given.
const sidecarImage = "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0"

func decoderTemplate(args []string, ports ...int32) *corev1.PodTemplateSpec {
	c := corev1.Container{Name: "main", Args: args,
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(ports[0])}}}}
	for _, p := range ports {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "http", ContainerPort: p})
	}
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
}

func TestRoutingProxy(t *testing.T) {
	llmd := kvcache.Deployment{Engine: workerv1.EngineVLLM, Router: &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}}

	decode := workerv1.ModelDeploymentRole{Name: "decode", Kind: workerv1.RoleKindDecode}
	passing := func(args ...string) workerv1.ModelDeploymentRole {
		r := decode
		r.ExtraArgs = args
		return r
	}

	t.Run("the proxy owns the serving port and the engine moves to 8200", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--port", "8000"}, 8000) // the --port render-roles filled
		require.NoError(t, routingproxy.Apply(tmpl, llmd.Engine, "", decode, sidecarImage))
		require.Len(t, tmpl.Spec.InitContainers, 1)
		proxy := tmpl.Spec.InitContainers[0]
		assert.Equal(t, "routing-proxy", proxy.Name)
		assert.Equal(t, corev1.ContainerRestartPolicyAlways, *proxy.RestartPolicy, "a native sidecar")
		assert.Equal(t, []string{"--port=8000", "--model-server-port=8200", "--kv-connector=mooncake", "--mooncake-bootstrap-port=8998", "--secure-proxy=false"}, proxy.Args)
		main := tmpl.Spec.Containers[0]
		assert.Equal(t, []string{"--port", "8200"}, main.Args)
		assert.Equal(t, corev1.ContainerPort{Name: "model-server", ContainerPort: 8200}, main.Ports[0])
		assert.Equal(t, "/v1/models", main.ReadinessProbe.HTTPGet.Path, "Ready only when the proxy reaches the engine")
		assert.Equal(t, intstr.FromInt32(8000), main.ReadinessProbe.HTTPGet.Port)
	})
	t.Run("the internal port is bumped past every declared port", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--port=9000"}, 9000, 8200, 8201)
		require.NoError(t, routingproxy.Apply(tmpl, llmd.Engine, "", decode, sidecarImage))
		assert.Equal(t, []string{"--port=8202"}, tmpl.Spec.Containers[0].Args)
		assert.Contains(t, tmpl.Spec.InitContainers[0].Args, "--port=9000")
	})
	for _, args := range [][]string{{"--port=9100"}, {"--por", "9100"}} {
		t.Run("user arguments are appended, never merged: the proxy forwards to the decoder's own "+args[0], func(t *testing.T) {
			own := append(append([]string(nil), args...), "--host", "0.0.0.0")
			tmpl := decoderTemplate(own, 8000)
			require.NoError(t, routingproxy.Apply(tmpl, llmd.Engine, "", passing(args...), sidecarImage))
			assert.Equal(t, own, tmpl.Spec.Containers[0].Args, "the engine keeps its own --port")
			assert.Equal(t, corev1.ContainerPort{Name: "model-server", ContainerPort: 9100}, tmpl.Spec.Containers[0].Ports[0])
			assert.Equal(t, []string{"--port=8000", "--model-server-port=9100"}, tmpl.Spec.InitContainers[0].Args[:2])
		})
	}
	t.Run("near miss: an ambiguous prefix is no --port of its own, so the filled one moves to 8200", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--p", "9100", "--port", "8000"}, 8000)
		require.NoError(t, routingproxy.Apply(tmpl, llmd.Engine, "", passing("--p", "9100"), sidecarImage))
		assert.Equal(t, []string{"--p", "9100", "--port", "8200"}, tmpl.Spec.Containers[0].Args)
		assert.Contains(t, tmpl.Spec.InitContainers[0].Args, "--model-server-port=8200")
	})
	t.Run("an own --port the proxy takes cannot be rendered", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--port=8000"}, 8000)
		err := routingproxy.Apply(tmpl, llmd.Engine, "", passing("--port=8000"), sidecarImage)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--port 8000")
		assert.Empty(t, tmpl.Spec.InitContainers)
	})
	t.Run("a TLS engine is reached over TLS; the proxy itself serves plain HTTP", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--ssl-certfile", "/etc/tls/tls.crt", "--port", "8000"}, 8000)
		tmpl.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTPS
		require.NoError(t, routingproxy.Apply(tmpl, llmd.Engine, "", passing("--ssl-certfile", "/etc/tls/tls.crt"), sidecarImage))
		args := tmpl.Spec.InitContainers[0].Args
		assert.Equal(t, []string{"--secure-proxy=false", "--enable-tls=decoder", "--tls-insecure-skip-verify=decoder"}, args[len(args)-3:])
		assert.Equal(t, corev1.URISchemeHTTP, tmpl.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme)
	})
	t.Run("SGLang decoders use the sglang connector and are told the bootstrap port", func(t *testing.T) {
		sg := llmd
		sg.Engine = workerv1.EngineSGLang
		tmpl := decoderTemplate(nil, 8000)
		require.NoError(t, routingproxy.Apply(tmpl, sg.Engine, "", decode, sidecarImage))
		proxy := tmpl.Spec.InitContainers[0]
		assert.Contains(t, proxy.Args, "--kv-connector=sglang")
		assert.Contains(t, proxy.Env, corev1.EnvVar{Name: "SGLANG_BOOTSTRAP_PORT", Value: "8998"})
	})
	t.Run("connector by engine build", func(t *testing.T) {
		for _, tc := range []struct {
			rule         string
			e            workerv1.Engine
			manufacturer string
			want         []string
		}{
			{"native vLLM: the mooncake connector on the bootstrap port", workerv1.EngineVLLM, "nvidia",
				[]string{"--kv-connector=mooncake", "--mooncake-bootstrap-port=8998"}},
			{"vLLM-Ascend: nixlv2 and no mooncake flags", workerv1.EngineVLLM, "ascend", []string{"--kv-connector=nixlv2"}},
			{"near miss: SGLang on ascend is no vLLM-Ascend", workerv1.EngineSGLang, "ascend", []string{"--kv-connector=sglang"}},
		} {
			t.Run(tc.rule, func(t *testing.T) {
				tmpl := decoderTemplate(nil, 8000)
				require.NoError(t, routingproxy.Apply(tmpl, tc.e, tc.manufacturer, decode, sidecarImage))
				args := tmpl.Spec.InitContainers[0].Args
				assert.Equal(t, tc.want, args[2:len(args)-1], "between the ports and --secure-proxy")
			})
		}
	})
	t.Run("SGLang: --ssl_certfile is no spelling SGLang accepts, so the engine is not reached over TLS", func(t *testing.T) {
		for _, tc := range []struct {
			arg string
			tls bool
		}{{"--ssl_certfile", false}, {"--ssl-certfile", true}, {"--ssl-cert", true}} {
			tmpl := decoderTemplate([]string{tc.arg, "/etc/tls/tls.crt", "--port", "8000"}, 8000)
			require.NoError(t, routingproxy.Apply(tmpl, workerv1.EngineSGLang, "", passing(tc.arg, "/etc/tls/tls.crt"), sidecarImage))
			assert.Equal(t, tc.tls, slices.Contains(tmpl.Spec.InitContainers[0].Args, "--enable-tls=decoder"), tc.arg)
		}
	})
}
