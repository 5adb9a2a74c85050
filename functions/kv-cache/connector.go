package kvcache

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Contract strings: the connector's names and values as engines read them.
const (
	AnnotationClientConfig = "kvcache.gpustack.ai/client-config"
	AnnotationSGLangBoot   = "sglang.ai/bootstrap-port"
	clientConfigVolume     = "gpustack-kvcache-config"
	clientConfigDir        = "/etc/gpustack/kvcache"
	clientConfigFile       = "mooncake.json"
	// The Ascend host driver vLLM-Ascend's direct leg reads: hccn_tool finds the NPU NIC's IP there.
	ascendDriverVolume = "gpustack-ascend-driver"
	ascendDriverPath   = "/usr/local/Ascend/driver"
)

// roleCache is what the cache step decides once for a role before the engine's own rendering.
type roleCache struct {
	d    Deployment
	role workerv1.ModelDeploymentRole
	// protocol is Mooncake's spelling of the direct leg's transfer protocol (spec.kvTransfer);
	// storeProtocol the one the cache client speaks, picked from the backend's group offers.
	protocol, storeProtocol string
	// store is true when a pool is bound; leg when a direct prefill/decode transfer is rendered.
	store, leg bool
	// ascend is true on vLLM-Ascend: vLLM on an InstanceType reporting manufacturer ascend.
	ascend bool
}

// RenderRole computes the cache client of one role. A take-over role (command set) and an encoder
// get nothing: the user owns a take-over role's whole argv, and an encoder holds no KV cache.
func RenderRole(d Deployment, role workerv1.ModelDeploymentRole) Amendment {
	var a Amendment
	role = role.WithDefaults()
	if role.TakesOver() || role.Kind == workerv1.RoleKindEncode {
		return a
	}
	manufacturer := d.Manufacturers[role.InstanceType]
	c := roleCache{d: d, role: role, protocol: mooncakeProtocol(d.KVTransfer), storeProtocol: d.StoreProtocols[role.Name],
		store: d.Binding != nil, leg: engine.RendersDirectLeg(d.Engine, d.Router, manufacturer, d.Roles, role),
		ascend: engine.ClientEngineOf(d.Engine, manufacturer) == engine.ClientVLLMAscend}
	if c.storeProtocol == "" {
		c.storeProtocol = "tcp"
	}
	if c.ascend {
		c.protocol = "" // vLLM-Ascend's leg hardcodes its Ascend transport; spec.kvTransfer.protocol is not read
	}
	switch d.Engine {
	case workerv1.EngineVLLM:
		a.vllm(c)
	case workerv1.EngineSGLang:
		a.sglang(c)
	}
	// Setting model-deployment-kv-cache-dtype-owned off: nothing is rendered (or refused).
	if c.store && d.settings().KVCacheDtypeOwned {
		a.Args = append(a.Args, engine.KVCacheDtypeFlag, d.Binding.Domain.Dtype)
	}
	return a
}

// vllm renders vLLM's connector: the --kv-transfer-config document, the projected client file of a
// bound pool, the bootstrap listener of a prefiller's direct leg and the KV event publisher, and on
// vLLM-Ascend the host driver its leg reads.
func (a *Amendment) vllm(c roleCache) {
	if doc := vllmTransferConfig(c); doc != "" {
		a.Args = append(a.Args, "--kv-transfer-config", doc)
	}
	if c.store {
		a.vllmClientFile(c.d.Binding, c.storeProtocol)
	}
	manufacturer := c.d.Manufacturers[c.role.InstanceType]
	if engine.OpensBootstrap(c.d.Engine, c.d.Router, manufacturer, c.d.Roles, c.role) {
		if !c.ascend { // vLLM-Ascend reads its bootstrap port from the document's kv_port
			a.Env = append(a.Env, corev1.EnvVar{Name: "VLLM_MOONCAKE_BOOTSTRAP_PORT", Value: strconv.Itoa(engine.BootstrapPort)})
		}
		a.Ports = append(a.Ports, corev1.ContainerPort{Name: "mc-bootstrap", ContainerPort: engine.BootstrapPort, Protocol: corev1.ProtocolTCP})
	}
	if c.ascend && c.leg {
		a.ascendDriver()
	}
	if engine.PublishesKVEvents(c.d.Engine, manufacturer, c.d.Router, c.role) {
		a.Args = append(a.Args, "--kv-events-config", kvEventsConfig)
		a.Ports = append(a.Ports,
			corev1.ContainerPort{Name: "kv-events", ContainerPort: engine.KVEventsPort, Protocol: corev1.ProtocolTCP},
			corev1.ContainerPort{Name: "kv-replay", ContainerPort: engine.KVReplayPort, Protocol: corev1.ProtocolTCP})
	}
	a.transferEnv(c)
}

// vllmClientFile projects the Mooncake client JSON, carried in an annotation, into the main
// container as a file, and points MOONCAKE_CONFIG_PATH at it.
func (a *Amendment) vllmClientFile(b *Binding, protocol string) {
	a.Annotations = map[string]string{AnnotationClientConfig: vllmClientConfig(b, protocol)}
	a.Volumes = append(a.Volumes, corev1.Volume{Name: clientConfigVolume, VolumeSource: corev1.VolumeSource{
		DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{{
			Path:     clientConfigFile,
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + AnnotationClientConfig + "']"},
		}}},
	}})
	a.Mounts = append(a.Mounts, corev1.VolumeMount{Name: clientConfigVolume, MountPath: clientConfigDir, ReadOnly: true})
	a.Env = append(a.Env, corev1.EnvVar{Name: "MOONCAKE_CONFIG_PATH", Value: clientConfigDir + "/" + clientConfigFile})
}

// ascendDriver mounts the host's Ascend driver read-only: vLLM-Ascend's direct leg runs hccn_tool
// from it to read the NPU NIC's IP.
func (a *Amendment) ascendDriver() {
	a.Volumes = append(a.Volumes, corev1.Volume{Name: ascendDriverVolume, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: ascendDriverPath, Type: ptr.To(corev1.HostPathDirectory)},
	}})
	a.Mounts = append(a.Mounts, corev1.VolumeMount{Name: ascendDriverVolume, MountPath: ascendDriverPath, ReadOnly: true})
}

// sglang renders SGLang's connector: the HiCache storage backend of a bound pool and the
// disaggregation flags of a declared pair.
func (a *Amendment) sglang(c roleCache) {
	if c.store {
		a.sglangStore(c)
	}
	if c.leg {
		a.sglangPair(c)
	}
	a.transferEnv(c)
}

// sglangStore points SGLang's HiCache at the pool; its client is configured through the environment
// alone. SGLang reads its store configuration from the extra-config argument, else the config-path
// file, else the environment, and the first two fill every key they lack with built-in defaults (a
// 4 GiB segment, a localhost identity): rendering either, even to carry only the weights' tag, would
// replace the whole environment configuration. So neither is rendered and SGLang's keys carry no
// weights tag.
func (a *Amendment) sglangStore(c roleCache) {
	b := c.d.Binding
	a.Args = append(a.Args, "--hicache-storage-backend", "mooncake")
	// The host-memory tier under the store, the first of SGLang's two cache switches; a decode half
	// gets the other, its retraction backup (sglangPair).
	if c.role.Kind != workerv1.RoleKindDecode && !engine.HasFlag(c.d.Engine, c.role.EngineArgs(), "--enable-hierarchical-cache") {
		a.Args = append(a.Args, "--enable-hierarchical-cache")
	}
	if b.Domain.Name != "" {
		a.Env = append(a.Env, corev1.EnvVar{Name: "MOONCAKE_TENANT_ID", Value: b.Domain.Name})
	}
	a.Env = append(a.Env,
		corev1.EnvVar{Name: "MOONCAKE_MASTER", Value: b.Endpoint},
		corev1.EnvVar{Name: "MOONCAKE_TE_META_DATA_SERVER", Value: "P2PHANDSHAKE"},
		corev1.EnvVar{Name: "MOONCAKE_PROTOCOL", Value: c.storeProtocol},
		corev1.EnvVar{Name: "MOONCAKE_DEVICE", Value: ""},
		corev1.EnvVar{Name: "MOONCAKE_GLOBAL_SEGMENT_SIZE", Value: "0"},
		// A file or an argument is fixed before the Pod has an IP; only the downward API can
		// carry the replica's own address.
		corev1.EnvVar{Name: "MOONCAKE_LOCAL_HOSTNAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"},
		}})
}

// sglangPair renders one half of a declared prefill/decode pair: the prefiller's bootstrap
// listener, the decoder's retraction backup.
func (a *Amendment) sglangPair(c roleCache) {
	backend := "mooncake"
	if c.protocol == "tcp" {
		backend = "mooncake_tcp"
	}
	mode := "prefill"
	if c.role.Kind == workerv1.RoleKindDecode {
		mode = "decode"
	}
	a.Args = append(a.Args, "--disaggregation-mode", mode, "--disaggregation-transfer-backend", backend)
	switch {
	case engine.OpensBootstrap(c.d.Engine, c.d.Router, c.d.Manufacturers[c.role.InstanceType], c.d.Roles, c.role):
		a.Args = append(a.Args, "--disaggregation-bootstrap-port", strconv.Itoa(engine.BootstrapPort))
		a.Ports = append(a.Ports, corev1.ContainerPort{Name: "bootstrap", ContainerPort: engine.BootstrapPort, Protocol: corev1.ProtocolTCP})
		a.Annotations = map[string]string{AnnotationSGLangBoot: strconv.Itoa(engine.BootstrapPort)}
	case !engine.HasFlag(c.d.Engine, c.role.EngineArgs(), "--disaggregation-decode-retraction-backup"):
		// The second cache switch: a decode half keeps a retracted request's KV in host memory
		// rather than recomputing it. It follows the pair, bound to a pool or not.
		a.Args = append(a.Args, "--disaggregation-decode-retraction-backup", "cpu_tensor")
	}
}

// transferEnv defaults the Mooncake transfer engine's metrics and, when every transfer the container
// makes is tcp, forces its TCP transport, wherever a pool or a direct leg uses it; a variable the
// user sets wins. MC_FORCE_TCP is process-wide, so a store client on tcp beside an RDMA leg (or the
// reverse) must not set it. vLLM-Ascend's leg has no protocol of ours (c.protocol is ""), so it never
// counts as tcp.
func (a *Amendment) transferEnv(c roleCache) {
	if !c.store && !c.leg {
		return
	}
	user := map[string]bool{}
	for _, e := range c.role.Env {
		user[e.Name] = true
	}
	defaulted := func(name, value string) {
		if !user[name] {
			a.Env = append(a.Env, corev1.EnvVar{Name: name, Value: value})
		}
	}
	defaulted("MC_TE_METRIC", "1")
	if (!c.leg || c.protocol == "tcp") && (!c.store || c.storeProtocol == "tcp") {
		defaulted("MC_FORCE_TCP", "1")
	}
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
// routed pair, or both through a MultiConnector; empty when neither applies. vLLM-Ascend names its
// own connectors: AscendStoreConnector for the store, and MooncakeConnectorV1 for the leg, which
// takes its bootstrap port as kv_port and both halves' degrees instead of a protocol.
func vllmTransferConfig(c roleCache) string {
	type connector struct {
		Connector   string         `json:"kv_connector"`
		Role        string         `json:"kv_role"`
		Port        int            `json:"kv_port,omitempty"`
		ExtraConfig map[string]any `json:"kv_connector_extra_config,omitempty"`
	}
	kind := c.role.Kind
	legDoc := connector{Connector: "MooncakeConnector", Role: vllmKVRole(kind), ExtraConfig: map[string]any{"mooncake_protocol": c.protocol}}
	storeConnector := "MooncakeStoreConnector"
	if c.ascend {
		p := engine.PairDegreesOf(c.d.Engine, c.d.Roles)
		legDoc = connector{Connector: "MooncakeConnectorV1", Role: vllmKVRole(kind), Port: engine.BootstrapPort, ExtraConfig: map[string]any{
			"prefill": map[string]int{"tp_size": p.Prefill.TP, "dp_size": p.Prefill.DP},
			"decode":  map[string]int{"tp_size": p.Decode.TP, "dp_size": p.Decode.DP},
		}}
		storeConnector = "AscendStoreConnector"
	}
	// Native vLLM's store connector keys its blocks by the weights' cache prefix; vLLM-Ascend's
	// AscendStoreConnector takes none.
	var storeExtra map[string]any
	if c.d.CachePrefix != "" && !c.ascend {
		storeExtra = map[string]any{"cache_prefix": c.d.CachePrefix}
	}
	var doc connector
	switch {
	case c.store && c.leg:
		storeRole := "kv_both"
		if kind == workerv1.RoleKindDecode {
			storeRole = "kv_consumer"
		}
		doc = connector{Connector: "MultiConnector", Role: vllmKVRole(kind), ExtraConfig: map[string]any{
			"connectors": []connector{legDoc, {Connector: storeConnector, Role: storeRole, ExtraConfig: storeExtra}},
		}}
	case c.store:
		doc = connector{Connector: storeConnector, Role: vllmKVRole(kind), ExtraConfig: storeExtra}
	case c.leg:
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
