package routingproxy_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	"github.com/mdplane/mdplane/functions/kv-cache/routingproxy"
)

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

	t.Run("the proxy owns the serving port and the engine moves to 8200", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--port", "8000"}, 8000)
		routingproxy.Apply(tmpl, llmd.Engine)
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
		routingproxy.Apply(tmpl, llmd.Engine)
		assert.Equal(t, []string{"--port=8202"}, tmpl.Spec.Containers[0].Args, "the user's own --port is the proxy's")
		assert.Contains(t, tmpl.Spec.InitContainers[0].Args, "--port=9000")
	})
	t.Run("a TLS engine is reached over TLS; the proxy itself serves plain HTTP", func(t *testing.T) {
		tmpl := decoderTemplate([]string{"--ssl-certfile", "/etc/tls/tls.crt", "--port", "8000"}, 8000)
		tmpl.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme = corev1.URISchemeHTTPS
		routingproxy.Apply(tmpl, llmd.Engine)
		args := tmpl.Spec.InitContainers[0].Args
		assert.Equal(t, []string{"--secure-proxy=false", "--enable-tls=decoder", "--tls-insecure-skip-verify=decoder"}, args[len(args)-3:])
		assert.Equal(t, corev1.URISchemeHTTP, tmpl.Spec.Containers[0].ReadinessProbe.HTTPGet.Scheme)
	})
	t.Run("SGLang decoders use the sglang connector and are told the bootstrap port", func(t *testing.T) {
		sg := llmd
		sg.Engine = workerv1.EngineSGLang
		tmpl := decoderTemplate(nil, 8000)
		routingproxy.Apply(tmpl, sg.Engine)
		proxy := tmpl.Spec.InitContainers[0]
		assert.Contains(t, proxy.Args, "--kv-connector=sglang")
		assert.Contains(t, proxy.Env, corev1.EnvVar{Name: "SGLANG_BOOTSTRAP_PORT", Value: "8998"})
	})
}
