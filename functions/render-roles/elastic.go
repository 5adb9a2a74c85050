package renderroles

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Elastic EP (elastic-dp-lifecycle.md §1.2–1.5, model-deployment.md's variant). The elastic role is
// rendered as an ordinary role of width replicas of size 1; the master (ordinal 0) and the workers
// differ by ordinal, so that difference is applied as each replica is materialized
// (elasticMember). The Ray head is a role of its own, <md>-elastic-head, a take-over command on
// the CPU-only headInstanceType.

// The variables the elastic renderer writes.
const (
	EnvElasticPodUID       = "GPUSTACK_ELASTIC_POD_UID"
	EnvElasticPodIP        = "GPUSTACK_ELASTIC_POD_IP"
	EnvRayAddress          = "RAY_ADDRESS"
	EnvVLLMRayPackStrategy = "VLLM_RAY_DP_PACK_STRATEGY"
)

// AnnotationElasticBootWidth is the data-parallel size a master booted with.
const AnnotationElasticBootWidth = "worker.gpustack.ai/elastic-boot-width"

// ElasticHeadCommand is the Ray head's command, exactly (§1.3).
var ElasticHeadCommand = []string{"/bin/sh", "-ec", `ray start --head --include-dashboard=true --num-gpus=0 --port=6379 --dashboard-host=0.0.0.0 --labels=gpustack-pod-uid="$GPUSTACK_ELASTIC_POD_UID" --block`}

// rayLogEnv are the Ray logging variables the head copies from the role; the first three are
// defaulted on the members when the role does not set them (§1.4).
var (
	rayLogEnv      = []string{"RAY_LOG_TO_STDERR", "RAY_LOGGER_LEVEL", "RAY_BACKEND_LOG_LEVEL", "RAY_DEDUP_LOGS"}
	rayLogDefaults = []workerv1.ModelDeploymentEnvVar{
		{Name: "RAY_LOG_TO_STDERR", Value: "1"}, {Name: "RAY_LOGGER_LEVEL", Value: "info"}, {Name: "RAY_BACKEND_LOG_LEVEL", Value: "info"},
	}
)

// elasticServe is the master's $0 in its shell wrapper.
const elasticServe = "elastic-serve"

// elasticMembersRole is the elastic role as the ordinary renderer renders it: width replicas of one
// Pod each, with the Ray logging defaults the role does not set itself. Width plays the part of
// replicas, so it is not in the configuration digest (configDigest).
func elasticMembersRole(role workerv1.ModelDeploymentRole) workerv1.ModelDeploymentRole {
	role = role.WithDefaults()
	role.Replicas, role.Size = role.ElasticEP.Width, 1
	role.Env = append([]workerv1.ModelDeploymentEnvVar(nil), role.Env...)
	for _, e := range rayLogDefaults {
		if !userSets(role.Env, e.Name) {
			role.Env = append(role.Env, e)
		}
	}
	return role
}

// elasticMembersEnv is what every member's main container is given after ordinary rendering.
func elasticMembersEnv(headAddress string) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: EnvElasticPodUID, ValueFrom: fieldRef("metadata.uid")},
		{Name: EnvRayAddress, Value: headAddress},
		{Name: EnvElasticPodIP, ValueFrom: fieldRef("status.podIP")},
		{Name: EnvVLLMRayPackStrategy, Value: "strict"},
	}
}

func fieldRef(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

// amendElasticMembers gives the members' template the elastic environment and marks the role.
func amendElasticMembers(r *RenderedRole, namespace, deployment string) {
	r.Elastic = &v1alpha1.ElasticRole{Part: v1alpha1.ElasticMembers, HeadAddress: naming.ElasticHeadAddress(deployment, namespace)}
	if c := mainOf(&r.Template.Spec); c != nil {
		c.Env = append(c.Env, elasticMembersEnv(r.Elastic.HeadAddress)...)
	}
}

// elasticHeadRole is the Ray head as a role: one take-over Pod on the head type, with the role's
// image, pull policy and secrets, volumes, /dev/shm and grace, and only its Ray logging variables.
func elasticHeadRole(spec *workerv1.ModelDeploymentSpec, deployment string, role workerv1.ModelDeploymentRole) workerv1.ModelDeploymentRole {
	image := role.Image
	if image == "" {
		image = spec.Engine.Image
	}
	head := workerv1.ModelDeploymentRole{
		Name: naming.ElasticHeadName(deployment), Kind: workerv1.RoleKindServer, Replicas: 1, Size: 1,
		InstanceType: role.ElasticEP.HeadInstanceType, Command: ElasticHeadCommand,
		Image: image, ImagePullPolicy: role.ImagePullPolicy, ImagePullSecrets: role.ImagePullSecrets,
		// The grace as its role's configuration records it: the role's default written out is the
		// default left unwritten, so restating it restarts no head either.
		AdditionalVolumes: role.AdditionalVolumes, ShmSize: role.ShmSize, TerminationGracePeriodSeconds: configuredGrace(role),
		Ports: []workerv1.ModelDeploymentPort{
			{Port: naming.ElasticHeadPort, Protocol: corev1.ProtocolTCP}, {Port: naming.ElasticDashboardPort, Protocol: corev1.ProtocolTCP},
		},
	}
	for _, e := range role.Env {
		for _, name := range rayLogEnv {
			if e.Name == name {
				head.Env = append(head.Env, e)
			}
		}
	}
	return head.WithDefaults()
}

// amendElasticHead names the head's ports, gives it its Pod UID and marks the role. The head serves
// no requests, so it carries no role kind a router selects by.
func amendElasticHead(r *RenderedRole) {
	r.Elastic = &v1alpha1.ElasticRole{Part: v1alpha1.ElasticHead}
	delete(r.Template.Labels, workerv1.LabelRoleKind)
	c := mainOf(&r.Template.Spec)
	if c == nil {
		return
	}
	for i := range c.Ports {
		switch c.Ports[i].ContainerPort {
		case naming.ElasticHeadPort:
			c.Ports[i].Name = "gcs"
		case naming.ElasticDashboardPort:
			c.Ports[i].Name = "dashboard"
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: EnvElasticPodUID, ValueFrom: fieldRef("metadata.uid")})
}

// RenderElasticHeadService is the head's Service <md>-elastic-head: the GCS and dashboard ports,
// selecting the head Pod (§1.2).
func RenderElasticHeadService(namespace, deployment string) *corev1.Service {
	head := naming.ElasticHeadName(deployment)
	return &corev1.Service{
		TypeMeta:   typeMeta("v1", "Service"),
		ObjectMeta: objectMeta(namespace, head, naming.DeploymentLabels(deployment)),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{workerv1.LabelInstance: deployment, workerv1.LabelComponent: head},
			Ports: []corev1.ServicePort{
				{Name: "gcs", Protocol: corev1.ProtocolTCP, Port: naming.ElasticHeadPort, TargetPort: intstr.FromInt32(naming.ElasticHeadPort)},
				{Name: "dashboard", Protocol: corev1.ProtocolTCP, Port: naming.ElasticDashboardPort, TargetPort: intstr.FromInt32(naming.ElasticDashboardPort)},
			},
		},
	}
}

// rayJoin is the Ray join fragment a member runs: Ray finds the Pod's GPUs itself (§1.4, newest
// renderer).
func rayJoin(headAddress string) string {
	return fmt.Sprintf(`ray start --node-ip-address="$%s" --address=%s --labels=gpustack-pod-uid="$%s"`, EnvElasticPodIP, headAddress, EnvElasticPodUID)
}

// elasticMember applies what a member's ordinal makes of it: the master (ordinal 0) wraps the
// rendered argv in the Ray join and the data-parallel flags of its boot width and gets the liveness
// probe that accepts a resize in flight; a worker only joins Ray and serves nothing (no probes, no
// preStop hook, no scrape annotations). false holds the
// member: a master without a boot width is not rendered (§1.4).
func elasticMember(pod *corev1.Pod, e *v1alpha1.ElasticRole, ordinal, bootWidth int32) bool {
	c := mainOf(&pod.Spec)
	if c == nil {
		return true
	}
	join := rayJoin(e.HeadAddress)
	hash := pod.Annotations[workerv1.AnnotationPodSpecHash]
	if ordinal > 0 {
		c.Command, c.Args = []string{"/bin/sh", "-ec", join + " --block"}, nil
		c.StartupProbe, c.ReadinessProbe, c.LivenessProbe, c.Lifecycle = nil, nil, nil, nil
		// A worker serves no HTTP: nothing to scrape.
		for _, k := range []string{"prometheus.io/scrape", "prometheus.io/path", "prometheus.io/port", "prometheus.io/scheme"} {
			delete(pod.Annotations, k)
		}
		pod.Annotations[workerv1.AnnotationPodSpecHash] = sha256Hex([]byte(hash + "/elastic-worker"))
		return true
	}
	if bootWidth < 1 {
		return false
	}
	boot := strconv.Itoa(int(bootWidth))
	argv := append(append([]string(nil), c.Command...), c.Args...)
	argv = append(argv, "--data-parallel-backend", "ray", "--data-parallel-size", boot, "--data-parallel-size-local", "1",
		"--enable-expert-parallel", "--enable-eplb", "--enable-elastic-ep")
	script := fmt.Sprintf(`set -e; %s; exec "$@" --data-parallel-address "$%s"`, join, EnvElasticPodIP)
	c.Command, c.Args = append([]string{"/bin/sh", "-c", script, elasticServe}, argv...), nil
	if c.LivenessProbe != nil {
		c.LivenessProbe = masterLiveness(pod.Annotations["prometheus.io/scheme"], pod.Annotations["prometheus.io/port"])
	}
	pod.Annotations[AnnotationElasticBootWidth] = boot
	pod.Annotations[workerv1.AnnotationPodSpecHash] = sha256Hex([]byte(hash + "/elastic-boot-width=" + boot))
	return true
}

// masterLiveness is the master's liveness probe (§1.5): the health route answering 200, or 503 while
// a native resize is in flight, within one second. Readiness is unchanged, so a resizing master
// leaves the Services without being restarted.
func masterLiveness(scheme, port string) *corev1.Probe {
	if scheme == "" {
		scheme = "http"
	}
	if port == "" {
		port = "8000"
	}
	script := strings.Join([]string{
		"import ssl, sys, urllib.error, urllib.request",
		"try:",
		fmt.Sprintf("    code = urllib.request.urlopen(%q, timeout=1, context=ssl._create_unverified_context()).status", scheme+"://127.0.0.1:"+port+healthPath),
		"except urllib.error.HTTPError as e:",
		"    code = e.code",
		"except Exception:",
		"    sys.exit(1)",
		"sys.exit(0 if code in (200, 503) else 1)",
	}, "\n")
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"python3", "-c", script}}},
		PeriodSeconds:    probePeriod,
		TimeoutSeconds:   probeTimeout,
		FailureThreshold: livenessFailures,
	}
}

// mainOf is the engine's container of a Pod spec.
func mainOf(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == naming.MainContainer {
			return &spec.Containers[i]
		}
	}
	return nil
}
