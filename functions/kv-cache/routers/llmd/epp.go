package llmd

import (
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// DefaultNonCachedTokens is the prefix-based-pd-decider's threshold when
// spec.router.disaggregationThresholdTokens is unset.
const DefaultNonCachedTokens = 8

// Deployment is what the EPP document is derived from: the deployment's identity, its model and
// engine, the roles it fronts, and the one port they all serve on.
type Deployment struct {
	Namespace   string
	Name        string
	Model       string
	Engine      workerv1.Engine
	Roles       []workerv1.ModelDeploymentRole
	ServingPort int32
	// DisaggregationThresholdTokens is spec.router.disaggregationThresholdTokens; nil means the
	// default.
	DisaggregationThresholdTokens *int32
	// NoKVEvents is true when a block-producing role renders no KV event publisher though the engine
	// is vLLM (vLLM-Ascend): the router then scores prefixes approximately rather than dial nothing.
	NoKVEvents bool
	// SharedTransfer is true when both halves of the deployment's pair carry one transfer document
	// (vLLM-Ascend's leg): the EPP then selects only the Pods the pairing controller routes, which
	// share one configuration of it.
	SharedTransfer bool
	// Eligible is true when the EPP selects only the endpoints qualification leaves eligible
	// (workerv1.LabelEndpointEligible), as the role Services do.
	Eligible bool
}

// Selector is the selector the EPP discovers d's endpoints with (ConfigMap key endpoint-selector):
// the deployment's leaders, or its serving members when a Server role serves through every rank
// (External DP), only the eligible ones when Eligible, never the router's own Pods; under a shared
// transfer document only the Pods routed to (workerv1.LabelTransferRouted). Order is fixed.
func (d Deployment) Selector() string {
	terms := endpointTerms(d.Name, ServesEveryMember(d.Engine, d.Roles), d.Eligible)
	if d.SharedTransfer {
		terms = append(terms, workerv1.LabelTransferRouted+"=true")
	}
	return strings.Join(terms, ",")
}

// endpointTerms select a deployment's serving Pods, never the router's own.
func endpointTerms(deployment string, everyMember, eligible bool) []string {
	return append(naming.DeploymentServingTerms(deployment, everyMember, eligible), "!"+workerv1.LabelRouter)
}

// ServesEveryMember reports whether any role of a deployment serves through every member of a
// replica (engine.ServesEveryMember): the deployment's endpoints are then its serving members.
func ServesEveryMember(e workerv1.Engine, roles []workerv1.ModelDeploymentRole) bool {
	for _, r := range roles {
		if engine.ServesEveryMember(e, r) {
			return true
		}
	}
	return false
}

// UpstreamEngine is the engine's name as llm-d spells it.
func UpstreamEngine(e workerv1.Engine) string {
	return strings.ToLower(string(e))
}

// Metrics are the engine metric names the EPP scores on, and the cache-capacity metrics the
// approximate producer sizes the cache from.
type Metrics struct {
	QueuedRequests     string
	RunningRequests    string
	KVCacheUtilization string
	CacheInfo          string
	CacheBlockSize     string
	CacheNumBlocks     string
}

// EngineMetrics are the metric names the EPP reads of each engine.
func EngineMetrics(e workerv1.Engine) (Metrics, error) {
	switch e {
	case workerv1.EngineVLLM:
		return Metrics{"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc", "vllm:cache_config_info", "", ""}, nil
	case workerv1.EngineSGLang:
		return Metrics{"sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage", "", "sglang:page_size", "sglang:num_pages"}, nil
	}
	return Metrics{}, fmt.Errorf("metric %q required by router %q is unavailable on engine %q", "QueuedRequests", workerv1.RouterLLMD, UpstreamEngine(e))
}

// publishesEvents: every vLLM deployment under llm-d-router is given the precise producer, fed by
// the roles' KV events; SGLang publishes none and gets the approximate one.
func publishesEvents(e workerv1.Engine) bool { return e == workerv1.EngineVLLM }

// TokenizerEndpoint is the role the precise producer tokenizes through: the first prefiller by
// name, else the first server, else the first role; https when that role serves TLS.
func TokenizerEndpoint(d Deployment) string {
	roles := append([]workerv1.ModelDeploymentRole(nil), d.Roles...)
	sort.SliceStable(roles, func(i, j int) bool { return roles[i].Name < roles[j].Name })
	pick := func(kind workerv1.RoleKind) *workerv1.ModelDeploymentRole {
		for i := range roles {
			if roles[i].Kind.RouterSpelling() == kind.RouterSpelling() {
				return &roles[i]
			}
		}
		return nil
	}
	role := pick(workerv1.RoleKindPrefill)
	if role == nil {
		role = pick(workerv1.RoleKindServer)
	}
	if role == nil && len(roles) > 0 {
		role = &roles[0]
	}
	if role == nil {
		return ""
	}
	scheme := "http"
	if engine.HasFlag(d.Engine, role.EngineArgs(), "--ssl-certfile", "--ssl-keyfile") {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s-%s.%s.svc:%d", scheme, d.Name, role.Name, d.Namespace, d.ServingPort)
}

// kinds are the deployment's distinct role kinds in the router's spelling, sorted.
func kinds(roles []workerv1.ModelDeploymentRole) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range roles {
		k := r.Kind.RouterSpelling()
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

type doc = map[string]any

// EPP is the EndpointPickerConfig document (ConfigMap key epp.yaml), built by the construction
// rules below (filters, scorers and profiles by the roles' kinds, the prefix cache and KV events).
// It is marshalled from maps, so keys are sorted and the bytes are a function of the inputs alone.
func EPP(d Deployment) ([]byte, error) {
	m, err := EngineMetrics(d.Engine)
	if err != nil {
		return nil, err
	}
	ks := kinds(d.Roles)
	precise := publishesEvents(d.Engine) && !d.NoKVEvents
	var plugins, profiles []any
	hasKind := map[string]bool{}
	for _, k := range ks {
		hasKind[k] = true
		plugins = append(plugins, doc{"name": k + "-pods", "type": "label-selector-filter",
			"parameters": doc{"matchLabels": doc{workerv1.LabelRoleKind: k}}})
		refs := []any{doc{"pluginRef": k + "-pods"}, doc{"pluginRef": "queue-scorer", "weight": 2},
			doc{"pluginRef": "kv-cache-utilization-scorer", "weight": 2}, doc{"pluginRef": "max-score-picker"}}
		// A decoder's prompt is already cached by its prefiller, so prefix affinity does not score it.
		if k != workerv1.RoleKindDecode.RouterSpelling() {
			refs = append(refs, doc{"pluginRef": "prefix-cache-scorer", "weight": 3})
		}
		profiles = append(profiles, doc{"name": k, "plugins": refs})
	}
	decode, prefill := workerv1.RoleKindDecode.RouterSpelling(), workerv1.RoleKindPrefill.RouterSpelling()
	prefixScorer := doc{"type": "prefix-cache-scorer"}
	if precise {
		selector := d.Selector()
		if hasKind[decode] {
			// Decoders publish no events; the producer does not dial them.
			selector += "," + workerv1.LabelRoleKind + "!=" + decode
		}
		plugins = append(plugins,
			doc{"type": "token-producer", "parameters": doc{"modelName": d.Model, "vllm": doc{"url": TokenizerEndpoint(d)}}},
			doc{"type": "endpoint-notification-source"},
			doc{"type": "precise-prefix-cache-producer", "parameters": doc{"kvEventsConfig": doc{
				"topicFilter": engine.KVEventsTopic, "concurrency": 4, "engineType": UpstreamEngine(d.Engine), "discoverPods": true,
				"podDiscoveryConfig": doc{"podLabelSelector": selector, "podNamespace": d.Namespace,
					"socketPort": engine.KVEventsPort, "replaySocketPort": engine.KVReplayPort},
			}}})
		prefixScorer["parameters"] = doc{"prefixMatchInfoProducerName": "precise-prefix-cache-producer"}
	} else {
		plugins = append(plugins, doc{"type": "approx-prefix-cache-producer"})
	}
	metricsSource := doc{"type": "metrics-data-source"}
	if d.ServingPort > 0 {
		metricsSource["parameters"] = doc{"port": d.ServingPort}
	}
	plugins = append(plugins, doc{"type": "queue-scorer"}, doc{"type": "kv-cache-utilization-scorer"},
		doc{"type": "max-score-picker"}, prefixScorer, metricsSource,
		doc{"type": "core-metrics-extractor", "parameters": extractorParameters(d.Engine, m, precise)})
	if hasKind[prefill] && hasKind[decode] {
		threshold := int32(DefaultNonCachedTokens)
		if d.DisaggregationThresholdTokens != nil {
			threshold = *d.DisaggregationThresholdTokens // 0 is kept: it turns splitting off
		}
		plugins = append(plugins,
			doc{"type": "prefix-based-pd-decider", "parameters": doc{"promptTokens": 0, "nonCachedTokens": threshold}},
			doc{"type": "disagg-profile-handler", "parameters": doc{
				"profiles": doc{prefill: prefill, decode: decode}, "deciders": doc{prefill: "prefix-based-pd-decider"}}})
	}
	out := doc{"apiVersion": "llm-d.ai/v1alpha1", "kind": "EndpointPickerConfig", "plugins": plugins, "schedulingProfiles": profiles}
	if precise {
		out["dataLayer"] = doc{"sources": []any{
			doc{"pluginRef": "metrics-data-source", "extractors": []any{doc{"pluginRef": "core-metrics-extractor"}}},
			doc{"pluginRef": "endpoint-notification-source", "extractors": []any{doc{"pluginRef": "precise-prefix-cache-producer"}}},
		}}
	}
	return yaml.Marshal(out)
}

// extractorParameters names the engine's metrics, replacing the extractor's built-in entry for it.
// Only the approximate producer sizes the cache from metrics. defaultEngine is written only for a
// non-vLLM engine: vllm is upstream's default, and writing it would roll every vLLM router.
func extractorParameters(e workerv1.Engine, m Metrics, precise bool) doc {
	name := UpstreamEngine(e)
	cfg := doc{"name": name, "queuedRequestsSpec": m.QueuedRequests, "runningRequestsSpec": m.RunningRequests, "kvUsageSpec": m.KVCacheUtilization}
	if !precise {
		for key, v := range map[string]string{"cacheInfoSpec": m.CacheInfo, "cacheBlockSizeSpec": m.CacheBlockSize, "cacheNumBlocksSpec": m.CacheNumBlocks} {
			if v != "" {
				cfg[key] = v
			}
		}
	}
	p := doc{"engineConfigs": []any{cfg}}
	if name != UpstreamEngine(workerv1.EngineVLLM) {
		p["defaultEngine"] = name
	}
	return p
}
