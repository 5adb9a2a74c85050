package engine

import (
	"fmt"
	"slices"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// ReasonTransportUnsupported is the reason of a refusal of a pool whose transports an engine cannot
// use.
const ReasonTransportUnsupported = "TransportUnsupported"

// storeProtocols maps the API's transport spelling to the Mooncake store's. An unset protocol is
// Auto, which is tcp.
var storeProtocols = map[string]string{
	"":                     "tcp",
	workerv1.TransportAuto: "tcp",
	workerv1.TransportTCP:  "tcp",
	workerv1.TransportRDMA: "rdma",
	workerv1.TransportEFA:  "efa",
	workerv1.TransportCANN: "ascend",
	workerv1.TransportROCM: "hip",
	workerv1.TransportMUSA: "musa",
	workerv1.TransportMACA: "maca",
}

// StoreProtocol is the store's spelling of an API transport; "" for a value it does not know.
func StoreProtocol(api string) string {
	return storeProtocols[api]
}

// APIProtocol is the API spelling of a store protocol (tcp is TCP); "" for one it does not know.
func APIProtocol(store string) workerv1.TransferProtocol {
	return workerv1.TransferProtocol(apiProtocol(store))
}

// ClientTransport is the protocol, in the API's spelling, a role's cache client speaks on a
// backend: the first group offer its engine accepts; "" when none is (the render fails for it).
func ClientTransport(e workerv1.Engine, manufacturer string, b *workerv1.KVCacheBackend) workerv1.TransferProtocol {
	matched, err := MatchTransport(ClientEngineOf(e, manufacturer), BackendOffers(b))
	if err != nil {
		return ""
	}
	return APIProtocol(matched)
}

// apiProtocol is the API spelling of a store protocol, for messages that tell the user what to write.
func apiProtocol(store string) string {
	for _, api := range []string{workerv1.TransportTCP, workerv1.TransportRDMA, workerv1.TransportEFA, workerv1.TransportCANN,
		workerv1.TransportROCM, workerv1.TransportMUSA, workerv1.TransportMACA} {
		if storeProtocols[api] == store {
			return api
		}
	}
	return ""
}

// BackendOffers are the transports a backend's groups register with, in the store's spelling and in
// declaration order: each group's override, else the backend-wide protocol. An external backend has
// no groups and offers its backend-wide protocol. Never empty.
func BackendOffers(b *workerv1.KVCacheBackend) []string {
	wide := StoreProtocol(b.Spec.Transport.Protocol)
	if b.Spec.Connection.Managed == nil || len(b.Spec.Connection.Managed.Members) == 0 {
		return []string{wide}
	}
	offers := make([]string, 0, len(b.Spec.Connection.Managed.Members))
	for _, m := range b.Spec.Connection.Managed.Members {
		if m.Transport != nil && m.Transport.Protocol != "" {
			offers = append(offers, StoreProtocol(m.Transport.Protocol))
			continue
		}
		offers = append(offers, wide)
	}
	return offers
}

// DistinctOffers are the non-empty offers, first occurrence kept.
func DistinctOffers(offers []string) []string {
	var out []string
	for _, o := range offers {
		if o != "" && !slices.Contains(out, o) {
			out = append(out, o)
		}
	}
	return out
}

// ClientEngine is the engine a cache client is rendered for, as far as transports go: vLLM on an
// Ascend accelerator is its own engine, vllm-ascend, which speaks only the ascend transport.
type ClientEngine string

// The client engines a transport is judged for.
const (
	ClientVLLM       ClientEngine = "vLLM"
	ClientVLLMAscend ClientEngine = "vLLM-Ascend"
	ClientSGLang     ClientEngine = "SGLang"
)

// ClientEngineOf is the client engine of a deployment's engine on an accelerator manufacturer
// (InstanceType status.detail.manufacturer; empty when unknown or CPU-only).
func ClientEngineOf(e workerv1.Engine, manufacturer string) ClientEngine {
	switch {
	case e == workerv1.EngineVLLM && manufacturer == "ascend":
		return ClientVLLMAscend
	case e == workerv1.EngineSGLang:
		return ClientSGLang
	default:
		return ClientVLLM
	}
}

// transportConstraint is a client engine's required store transport and the versions it was
// measured on (engine.go @08b7e187).
type transportConstraint struct {
	required, measuredAt string
}

var transportConstraints = map[ClientEngine]transportConstraint{
	ClientVLLM:       {measuredAt: "vLLM v0.29.0"},
	ClientVLLMAscend: {required: "ascend", measuredAt: "vllm-ascend v0.19.1rc1-2120-gcdad5a32e, which raises NotImplementedError for other protocols"},
	ClientSGLang:     {measuredAt: "SGLang v0.5.18"},
}

// MatchTransport is the transport a client engine's cache client uses on a pool: the first offer, in
// declaration order, the engine accepts. No offers is ("", nil): the no-store shape.
func MatchTransport(e ClientEngine, offers []string) (string, error) {
	distinct := DistinctOffers(offers)
	if len(distinct) == 0 {
		return "", nil
	}
	c := transportConstraints[e]
	if c.required == "" {
		return distinct[0], nil
	}
	if slices.Contains(distinct, c.required) {
		return c.required, nil
	}
	required := apiProtocol(c.required)
	return "", fmt.Errorf("%s: %s requires the %s transport, but the pool's backend groups offer %s (measured at %s); "+
		"set the backend's spec.transport.protocol (or one group's transport.protocol) to %s, or bind a pool whose backend offers it; "+
		"an unset protocol defaults to Auto, which resolves to tcp",
		ReasonTransportUnsupported, e, c.required, strings.Join(distinct, ", "), c.measuredAt, required)
}

// ValidateBindingTransport refuses, at admission, a pool whose groups use more than one transport
// for an engine without a required one: its client talks one transport, and a read from a group on
// another fails. An engine with a required transport is judged by MatchTransport at render time.
func ValidateBindingTransport(e ClientEngine, offers []string) error {
	if transportConstraints[e].required != "" {
		return nil
	}
	distinct := DistinctOffers(offers)
	if len(distinct) < 2 {
		return nil
	}
	return fmt.Errorf("%s: %s's cache client uses one transport, but the pool's backend groups offer %s "+
		"(a read from a group on another transport fails with NotSupportedTransport); "+
		"set one common protocol on the backend's spec.transport.protocol and every group that overrides it, or bind a pool with one effective transport",
		ReasonTransportUnsupported, e, strings.Join(distinct, ", "))
}
