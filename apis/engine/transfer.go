package engine

import workerv1 "github.com/mdplane/mdplane/apis/worker/v1"

// DeclaresPair reports whether roles hold both halves of a prefill/decode pair.
func DeclaresPair(roles []workerv1.ModelDeploymentRole) bool {
	var prefill, decode bool
	for _, r := range roles {
		prefill = prefill || r.Kind == workerv1.RoleKindPrefill
		decode = decode || r.Kind == workerv1.RoleKindDecode
	}
	return prefill && decode
}

// RendersDirectLeg reports whether a role's engine is given a direct prefill/decode transfer: vLLM's
// leg follows the router, SGLang's the declared pair. A replaced command is given nothing.
func RendersDirectLeg(e workerv1.Engine, routed bool, roles []workerv1.ModelDeploymentRole, role workerv1.ModelDeploymentRole) bool {
	if role.TakesOver() || (role.Kind != workerv1.RoleKindPrefill && role.Kind != workerv1.RoleKindDecode) {
		return false
	}
	switch e {
	case workerv1.EngineVLLM:
		return routed
	case workerv1.EngineSGLang:
		return DeclaresPair(roles)
	}
	return false
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
// given interfaces for: no direct leg and no cache client, or a TCP path. client is the protocol
// its cache client speaks (API spelling), "" when none is rendered: the first group transport of
// the pool's backend its engine accepts (ClientTransport). The direct leg's fabric comes first;
// admission refuses a role whose two legs run on different fabrics.
func FabricTransport(spec *workerv1.ModelDeploymentSpec, role workerv1.ModelDeploymentRole, client workerv1.TransferProtocol) workerv1.TransferProtocol {
	if leg := TransferProtocolOf(spec); RendersDirectLeg(spec.Engine.Name, spec.Router != nil, spec.Roles, role) && IsFabric(leg) {
		return leg
	}
	if IsFabric(client) {
		return client
	}
	return ""
}
