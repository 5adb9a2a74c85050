package routers

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers/llmd"
)

// llm-d-router's rendering constants.
const (
	eppGRPCHealthPort   = 9003
	configVolume        = "config"
	configMountPath     = "/config"
	keyEPP              = "epp.yaml"
	keyEnvoy            = "envoy.yaml"
	keyEndpointSelector = "endpoint-selector"
	keyTargetPorts      = "endpoint-target-ports"
	keyExtraArgs        = "extra-args.json"
)

// ConfigMapResource is the composition resource name of llm-d-router's ConfigMap.
const ConfigMapResource = "router-configmap"

// RenderLLMD renders llm-d-router's objects: the <md>-router ConfigMap holding the EPP and Envoy
// documents, a Deployment running Envoy in front of the EPP, and the Service and RBAC every router
// has. The Pod template carries the hash of the ConfigMap's data, so any configuration edit rolls
// the router and nothing else (a replica count is not in the data) does. noKVEvents is true when a
// block-producing role publishes no KV events (vLLM-Ascend); sharedTransfer when both halves of the
// pair carry one transfer document (vLLM-Ascend's leg: llmd.Deployment.SharedTransfer). eligibility
// decides whether the endpoint selector leaves out the replicas qualification withdrew. images are
// the Settings' (the EPP's only when spec.router.image is unset).
func RenderLLMD(md *workerv1.ModelDeployment, servingPort int32, noKVEvents, sharedTransfer bool, eligibility Eligibility, images Images) (*Router, error) {
	r := md.Spec.Router
	d := llmd.Deployment{
		Namespace: md.Namespace, Name: md.Name, Model: md.Spec.Model.Name, Engine: md.Spec.Engine.Name,
		Roles: md.Spec.Roles, ServingPort: servingPort, DisaggregationThresholdTokens: r.DisaggregationThresholdTokens,
		NoKVEvents: noKVEvents, SharedTransfer: sharedTransfer,
		Eligible: eligibility.selects(ConfigMapKeyEndpointSelector, md.Spec.Roles),
	}
	epp, err := llmd.EPP(d)
	if err != nil {
		return nil, err
	}
	extraArgs, err := json.Marshal(r.ExtraArgs) // null when unset, as upstream hashes it
	if err != nil {
		return nil, err
	}
	name := naming.RouterName(md.Name)
	data := map[string]string{
		keyEPP:              string(epp),
		keyEnvoy:            llmd.Envoy(r.RequestTimeoutSeconds),
		keyEndpointSelector: d.Selector(),
		keyTargetPorts:      strconv.Itoa(int(servingPort)),
		keyExtraArgs:        string(extraArgs),
	}
	hash := DataHash(data)
	objs := objects(md.Namespace, md.Name, r, func(meta metav1.ObjectMeta) *appsv1.Deployment {
		volumes := []corev1.Volume{{Name: configVolume, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}
		return routerDeployment(meta, r, []corev1.Container{envoyContainer(r, images.Proxy), eppContainer(r, name, images.Router)}, volumes, hash)
	})
	objs[ConfigMapResource] = &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: md.Namespace, Labels: Labels(md.Name, r.Name)},
		Data:       data,
	}
	return &Router{Objects: objs}, nil
}

// DataHash is the lowercase hex SHA-256 of the ConfigMap data as Go's JSON spells it (keys sorted).
func DataHash(data map[string]string) string {
	b, err := json.Marshal(data)
	if err != nil {
		return "unhashable-" + err.Error()
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

var configMount = []corev1.VolumeMount{{Name: configVolume, MountPath: configMountPath, ReadOnly: true}}

// envoyContainer is the proxy clients reach on Port; it asks the EPP which endpoint to send to.
func envoyContainer(r *workerv1.ModelDeploymentRouter, image string) corev1.Container {
	return corev1.Container{
		Name: "envoy", Image: image, ImagePullPolicy: r.ImagePullPolicy,
		Args:           []string{"-c", configMountPath + "/" + keyEnvoy},
		Ports:          []corev1.ContainerPort{{Name: routerServicePortName, ContainerPort: Port, Protocol: corev1.ProtocolTCP}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(Port)}}},
		VolumeMounts:   configMount,
	}
}

// eppContainer is the endpoint picker. Its selector and target ports come from the ConfigMap
// through env, so they are hashed with the rest of the configuration; the user's extraArgs follow
// mdplane's flags, which admission keeps them from repeating.
func eppContainer(r *workerv1.ModelDeploymentRouter, configMap, defaultImage string) corev1.Container {
	image := defaultImage
	if r.Image != "" {
		image = r.Image
	}
	fromConfig := func(key string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: configMap}, Key: key, Optional: new(bool)}}
	}
	fromField := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	args := []string{
		"--endpoint-selector=$(ENDPOINT_SELECTOR)", "--endpoint-target-ports=$(ENDPOINT_TARGET_PORTS)",
		"--config-file=" + configMountPath + "/" + keyEPP, "--secure-serving=false",
		"--grpc-health-port=" + strconv.Itoa(eppGRPCHealthPort), "--metrics-endpoint-auth=false",
	}
	return corev1.Container{
		Name: "epp", Image: image, ImagePullPolicy: r.ImagePullPolicy,
		Command: []string{"epp"}, Args: append(args, r.ExtraArgs...),
		Env: []corev1.EnvVar{
			{Name: "ENDPOINT_SELECTOR", ValueFrom: fromConfig(keyEndpointSelector)},
			{Name: "ENDPOINT_TARGET_PORTS", ValueFrom: fromConfig(keyTargetPorts)},
			{Name: "NAMESPACE", ValueFrom: fromField("metadata.namespace")},
			{Name: "POD_NAME", ValueFrom: fromField("metadata.name")},
		},
		Ports: []corev1.ContainerPort{
			{Name: "grpc", ContainerPort: llmd.ExtProcPort, Protocol: corev1.ProtocolTCP},
			{Name: "grpc-health", ContainerPort: eppGRPCHealthPort, Protocol: corev1.ProtocolTCP},
			{Name: routerMetricsPortName, ContainerPort: routerMetricsPort, Protocol: corev1.ProtocolTCP},
		},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: eppGRPCHealthPort, Service: new(string)}}},
		VolumeMounts:   configMount,
	}
}
