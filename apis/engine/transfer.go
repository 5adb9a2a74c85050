package engine

import (
	"fmt"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// DeclaresPair reports whether roles hold both halves of a prefill/decode pair.
func DeclaresPair(roles []workerv1.ModelDeploymentRole) bool {
	var prefill, decode bool
	for _, r := range roles {
		prefill = prefill || r.Kind == workerv1.RoleKindPrefill
		decode = decode || r.Kind == workerv1.RoleKindDecode
	}
	return prefill && decode
}

// RendersDirectLeg reports whether a role's engine is given a direct prefill/decode transfer: native
// vLLM's leg follows the router, SGLang's the declared pair. vLLM-Ascend's leg (manufacturer is the
// role's InstanceType's) needs both: its MooncakeConnectorV1 is sized from both halves' degrees and
// paired through llm-d-router's routing proxy, so under another router or none it gets no leg,
// silently. A replaced command is given nothing.
func RendersDirectLeg(e workerv1.Engine, router *workerv1.ModelDeploymentRouter, manufacturer string, roles []workerv1.ModelDeploymentRole, role workerv1.ModelDeploymentRole) bool {
	if role.TakesOver() || (role.Kind != workerv1.RoleKindPrefill && role.Kind != workerv1.RoleKindDecode) {
		return false
	}
	switch {
	case ClientEngineOf(e, manufacturer) == ClientVLLMAscend:
		return router != nil && router.Name == workerv1.RouterLLMD && DeclaresPair(roles)
	case e == workerv1.EngineVLLM:
		return router != nil
	case e == workerv1.EngineSGLang:
		return DeclaresPair(roles)
	}
	return false
}

// DirectLegProtocol is the protocol a role's direct leg speaks, in the API's spelling:
// spec.kvTransfer.protocol (TransferProtocolOf), except on vLLM-Ascend, whose engine hardcodes its
// own Ascend transport and reads none: "" there.
func DirectLegProtocol(spec *workerv1.ModelDeploymentSpec, manufacturer string) workerv1.TransferProtocol {
	if ClientEngineOf(spec.Engine.Name, manufacturer) == ClientVLLMAscend {
		return ""
	}
	return TransferProtocolOf(spec)
}

// TransferProtocolOf is the protocol a deployment's transfers speak, its direct leg and its cache
// clients alike: spec.kvTransfer.protocol, TCP when unset or Auto.
func TransferProtocolOf(spec *workerv1.ModelDeploymentSpec) workerv1.TransferProtocol {
	if spec.KVTransfer == nil || spec.KVTransfer.Protocol == "" || spec.KVTransfer.Protocol == workerv1.TransferAuto {
		return workerv1.TransferTCP
	}
	return spec.KVTransfer.Protocol
}

// IsFabric reports whether a protocol runs on a fabric whose interfaces a Pod is allocated: RDMA or
// EFA.
func IsFabric(p workerv1.TransferProtocol) bool {
	return p == workerv1.TransferRDMA || p == workerv1.TransferEFA
}

// FabricTransport is the fabric a role's rendered transfers run on, or "" when it has none to be
// given interfaces for: no direct leg and no cache client, or a TCP path. manufacturer is the
// role's InstanceType's; client is the protocol its cache client speaks (API spelling), "" when
// none is rendered: the first group transport of the pool's backend its engine accepts
// (ClientTransport). The direct leg's fabric comes first; admission refuses a role whose two legs
// run on different fabrics. vLLM-Ascend's leg speaks its own transport (DirectLegProtocol ""), and
// its client CANN, so it has no fabric path.
func FabricTransport(spec *workerv1.ModelDeploymentSpec, manufacturer string, role workerv1.ModelDeploymentRole, client workerv1.TransferProtocol) workerv1.TransferProtocol {
	if leg := DirectLegProtocol(spec, manufacturer); RendersDirectLeg(spec.Engine.Name, spec.Router, manufacturer, spec.Roles, role) && IsFabric(leg) {
		return leg
	}
	if IsFabric(client) {
		return client
	}
	return ""
}

// ReasonRoleUnsupported is the reason of a refusal of a role arrangement an engine cannot serve.
const ReasonRoleUnsupported = "RoleUnsupported"

// PairDegrees are the tensor and data-parallel degrees of each half of a prefill/decode pair, read
// from each half's own argv (extraArgs, or command when it takes the line over); an undeclared or
// unreadable degree is 1. vLLM-Ascend's leg carries both halves' in each half's document.
type PairDegrees struct {
	Prefill, Decode Degrees
}

// PairDegreesOf reads the degrees of the pair's Prefill and Decode roles; a deployment declares at
// most one of each.
func PairDegreesOf(e workerv1.Engine, roles []workerv1.ModelDeploymentRole) PairDegrees {
	out := PairDegrees{Prefill: ReadDegrees(e, nil), Decode: ReadDegrees(e, nil)}
	for _, r := range roles {
		switch r.Kind {
		case workerv1.RoleKindPrefill:
			out.Prefill = ReadDegrees(e, r.EngineArgs())
		case workerv1.RoleKindDecode:
			out.Decode = ReadDegrees(e, r.EngineArgs())
		}
	}
	return out
}

// RendersAscendLeg reports whether any role of the deployment is given vLLM-Ascend's direct leg.
// manufacturers maps an InstanceType name to its accelerator manufacturer.
func RendersAscendLeg(e workerv1.Engine, router *workerv1.ModelDeploymentRouter, roles []workerv1.ModelDeploymentRole, manufacturers map[string]string) bool {
	for _, r := range roles {
		m := manufacturers[r.InstanceType]
		if ClientEngineOf(e, m) == ClientVLLMAscend && RendersDirectLeg(e, router, m, roles, r) {
			return true
		}
	}
	return false
}

// ValidateAscendLeg refuses a pair given vLLM-Ascend's direct leg whose prefill tensor parallelism
// is narrower than its decode one, which vLLM-Ascend's MooncakeConnectorV1 does not support.
// nil when no role renders the leg.
// The render refuses it; admission refuses it too when it knows the manufacturers.
func ValidateAscendLeg(e workerv1.Engine, router *workerv1.ModelDeploymentRouter, roles []workerv1.ModelDeploymentRole, manufacturers map[string]string) error {
	if !RendersAscendLeg(e, router, roles, manufacturers) {
		return nil
	}
	p := PairDegreesOf(e, roles)
	if p.Prefill.TP >= p.Decode.TP {
		return nil
	}
	return fmt.Errorf("%s: the vLLM-Ascend transfer leg requires the prefill tp_size to be at least the decode one, but the pair declares prefill %d and decode %d; narrow the decode role's tensor parallelism or widen the prefill role's",
		ReasonRoleUnsupported, p.Prefill.TP, p.Decode.TP)
}
