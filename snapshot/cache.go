package snapshot

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/engine"
	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Cache-hit sources and scopes.
const (
	sourceVLLMPrefix   = "vllm:prefix_cache"
	sourceVLLMExternal = "vllm:external_prefix_cache"
	sourceSGLangTokens = "sglang:prefill_effective_tokens_total"
)

// cacheRead is one scope's hits and queries on one Pod, or why the Pod has none to give.
type cacheRead struct {
	source, scope string
	hits, queries float64
	// skip is a reason written instead of an entry.
	skip string
}

// cacheHits adds a Pod's cache hit rates; idle is whether its TTFT recorded nothing.
func (a *assembly) cacheHits(r Read, at metav1.Time, idle bool) {
	if r.Target.Role == nil {
		return
	}
	var reads []cacheRead
	var ok bool
	switch engineOf(a.md) {
	case "vllm":
		reads, ok = a.vllmCache(r)
	case "sglang":
		reads, ok = sglangCache(a.md.Spec.Engine.Name, r)
	default:
		return
	}
	pod := r.Target.Pod
	if !ok {
		a.miss(pod, SourceCacheCounters, ReasonAbsent)
		return
	}
	for _, c := range reads {
		if c.skip != "" {
			a.miss(pod, c.source, c.skip)
			continue
		}
		dHits, dQueries, seconds, reason := a.samples.delta(sampleKey(a.md.UID, pod.UID, c.scope), Sample{At: r.At, A: c.hits, B: c.queries})
		switch {
		case reason != "":
		case dHits < 0 || dQueries < 0 || dHits > dQueries:
			reason = ReasonCacheReset
		case dQueries == 0 && idle:
			reason = ReasonIdle
		case dQueries == 0:
			reason = ReasonNoQueries
		}
		if reason != "" {
			a.miss(pod, c.source, reason)
			continue
		}
		a.out.CacheHits = append(a.out.CacheHits, metricsv1.CacheHit{Pod: pod.Name, Source: c.source, Scope: c.scope, Unit: unitTokens,
			Hits: dHits, Queries: dQueries, Rate: dHits / dQueries, WindowSeconds: seconds, PodCount: 1, ObservedAt: at})
	}
}

// vllmCache reads vLLM's local prefix cache and, on a Pod that uses one, the external store; false
// when the Pod exports no cache counter at all.
func (a *assembly) vllmCache(r Read) ([]cacheRead, bool) {
	f := r.Families
	counter := func(name string) (float64, bool) { return f.Sum(nil, counterNames(name)...) }
	var out []cacheRead
	hits, okH := counter(sourceVLLMPrefix + "_hits")
	queries, okQ := counter(sourceVLLMPrefix + "_queries")
	if okH && okQ {
		out = append(out, cacheRead{source: sourceVLLMPrefix, scope: "local-prefix", hits: hits, queries: queries})
	}
	extHits, okEH := counter(sourceVLLMExternal + "_hits")
	extQueries, okEQ := counter(sourceVLLMExternal + "_queries")
	// The external store is read on a Pod with a pool that is not a decode half and that names a KV
	// connector (or whose counter moves): vLLM exports the counter, at zero, on every Pod.
	uses := a.md.Spec.KVCache != nil && r.Target.Role.Kind != workerv1.RoleKindDecode &&
		(podHasFlag(a.md.Spec.Engine.Name, r.Target.Pod, "--kv-transfer-config") || extQueries > 0)
	switch {
	case !uses:
		out = append(out, cacheRead{source: sourceVLLMExternal, scope: "external-store", skip: ReasonExternalCacheAbsent})
	case okEH && okEQ:
		out = append(out, cacheRead{source: sourceVLLMExternal, scope: "external-store", hits: extHits, queries: extQueries})
	default:
		out = append(out, cacheRead{source: sourceVLLMExternal, scope: "external-store", skip: ReasonAbsent})
	}
	return out, okH && okQ || okEH && okEQ
}

// sglangCache reads SGLang's prefill tokens by mode: each hit tier over every prefilled token.
func sglangCache(e workerv1.Engine, r Read) ([]cacheRead, bool) {
	mode := func(m string) float64 {
		v, _ := r.Families.Sum(func(l map[string]string) bool { return l["mode"] == m }, counterNames(sourceSGLangTokens)...)
		return v
	}
	if _, ok := r.Families.Sum(nil, counterNames(sourceSGLangTokens)...); !ok {
		return nil, false
	}
	device, host, storage := mode("device_hit"), mode("host_hit"), mode("storage_hit")
	queries := mode("input") + device + host + storage
	pod := r.Target.Pod
	tier := func(scope string, hits float64, built bool) cacheRead {
		if !built {
			return cacheRead{source: sourceSGLangTokens, scope: scope, skip: ReasonTierNotBuilt}
		}
		return cacheRead{source: sourceSGLangTokens, scope: scope, hits: hits, queries: queries}
	}
	hostBuilt := podHasFlag(e, pod, "--enable-hierarchical-cache", "--enable-lmcache", "--enable-flexkv") ||
		podFlagValue(e, pod, "--radix-cache-backend") == "flexkv"
	return []cacheRead{
		tier("device-prefix", device, true),
		tier("host-prefix", host, hostBuilt),
		tier("storage-prefix", storage, podHasFlag(e, pod, "--hicache-storage-backend")),
	}, true
}

// podHasFlag reports whether any container's command line passes one of the flags, in any spelling
// the engine accepts (apis/engine): the rendered Pod holds the whole line, synthesized arguments
// included.
func podHasFlag(e workerv1.Engine, pod *corev1.Pod, flags ...string) bool {
	for _, line := range commandLines(pod) {
		if engine.HasFlag(e, line, flags...) {
			return true
		}
	}
	return false
}

// podFlagValue is the value of a flag in the Pod's command lines, "" when absent.
func podFlagValue(e workerv1.Engine, pod *corev1.Pod, flag string) string {
	for _, line := range commandLines(pod) {
		if v, ok := engine.FlagValue(e, line, flag); ok {
			return v
		}
	}
	return ""
}

// commandLines are the command and arguments of each container and init container.
func commandLines(pod *corev1.Pod) [][]string {
	var lines [][]string
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			lines = append(lines, append(append([]string{}, c.Command...), c.Args...))
		}
	}
	return lines
}
