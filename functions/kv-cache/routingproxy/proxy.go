package routingproxy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The routing proxy llm-d-router puts in front of every decode replica: it owns the role's serving
// port and forwards to the engine on an internal one.
const (
	Container           = "routing-proxy"
	modelServerPortName = "model-server"
	decoderProbePath    = "/v1/models"
)

// Apply moves the engine of a decoder's template behind the routing proxy: the proxy, a
// native sidecar, listens on the serving port; the engine on its own --port when the role passes one
// (user arguments are appended, never merged), else on an internal port past every declared one; the
// probes stay on the serving port and ask for /v1/models, so a decoder is Ready only when the proxy
// reaches its engine. An engine port another listener of the Pod takes cannot be rendered.
// manufacturer is the role's InstanceType's: vLLM on ascend is vLLM-Ascend, whose pair the proxy
// drives with its nixlv2 protocol. image is the sidecar's: the Setting
// model-deployment-routing-sidecar-image through the registry redirect (settings.RoutingSidecarImageRef).
func Apply(t *corev1.PodTemplateSpec, e workerv1.Engine, manufacturer string, role workerv1.ModelDeploymentRole, image string) error {
	var main *corev1.Container
	for i := range t.Spec.Containers {
		if t.Spec.Containers[i].Name == naming.MainContainer {
			main = &t.Spec.Containers[i]
		}
	}
	if main == nil || len(main.Ports) == 0 {
		return nil
	}
	serving := main.Ports[0].ContainerPort
	declared := make([]int32, len(main.Ports))
	for i, p := range main.Ports {
		declared[i] = p.ContainerPort
	}
	internal, own := engine.ListenerBehindProxy(e, role, declared)
	if own && slices.Contains(declared, internal) {
		return fmt.Errorf("role %q: its --port %d is a port the routing proxy or a declared container port takes (%v); pass another --port, or none and mdplane puts the engine on %d",
			role.Name, internal, declared, engine.PortBehindProxy(declared))
	}
	main.Ports[0].Name, main.Ports[0].ContainerPort = modelServerPortName, internal
	if !own {
		main.Args = withPort(main.Args, internal) // the --port render-roles filled
	}
	// The proxy serves plain HTTP (--secure-proxy=false), whatever the engine behind it speaks.
	for _, probe := range []*corev1.Probe{main.StartupProbe, main.ReadinessProbe, main.LivenessProbe} {
		if probe != nil && probe.HTTPGet != nil {
			probe.HTTPGet.Path, probe.HTTPGet.Port, probe.HTTPGet.Scheme = decoderProbePath, intstr.FromInt32(serving), corev1.URISchemeHTTP
		}
	}
	engineTLS := engine.HasFlag(e, role.EngineArgs(), "--ssl-certfile", "--ssl-keyfile")
	if _, scraped := t.Annotations[workerv1.AnnotationScrapePort]; scraped {
		t.Annotations[workerv1.AnnotationScrapePort] = strconv.Itoa(int(internal))
	}

	args := []string{"--port=" + strconv.Itoa(int(serving)), "--model-server-port=" + strconv.Itoa(int(internal))}
	env := []corev1.EnvVar{{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	switch engine.ClientEngineOf(e, manufacturer) {
	case engine.ClientSGLang:
		args = append(args, "--kv-connector=sglang")
		env = append(env, corev1.EnvVar{Name: "SGLANG_BOOTSTRAP_PORT", Value: strconv.Itoa(engine.BootstrapPort)})
	case engine.ClientVLLMAscend:
		// MooncakeConnectorV1 takes its bootstrap port from its own kv_port: no mooncake flags.
		args = append(args, "--kv-connector=nixlv2")
	default:
		args = append(args, "--kv-connector=mooncake", "--mooncake-bootstrap-port="+strconv.Itoa(engine.BootstrapPort))
	}
	args = append(args, "--secure-proxy=false")
	if engineTLS {
		args = append(args, "--enable-tls=decoder", "--tls-insecure-skip-verify=decoder")
	}
	t.Spec.InitContainers = append(t.Spec.InitContainers, corev1.Container{
		Name:            Container,
		Image:           image,
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
	return nil
}

// withPort points the --port render-roles filled at port: the proxy owns the serving port. It is
// called only when the role passes no --port of its own, so the filled one is the only one.
func withPort(args []string, port int32) []string {
	out := make([]string, 0, len(args))
	value := strconv.Itoa(int(port))
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == "--port" && i+1 < len(args):
			out = append(out, "--port", value)
			i++
		case strings.HasPrefix(args[i], "--port="):
			out = append(out, "--port="+value)
		default:
			out = append(out, args[i])
		}
	}
	return out
}
