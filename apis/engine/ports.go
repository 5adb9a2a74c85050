package engine

import (
	"strconv"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The ports mdplane decides. Every rule choosing a port a role's Pods listen on is here: the render
// (render-roles' engine port, kv-cache's connector and routing proxy), validation and the router
// consult it. The one place a port is read back from a rendered template is the routing proxy
// moving a decoder's engine off the serving port render-roles gave it: that move stays inside
// kv-cache, because the two functions are separate packages upgraded one at a time; render-roles
// only keeps a proxied decoder's serving port the proxy's (ServingPorts).
const (
	// DefaultPort is a role's Service port when it declares no ports, and its engine's unless the
	// user passes another --port.
	DefaultPort = 8000
	// RoutingProxyEnginePort is the first port the engine of a decoder behind the routing proxy
	// moves to; the proxy takes the serving port.
	RoutingProxyEnginePort = 8200
	// BootstrapPort is the prefill/decode transfer's bootstrap listener on a prefiller.
	BootstrapPort = 8998
	// KVEventsPort and KVReplayPort are vLLM's KV event publisher and its replay endpoint.
	KVEventsPort = 5557
	KVReplayPort = 5558
	// KVEventsTopic is the topic KV cache events are published on.
	KVEventsTopic = "kv@"
)

// PortArg is the --port the user passes the engine, in any spelling the engine accepts (--por=7000
// on both engines), in the arguments mdplane reads.
func PortArg(e workerv1.Engine, role workerv1.ModelDeploymentRole) (string, bool) {
	return FlagValue(e, role.EngineArgs(), "--port")
}

// OwnPort is the user's --port as a port number, when it passes one that reads as a port.
func OwnPort(e workerv1.Engine, role workerv1.ModelDeploymentRole) (int32, bool) {
	v, ok := PortArg(e, role)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 || n > 65535 {
		return 0, false
	}
	return int32(n), true
}

// ServingPorts are where a role serves: the Service's port and the container port behind it, which
// a router dials. The first declared port is both; with none declared the Service stays on
// DefaultPort and the user's own --port moves only the container side. A decoder behind the
// routing proxy serves on the proxy: its own --port is where the engine listens behind it.
func ServingPorts(e workerv1.Engine, router *workerv1.ModelDeploymentRouter, role workerv1.ModelDeploymentRole) (service, target int32) {
	if len(role.Ports) > 0 {
		return role.Ports[0].Port, role.Ports[0].Port
	}
	target = DefaultPort
	if n, ok := OwnPort(e, role); ok && !BehindRoutingProxy(router, role) {
		target = n
	}
	return DefaultPort, target
}

// ListenerBehindProxy is the port the engine of a proxied decoder listens on, which the proxy
// forwards to: the decoder's own --port when it passes one (user arguments are appended, never
// merged), else PortBehindProxy of the container ports it declares.
func ListenerBehindProxy(e workerv1.Engine, role workerv1.ModelDeploymentRole, declared []int32) (port int32, own bool) {
	if n, ok := OwnPort(e, role); ok {
		return n, true
	}
	return PortBehindProxy(declared), false
}

// BehindRoutingProxy reports whether a role's replicas run behind llm-d-router's routing proxy: a
// managed decoder of a deployment llm-d-router fronts. The proxy owns the role's serving port.
func BehindRoutingProxy(router *workerv1.ModelDeploymentRouter, role workerv1.ModelDeploymentRole) bool {
	return router != nil && router.Name == workerv1.RouterLLMD && role.Kind == workerv1.RoleKindDecode && !role.TakesOver()
}

// PortBehindProxy is the port the engine of a proxied decoder moves to: RoutingProxyEnginePort,
// or the first port after it that no declared container port takes.
func PortBehindProxy(declared []int32) int32 {
	port := int32(RoutingProxyEnginePort)
	for taken := true; taken; {
		taken = false
		for _, p := range declared {
			if p == port {
				port++
				taken = true
			}
		}
	}
	return port
}

// OpensBootstrap reports whether a role listens on BootstrapPort: a prefiller given a direct
// prefill/decode transfer, on either vLLM build (vLLM-Ascend's kv_port is the same port).
func OpensBootstrap(e workerv1.Engine, router *workerv1.ModelDeploymentRouter, manufacturer string, roles []workerv1.ModelDeploymentRole, role workerv1.ModelDeploymentRole) bool {
	return role.Kind == workerv1.RoleKindPrefill && RendersDirectLeg(e, router, manufacturer, roles, role)
}

// PublishesKVEvents reports whether a role publishes KV cache events on KVEventsPort and
// KVReplayPort: a managed, block-producing native vLLM role (not a decoder) that llm-d-router fronts.
// SGLang renders no publisher, and neither does vLLM-Ascend (manufacturer is the role's
// InstanceType's).
func PublishesKVEvents(e workerv1.Engine, manufacturer string, router *workerv1.ModelDeploymentRouter, role workerv1.ModelDeploymentRole) bool {
	return ClientEngineOf(e, manufacturer) == ClientVLLM && e == workerv1.EngineVLLM && router != nil && router.Name == workerv1.RouterLLMD &&
		!role.TakesOver() && role.Kind != workerv1.RoleKindDecode && role.Kind != workerv1.RoleKindEncode
}

// ReservedPorts are the ports admission keeps a managed role from declaring, by the spec's rule:
// vLLM's KV event ports under llm-d-router on a role that is not a decoder, and the bootstrap port of
// a prefiller in a declared pair that names a router or a cache. A replaced command reserves nothing.
// The spec words this rule on its own, so it is not PublishesKVEvents or OpensBootstrap: an encoder
// under llm-d-router has the event ports reserved though it publishes nothing, and the bootstrap
// port is reserved by the pair's router or cache, not by whether the direct leg renders. Admission
// refuses by the spec's rule; the render opens by its own.
func ReservedPorts(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole) []int32 {
	if role.TakesOver() {
		return nil // nothing is synthesized onto a replaced command
	}
	var ports []int32
	router := md.Spec.Router
	if md.Spec.Engine.Name == workerv1.EngineVLLM && router != nil && router.Name == workerv1.RouterLLMD &&
		role.Kind != workerv1.RoleKindDecode {
		ports = append(ports, KVEventsPort, KVReplayPort)
	}
	if role.Kind == workerv1.RoleKindPrefill && DeclaresPair(md.Spec.Roles) && (router != nil || md.Spec.KVCache != nil) {
		ports = append(ports, BootstrapPort)
	}
	return ports
}
