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
