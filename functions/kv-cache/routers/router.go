package routers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers/llmd"
)

// Router rendering constants: contract values the router Pods and Services carry.
const (
	AnnotationRouterConfig   = "modeldeployment.gpustack.ai/router-config-hash"
	Port                     = 8081
	routerMetricsPort        = 9090
	routerContainer          = "router"
	routerServicePortName    = "http"
	routerMetricsPortName    = "metrics"
	routerDefaultReplicaSize = 1
)

// Images are the images mdplane picks for a router, from the Settings after the registry redirect
// (settings.RouterImageRef, RouterProxyImageRef). An image named in spec.router.image is used
// verbatim instead of Router.
type Images struct {
	// Router is the router's (the EPP's on llm-d-router) when spec.router.image is unset.
	Router string
	// Proxy is llm-d-router's Envoy.
	Proxy string
}

// Endpoint is the deployment's address once a router fronts it.
func Endpoint(namespace, deployment string) string {
	return fmt.Sprintf("http://%s.%s.svc:%d", naming.RouterName(deployment), namespace, Port)
}

// Router is a deployment's router: the objects to compose, by composition resource name.
type Router struct {
	Objects map[string]any
}

// routerCommands are the argv routers and the command each runs; llm-d-router is an EPP and an
// Envoy proxy, rendered elsewhere.
var routerCommands = map[workerv1.RouterName]string{
	workerv1.RouterVLLM:          "vllm-router",
	workerv1.RouterSGLangGateway: "sgl-model-gateway",
}

// Renders reports whether this package renders the named router's objects: the argv routers.
func Renders(name workerv1.RouterName) bool {
	_, ok := routerCommands[name]
	return ok
}

// Render renders the objects of a vllm-router or sglang-gateway router: a Deployment whose
// router discovers the roles' leaders by label, its Service, and the ServiceAccount, Role and
// RoleBinding that let it watch Pods. servingPort is the port every role serves on; eligibility
// decides which selectors leave out the replicas qualification withdrew.
func Render(namespace, deployment string, e workerv1.Engine, r *workerv1.ModelDeploymentRouter, roles []workerv1.ModelDeploymentRole, servingPort int32, eligibility Eligibility, images Images) (*Router, error) {
	command, ok := routerCommands[r.Name]
	if !ok {
		return nil, fmt.Errorf("spec.router.name %q is not an argv router", r.Name)
	}
	container := routerContainerOf(r, command, routerArgs(namespace, deployment, e, r, roles, servingPort, eligibility), images.Router)
	hash, err := configHash(container)
	if err != nil {
		return nil, err
	}
	return &Router{Objects: objects(namespace, deployment, r, func(meta metav1.ObjectMeta) *appsv1.Deployment {
		return routerDeployment(meta, r, []corev1.Container{container}, nil, hash)
	})}, nil
}

// objects are every router's objects: the Deployment deploy builds from the shared metadata, its
// Service on Port, and the ServiceAccount, Role and RoleBinding that let it watch Pods.
func objects(namespace, deployment string, r *workerv1.ModelDeploymentRouter, deploy func(metav1.ObjectMeta) *appsv1.Deployment) map[string]any {
	name := naming.RouterName(deployment)
	labels := Labels(deployment, r.Name)
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}
	}
	return map[string]any{
		naming.RouterDeploymentResource: deploy(meta()),
		"router-service": &corev1.Service{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: meta(),
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{
				Name: routerServicePortName, Port: Port, TargetPort: intstr.FromInt32(Port), Protocol: corev1.ProtocolTCP,
			}}},
		},
		"router-serviceaccount": &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta()},
		"router-role": &rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: meta(),
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}}},
		},
		"router-rolebinding": &rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: meta(),
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		},
	}
}

// Labels label and select a deployment's router objects and Pods: the deployment's labels and the
// router's name. Router Pods carry no member index, so no endpoint selector picks them.
func Labels(deployment string, router workerv1.RouterName) map[string]string {
	labels := naming.DeploymentLabels(deployment)
	labels[workerv1.LabelRouter] = string(router)
	return labels
}

// routerArgs are the router's own flags, then the user's extraArgs: where it listens, where it
// discovers the roles' leaders, and the prefill/decode selectors of a declared pair, each with the
// eligibility term once eligibility says so.
func routerArgs(namespace, deployment string, e workerv1.Engine, r *workerv1.ModelDeploymentRouter, roles []workerv1.ModelDeploymentRole, servingPort int32, eligibility Eligibility) []string {
	args := []string{"--host=0.0.0.0", "--port=" + strconv.Itoa(Port),
		"--prometheus-host=0.0.0.0", "--prometheus-port=" + strconv.Itoa(routerMetricsPort)}
	if r.RequestTimeoutSeconds != nil {
		args = append(args, "--request-timeout-secs="+strconv.Itoa(int(*r.RequestTimeoutSeconds)))
	}
	if r.Name == workerv1.RouterVLLM {
		args = append(args, "--kv-connector=mooncake")
	}
	args = append(args, "--service-discovery", "--service-discovery-namespace="+namespace,
		"--service-discovery-port="+strconv.Itoa(int(servingPort)))
	if engine.DeclaresPair(roles) {
		flag := "--pd-disaggregation"
		if r.Name == workerv1.RouterVLLM {
			flag = "--vllm-pd-disaggregation"
		}
		args = append(args, flag)
		for _, s := range []struct {
			flag string
			kind workerv1.RoleKind
		}{{prefillSelectorFlag, workerv1.RoleKindPrefill}, {decodeSelectorFlag, workerv1.RoleKindDecode}} {
			eligible := eligibility.selects(s.flag, rolesOfKind(roles, s.kind))
			args = append(args, selectorArgs(s.flag, leaderLabels(deployment, s.kind, eligible))...)
		}
	} else {
		eligible := eligibility.selects(selectorFlag, roles)
		args = append(args, selectorArgs(selectorFlag, serverLabels(deployment, llmd.ServesEveryMember(e, roles), eligible))...)
	}
	return append(args, r.ExtraArgs...)
}

// routerContainerOf is the router's container: the image (defaultImage unless spec.router names
// one, which is used verbatim), its serving and metrics ports, and a TCP readiness probe on the
// serving port.
func routerContainerOf(r *workerv1.ModelDeploymentRouter, command string, args []string, defaultImage string) corev1.Container {
	image := defaultImage
	if r.Image != "" {
		image = r.Image
	}
	return corev1.Container{
		Name: routerContainer, Image: image, ImagePullPolicy: r.ImagePullPolicy,
		Command: []string{command}, Args: args,
		Ports: []corev1.ContainerPort{
			{Name: routerServicePortName, ContainerPort: Port, Protocol: corev1.ProtocolTCP},
			{Name: routerMetricsPortName, ContainerPort: routerMetricsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}},
			PeriodSeconds: 10, TimeoutSeconds: 5},
	}
}

// routerDeployment runs the router's replicas, keyed to their configuration by hash so a change
// rolls them, and scraped on the metrics port.
func routerDeployment(meta metav1.ObjectMeta, r *workerv1.ModelDeploymentRouter, containers []corev1.Container, volumes []corev1.Volume, hash string) *appsv1.Deployment {
	replicas := int32(routerDefaultReplicaSize)
	if r.Replicas != nil {
		replicas = *r.Replicas
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: meta.Labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: meta.Labels, Annotations: map[string]string{
					AnnotationRouterConfig:    hash,
					workerv1.AnnotationScrape: "true", workerv1.AnnotationScrapePath: "/metrics",
					workerv1.AnnotationScrapePort: strconv.Itoa(routerMetricsPort), workerv1.AnnotationScrapeScheme: "http",
				}},
				Spec: corev1.PodSpec{
					ServiceAccountName: meta.Name,
					ImagePullSecrets:   r.ImagePullSecrets,
					Containers:         containers,
					Volumes:            volumes,
				},
			},
		},
	}
}

// leaderLabels select the leaders of a deployment's roles of one kind, only the eligible ones when
// eligible. Router Pods carry no member index, so they never select themselves.
func leaderLabels(deployment string, kind workerv1.RoleKind, eligible bool) map[string]string {
	l := naming.Serving(naming.DeploymentLabels(deployment), false, eligible)
	if kind != "" {
		l[workerv1.LabelRoleKind] = kind.RouterSpelling()
	}
	return l
}

// serverLabels select the serving members of a deployment's Server roles: their leaders, or, when a
// role serves through every rank (External DP), every member labelled to serve, which includes the
// leaders of the leader-served replicas beside it; only the eligible ones when eligible.
func serverLabels(deployment string, everyMember, eligible bool) map[string]string {
	return naming.Serving(naming.DeploymentLabels(deployment), everyMember, eligible)
}

// selectorArgs spells a selector one label per argument, sorted.
func selectorArgs(flag string, labels map[string]string) []string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := []string{flag}
	for _, k := range keys {
		args = append(args, k+"="+labels[k])
	}
	return args
}

// configHash keys the router Pods to their configuration, so a change rolls them.
func configHash(c corev1.Container) (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ServingPort is the one port every role serves on, as apis/engine decides it (on a proxied decoder
// the routing proxy's); a router needs one.
func ServingPort(e workerv1.Engine, router *workerv1.ModelDeploymentRouter, roles []workerv1.ModelDeploymentRole) (int32, error) {
	var port int32
	for _, role := range roles {
		_, p := engine.ServingPorts(e, router, role)
		if port != 0 && p != port {
			return 0, fmt.Errorf("role %q serves on port %d and another role on %d; a router needs every role on one serving port", role.Name, p, port)
		}
		port = p
	}
	return port, nil
}
