package renderroles

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// Elastic EP, in the API's variant (a head of its own InstanceType). The elastic role is
// rendered as an ordinary role of width replicas of size 1; the master (ordinal 0) and the workers
// differ by ordinal, so that difference is applied as each replica is materialized
// (elasticMember). The Ray head is a role of its own, <md>-elastic-head, a take-over command on
// the CPU-only headInstanceType.

// The variables the elastic renderer writes.
const (
	EnvRayAddress          = "RAY_ADDRESS"
	EnvVLLMRayPackStrategy = "VLLM_RAY_DP_PACK_STRATEGY"
)

// rayLogEnv are the Ray logging variables the head copies from the role; the first three are
// defaulted on the members when the role does not set them.
var (
	rayLogEnv      = []string{"RAY_LOG_TO_STDERR", "RAY_LOGGER_LEVEL", "RAY_BACKEND_LOG_LEVEL", "RAY_DEDUP_LOGS"}
	rayLogDefaults = []workerv1.ModelDeploymentEnvVar{
		{Name: "RAY_LOG_TO_STDERR", Value: "1"}, {Name: "RAY_LOGGER_LEVEL", Value: "info"}, {Name: "RAY_BACKEND_LOG_LEVEL", Value: "info"},
	}
)

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
		{Name: engine.EnvElasticPodUID, ValueFrom: fieldRef("metadata.uid")},
		{Name: EnvRayAddress, Value: headAddress},
		{Name: engine.EnvElasticPodIP, ValueFrom: fieldRef("status.podIP")},
		{Name: EnvVLLMRayPackStrategy, Value: "strict"},
	}
}

func fieldRef(path string) *corev1.EnvVarSource {
	return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
}

// amendElasticMembers gives the members' template the elastic environment and marks the role.
func amendElasticMembers(r *RenderedRole, namespace, deployment string) {
	r.Elastic = &v1alpha1.ElasticRole{Part: v1alpha1.ElasticMembers, HeadAddress: naming.ElasticHeadAddress(deployment, namespace)}
	if c := replicas.MainContainer(&r.Template.Spec); c != nil {
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
		InstanceType: role.ElasticEP.HeadInstanceType, Command: engine.ElasticHeadCommand,
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
	c := replicas.MainContainer(&r.Template.Spec)
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
	c.Env = append(c.Env, corev1.EnvVar{Name: engine.EnvElasticPodUID, ValueFrom: fieldRef("metadata.uid")})
}

// RenderElasticHeadService is the head's Service <md>-elastic-head: the GCS and dashboard ports,
// selecting the head Pod.
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
