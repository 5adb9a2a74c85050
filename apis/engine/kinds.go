package engine

import (
	"slices"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// renderedKinds are the role kinds each engine's render has a term for: vLLM and SGLang both render
// Server, Prefill and Decode. Encode has none:
// mdplane would start a full engine under an encoder's label, so a managed Encode role is refused
// and a take-over role declares the encoder itself.
var renderedKinds = map[workerv1.Engine][]workerv1.RoleKind{
	workerv1.EngineVLLM:   {workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode},
	workerv1.EngineSGLang: {workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode},
}

// RendersKind reports whether the render has a term for a managed role of kind k on engine e.
func RendersKind(e workerv1.Engine, k workerv1.RoleKind) bool {
	return slices.Contains(renderedKinds[e], k)
}

// RenderedKinds lists the kinds the render has a term for on engine e, as words.
func RenderedKinds(e workerv1.Engine) []string {
	out := make([]string, 0, len(renderedKinds[e]))
	for _, k := range renderedKinds[e] {
		out = append(out, string(k))
	}
	return out
}
