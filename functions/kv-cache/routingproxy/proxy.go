package routingproxy

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The routing proxy llm-d-router puts in front of every decode replica: it owns the role's serving
// port and forwards to the engine on an internal one.
const (
	Container = "routing-proxy"
	Image     = "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0"
)

// Apply adds the routing proxy to a decoder's template, a native sidecar listening on the role's
// serving port and forwarding to the engine's internal port. render-roles has already put the
// engine, its probes and its scrape port there; both read the ports from apis/engine.
func Apply(t *corev1.PodTemplateSpec, e workerv1.Engine, role workerv1.ModelDeploymentRole) {
	serving, internal := engine.ProxyPorts(role)
	args := []string{"--port=" + strconv.Itoa(int(serving)), "--model-server-port=" + strconv.Itoa(int(internal))}
	env := []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	switch e {
	case workerv1.EngineSGLang:
		args = append(args, "--kv-connector=sglang")
		env = append(env, corev1.EnvVar{Name: "SGLANG_BOOTSTRAP_PORT", Value: strconv.Itoa(engine.BootstrapPort)})
	default:
		args = append(args, "--kv-connector=mooncake", "--mooncake-bootstrap-port="+strconv.Itoa(engine.BootstrapPort))
	}
	// The proxy serves plain HTTP (--secure-proxy=false), whatever the engine behind it speaks.
	args = append(args, "--secure-proxy=false")
	if engine.HasFlag(role.EngineArgs(), "--ssl-certfile", "--ssl-keyfile") {
		args = append(args, "--enable-tls=decoder", "--tls-insecure-skip-verify=decoder")
	}
	t.Spec.InitContainers = append(t.Spec.InitContainers, corev1.Container{
		Name:            Container,
		Image:           Image,
		ImagePullPolicy: corev1.PullIfNotPresent,
		// A native sidecar: it starts before the engine and runs beside it for the Pod's lifetime.
		RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
		Args:          args,
		Env:           env,
		Ports:         []corev1.ContainerPort{{Name: "http", ContainerPort: serving, Protocol: corev1.ProtocolTCP}},
		SecurityContext: &corev1.SecurityContext{
			AllowPrivilegeEscalation: ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
		},
	})
}
