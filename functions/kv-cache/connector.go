package kvcache

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Contract strings of the spec and its related facts.
const (
	AnnotationClientConfig = "kvcache.gpustack.ai/client-config"
	AnnotationSGLangBoot   = "sglang.ai/bootstrap-port"
	clientConfigVolume     = "gpustack-kvcache-config"
	clientConfigDir        = "/etc/gpustack/kvcache"
	clientConfigFile       = "mooncake.json"
)

// Binding is the resolved cache binding a deployment renders its clients from.
type Binding struct {
	// Endpoint is the pool's published client endpoint (host:port).
	Endpoint string
	// Domain is the Binding's reuse domain: its name is the tenant.
	Domain workerv1.KVCacheDomain
}

// Deployment is what the cache step needs of a ModelDeployment: its engine, router, transfer
// protocol, roles, and the resolved binding when spec.kvCache is set.
type Deployment struct {
	Engine     workerv1.Engine
	Router     *workerv1.ModelDeploymentRouter
	KVTransfer *workerv1.ModelDeploymentKVTransfer
	Roles      []workerv1.ModelDeploymentRole
	// Binding is nil when the deployment runs without a shared pool.
	Binding *Binding
}

// mooncakeProtocol maps the API's transfer protocol to Mooncake's; unset and Auto are tcp.
func mooncakeProtocol(t *workerv1.ModelDeploymentKVTransfer) string {
	if t == nil {
		return "tcp"
	}
	switch t.Protocol {
	case workerv1.TransferRDMA:
		return "rdma"
	case workerv1.TransferEFA:
		return "efa"
	case workerv1.TransferCANN:
		return "ascend"
	case workerv1.TransferROCM:
		return "hip"
	default:
		return "tcp"
	}
}

// Amendment is what the cache step adds to one role's Pod template.
type Amendment struct {
	// Args go before the user's extraArgs, right after the engine's launch line.
	Args []string
	// Env are owned variables, then defaulted ones the user does not set.
	Env []corev1.EnvVar
	// Ports are container ports of listeners the cache client opens.
	Ports       []corev1.ContainerPort
	Annotations map[string]string
	Volumes     []corev1.Volume
	Mounts      []corev1.VolumeMount
}

// RenderRole computes the cache client of one role. A take-over role (command set) gets nothing: the
// user owns its whole argv.
func RenderRole(d Deployment, role workerv1.ModelDeploymentRole) Amendment {
	var a Amendment
	if role.TakesOver() || role.Kind == workerv1.RoleKindEncode {
		return a
	}
	kind := role.Kind
	if kind == "" {
		kind = workerv1.RoleKindServer
	}
	protocol := mooncakeProtocol(d.KVTransfer)
	store := d.Binding != nil
	userEnv := map[string]bool{}
	for _, e := range role.Env {
		userEnv[e.Name] = true
	}
	defaulted := func(name, value string) {
		if !userEnv[name] {
			a.Env = append(a.Env, corev1.EnvVar{Name: name, Value: value})
		}
	}

	switch d.Engine {
	case workerv1.EngineVLLM:
		leg := engine.RendersDirectLeg(d.Engine, d.Router != nil, d.Roles, role)
		if doc := vllmTransferConfig(kind, store, leg, protocol); doc != "" {
			a.Args = append(a.Args, "--kv-transfer-config", doc)
		}
		if store {
			a.Annotations = map[string]string{AnnotationClientConfig: vllmClientConfig(d.Binding, protocol)}
			a.Volumes = append(a.Volumes, corev1.Volume{Name: clientConfigVolume, VolumeSource: corev1.VolumeSource{
				DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{
					Path:     clientConfigFile,
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationClientConfig + "']"},
				}}},
			}})
			a.Mounts = append(a.Mounts, corev1.VolumeMount{Name: clientConfigVolume, MountPath: clientConfigDir, ReadOnly: true})
			a.Env = append(a.Env, corev1.EnvVar{Name: "MOONCAKE_CONFIG_PATH", Value: clientConfigDir + "/" + clientConfigFile})
		}
		if leg && kind == workerv1.RoleKindPrefill {
			a.Env = append(a.Env, corev1.EnvVar{Name: "VLLM_MOONCAKE_BOOTSTRAP_PORT", Value: strconv.Itoa(engine.BootstrapPort)})
			a.Ports = append(a.Ports, corev1.ContainerPort{Name: "mc-bootstrap", ContainerPort: engine.BootstrapPort, Protocol: corev1.ProtocolTCP})
		}
		if engine.PublishesKVEvents(d.Engine, d.Router, role) {
			a.Args = append(a.Args, "--kv-events-config", kvEventsConfig)
			a.Ports = append(a.Ports,
				corev1.ContainerPort{Name: "kv-events", ContainerPort: engine.KVEventsPort, Protocol: corev1.ProtocolTCP},
				corev1.ContainerPort{Name: "kv-replay", ContainerPort: engine.KVReplayPort, Protocol: corev1.ProtocolTCP})
		}
		if store || leg {
			defaulted("MC_TE_METRIC", "1")
			if protocol == "tcp" {
				defaulted("MC_FORCE_TCP", "1")
			}
		}
	case workerv1.EngineSGLang:
		pair := engine.RendersDirectLeg(d.Engine, d.Router != nil, d.Roles, role)
		if store {
			a.Args = append(a.Args, "--hicache-storage-backend", "mooncake")
			if kind != workerv1.RoleKindDecode && !engine.HasFlag(role.ExtraArgs, "--enable-hierarchical-cache") {
				a.Args = append(a.Args, "--enable-hierarchical-cache")
			}
			if d.Binding.Domain.Name != "" {
				a.Env = append(a.Env, corev1.EnvVar{Name: "MOONCAKE_TENANT_ID", Value: d.Binding.Domain.Name})
			}
			a.Env = append(a.Env,
				corev1.EnvVar{Name: "MOONCAKE_MASTER", Value: d.Binding.Endpoint},
				corev1.EnvVar{Name: "MOONCAKE_TE_META_DATA_SERVER", Value: "P2PHANDSHAKE"},
				corev1.EnvVar{Name: "MOONCAKE_PROTOCOL", Value: protocol},
				corev1.EnvVar{Name: "MOONCAKE_DEVICE", Value: ""},
				corev1.EnvVar{Name: "MOONCAKE_GLOBAL_SEGMENT_SIZE", Value: "0"},
				// A file or an argument is fixed before the Pod has an IP; only the downward API can
				// carry the replica's own address.
				corev1.EnvVar{Name: "MOONCAKE_LOCAL_HOSTNAME", ValueFrom: &corev1.EnvVarSource{
					FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"},
				}})
		}
		if pair {
			backend := "mooncake"
			if protocol == "tcp" {
				backend = "mooncake_tcp"
			}
			mode := "prefill"
			if kind == workerv1.RoleKindDecode {
				mode = "decode"
			}
			a.Args = append(a.Args, "--disaggregation-mode", mode, "--disaggregation-transfer-backend", backend)
			if kind == workerv1.RoleKindPrefill {
				a.Args = append(a.Args, "--disaggregation-bootstrap-port", strconv.Itoa(engine.BootstrapPort))
				a.Ports = append(a.Ports, corev1.ContainerPort{Name: "bootstrap", ContainerPort: engine.BootstrapPort, Protocol: corev1.ProtocolTCP})
				a.Annotations = map[string]string{AnnotationSGLangBoot: strconv.Itoa(engine.BootstrapPort)}
			} else if !engine.HasFlag(role.ExtraArgs, "--disaggregation-decode-retraction-backup") {
				a.Args = append(a.Args, "--disaggregation-decode-retraction-backup", "cpu_tensor")
			}
		}
		if store || pair {
			defaulted("MC_TE_METRIC", "1")
			if protocol == "tcp" {
				defaulted("MC_FORCE_TCP", "1")
			}
		}
	}
	if store {
		a.Args = append(a.Args, engine.KVCacheDtypeFlag, d.Binding.Domain.Dtype)
	}
	return a
}

// vllmKVRole is the kv_role of a role kind.
func vllmKVRole(kind workerv1.RoleKind) string {
	switch kind {
	case workerv1.RoleKindPrefill:
		return "kv_producer"
	case workerv1.RoleKindDecode:
		return "kv_consumer"
	default:
		return "kv_both"
	}
}

// vllmTransferConfig is the --kv-transfer-config document: the store connector, the direct leg of a
// routed pair, or both through a MultiConnector; empty when neither applies.
func vllmTransferConfig(kind workerv1.RoleKind, store, leg bool, protocol string) string {
	type connector struct {
		Connector   string         `json:"kv_connector"`
		Role        string         `json:"kv_role"`
		ExtraConfig map[string]any `json:"kv_connector_extra_config,omitempty"`
	}
	legDoc := connector{Connector: "MooncakeConnector", Role: vllmKVRole(kind), ExtraConfig: map[string]any{"mooncake_protocol": protocol}}
	var doc connector
	switch {
	case store && leg:
		storeRole := "kv_both"
		if kind == workerv1.RoleKindDecode {
			storeRole = "kv_consumer"
		}
		doc = connector{Connector: "MultiConnector", Role: vllmKVRole(kind), ExtraConfig: map[string]any{
			"connectors": []connector{legDoc, {Connector: "MooncakeStoreConnector", Role: storeRole}},
		}}
	case store:
		doc = connector{Connector: "MooncakeStoreConnector", Role: vllmKVRole(kind)}
	case leg:
		doc = legDoc
	default:
		return ""
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// vllmClientConfig is the Mooncake client JSON a vLLM replica reads from its projected file.
func vllmClientConfig(b *Binding, protocol string) string {
	doc := map[string]any{
		"metadata_server":       "P2PHANDSHAKE",
		"master_server_address": b.Endpoint,
		"protocol":              protocol,
		"device_name":           "",
		"mode":                  "standalone-store",
		"global_segment_size":   0,
		"local_buffer_size":     134217728,
	}
	if b.Domain.Name != "" {
		doc["tenant_id"] = b.Domain.Name
	}
	out, _ := json.Marshal(doc) // map keys marshal sorted: the annotation is stable
	return string(out)
}

// kvEventsConfig is the ZMQ publisher a block-producing vLLM role runs when llm-d-router fronts it.
var kvEventsConfig = fmt.Sprintf(`{"enable_kv_cache_events":true,"publisher":"zmq","endpoint":"tcp://*:%d","replay_endpoint":"tcp://*:%d","buffer_steps":10000,"hwm":100000,"max_queue_size":100000,"topic":%q}`,
	engine.KVEventsPort, engine.KVReplayPort, engine.KVEventsTopic)

// Apply amends a role's Pod template: owned and defaulted variables go before the ones already
// rendered, arguments right after the launch line.
func Apply(t *corev1.PodTemplateSpec, a Amendment) {
	for k, v := range a.Annotations {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[k] = v
	}
	t.Spec.Volumes = append(t.Spec.Volumes, a.Volumes...)
	for i := range t.Spec.Containers {
		c := &t.Spec.Containers[i]
		if c.Name != naming.MainContainer {
			continue
		}
		c.Args = append(slices.Clone(a.Args), c.Args...)
		c.Env = append(slices.Clone(a.Env), c.Env...)
		c.Ports = append(c.Ports, a.Ports...)
		c.VolumeMounts = append(c.VolumeMounts, a.Mounts...)
	}
}
