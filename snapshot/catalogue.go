package snapshot

import (
	"strconv"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// list is the snapshot list an entry goes to.
type list int

const (
	processing list = iota
	queueing
	latency
	traffic
	transfer
)

// gaugeSpec is a gauge read from one series, summed over the Pods of a scope.
type gaugeSpec struct {
	list         list
	name, source string
	unit         string
}

// windowKind is how two reads of a series make a value.
type windowKind int

const (
	// mean is a histogram's Δsum/Δcount.
	mean windowKind = iota
	// rate is a counter's Δcount/Δt.
	rate
)

// windowSpec is a per-Pod window read from one series.
type windowSpec struct {
	list         list
	name, source string
	unit         string
	kind         windowKind
	// keep selects the series of a labeled counter; nil keeps all.
	keep func(map[string]string) bool
	// pair is the counter this labeled one is exported beside: when that one is present, this one's
	// absence means nothing was counted yet.
	pair string
}

// Units.
const (
	unitRequests = "requests"
	unitSeconds  = "seconds"
	unitPerSec   = "requests/second"
	unitErrors   = "errors/second"
	unitTokens   = "tokens"
)

// engineOf is the engine's lowercase name, as the catalogue compares it (the API spells vLLM and
// SGLang), "" for any other.
func engineOf(md *workerv1.ModelDeployment) string {
	switch {
	case strings.EqualFold(string(md.Spec.Engine.Name), "vllm"):
		return "vllm"
	case strings.EqualFold(string(md.Spec.Engine.Name), "sglang"):
		return "sglang"
	}
	return ""
}

// hasPair reports whether the deployment declares a prefill and a decode role.
func hasPair(md *workerv1.ModelDeployment) bool {
	var prefill, decode bool
	for _, r := range md.Spec.Roles {
		prefill = prefill || r.Kind == workerv1.RoleKindPrefill
		decode = decode || r.Kind == workerv1.RoleKindDecode
	}
	return prefill && decode
}

// gaugesOf are the gauges a Pod exports.
func gaugesOf(md *workerv1.ModelDeployment, t Target) []gaugeSpec {
	if t.Role == nil {
		switch md.Spec.Router.Name {
		case workerv1.RouterLLMD:
			return []gaugeSpec{{processing, "router-running", "llm_d_epp_request_running", unitRequests},
				{processing, "router-backends", "llm_d_epp_ready_endpoints", "backends"}}
		case workerv1.RouterVLLM:
			return []gaugeSpec{{processing, "router-running", "vllm_router_running_requests", unitRequests},
				{processing, "router-reported-workers", "vllm_router_active_workers", "workers"}}
		case workerv1.RouterSGLangGateway:
			return []gaugeSpec{{processing, "router-running", "smg_worker_requests_active", unitRequests},
				{processing, "router-backends", "smg_worker_pool_size", "backends"}}
		}
		return nil
	}
	switch engineOf(md) {
	case "vllm":
		return []gaugeSpec{{processing, "running", "vllm:num_requests_running", unitRequests},
			{queueing, "waiting", "vllm:num_requests_waiting", unitRequests}}
	case "sglang":
		g := []gaugeSpec{{processing, "running", "sglang:num_running_reqs", unitRequests},
			{queueing, "waiting", "sglang:num_queue_reqs", unitRequests}}
		if t.Role.Kind == workerv1.RoleKindDecode {
			g = append(g, gaugeSpec{queueing, "decode-transfer-waiting", "sglang:num_decode_transfer_queue_reqs", unitRequests})
		}
		return g
	}
	return nil
}

// ttft is the window name whose idleness stands for the Pod's.
const ttft = "ttft"

// windowsOf are the windows a Pod exports, TTFT first: the others consult its idleness.
func windowsOf(md *workerv1.ModelDeployment, t Target) []windowSpec {
	if t.Role == nil {
		return routerWindows(md)
	}
	switch engineOf(md) {
	case "vllm":
		return []windowSpec{
			{list: latency, name: ttft, source: "vllm:time_to_first_token_seconds", unit: unitSeconds},
			{list: latency, name: "tpot", source: "vllm:request_time_per_output_token_seconds", unit: unitSeconds},
			{list: latency, name: "itl", source: "vllm:inter_token_latency_seconds", unit: unitSeconds},
		}
	case "sglang":
		w := []windowSpec{
			{list: latency, name: ttft, source: "sglang:time_to_first_token_seconds", unit: unitSeconds},
			{list: latency, name: "itl", source: "sglang:inter_token_latency_seconds", unit: unitSeconds},
		}
		if t.Role.Kind == workerv1.RoleKindPrefill && hasPair(md) {
			w = append(w,
				windowSpec{list: transfer, name: "transfer-latency", source: "sglang:kv_transfer_latency_ms", unit: "milliseconds"},
				windowSpec{list: transfer, name: "transfer-speed", source: "sglang:kv_transfer_speed_gb_s", unit: "GB/second"},
				windowSpec{list: transfer, name: "transfer-size", source: "sglang:kv_transfer_total_mb", unit: "MB"},
				windowSpec{list: transfer, name: "transfer-failures", source: "sglang:num_transfer_failed_reqs_total", unit: unitErrors, kind: rate})
		}
		return w
	}
	return nil
}

func routerWindows(md *workerv1.ModelDeployment) []windowSpec {
	switch md.Spec.Router.Name {
	case workerv1.RouterLLMD:
		return []windowSpec{
			{list: latency, name: ttft, source: "llm_d_epp_request_ttft_seconds", unit: unitSeconds},
			{list: latency, name: "tpot", source: "llm_d_epp_request_streaming_tpot_seconds", unit: unitSeconds},
			{list: traffic, name: "requests", source: "llm_d_epp_request_total", unit: unitPerSec, kind: rate},
			{list: traffic, name: "request-errors", source: "llm_d_epp_request_error_total", unit: unitErrors, kind: rate, pair: "llm_d_epp_request_total"},
		}
	case workerv1.RouterVLLM:
		w := []windowSpec{
			{list: traffic, name: "successful-requests", source: "vllm_router_requests_total", unit: unitPerSec, kind: rate},
			{list: traffic, name: "errors", source: "vllm_router_request_errors_total", unit: unitErrors, kind: rate, pair: "vllm_router_requests_total"},
			{list: traffic, name: "retries-exhausted", source: "vllm_router_retries_exhausted_total", unit: "events/second", kind: rate, pair: "vllm_router_requests_total"},
		}
		if hasPair(md) {
			w = append(w,
				windowSpec{list: traffic, name: "pd-requests", source: "vllm_router_pd_requests_total", unit: unitPerSec, kind: rate},
				windowSpec{list: traffic, name: "pd-errors", source: "vllm_router_pd_errors_total", unit: unitErrors, kind: rate, pair: "vllm_router_pd_requests_total"})
		}
		return w
	case workerv1.RouterSGLangGateway:
		return []windowSpec{
			{list: traffic, name: "requests", source: "smg_router_requests_total", unit: unitPerSec, kind: rate},
			{list: traffic, name: "errors", source: "smg_router_request_errors_total", unit: unitErrors, kind: rate, pair: "smg_router_requests_total"},
			{list: traffic, name: "http-5xx-responses", source: "smg_http_responses_total", unit: "responses/second", kind: rate,
				keep: serverErrors, pair: "smg_router_requests_total"},
		}
	}
	return nil
}

// serverErrors keeps the responses whose status_code is 500 or more.
func serverErrors(l map[string]string) bool {
	code, err := strconv.Atoi(l["status_code"])
	return err == nil && code >= 500
}

// errorRatio is the window dividing a router's errors by its requests (sglang-gateway's pair).
var errorRatio = struct{ requests, errors string }{"requests", "errors"}

// counterNames are the spellings a counter is tried in: as given, and with or without _total.
func counterNames(name string) []string {
	if base, ok := strings.CutSuffix(name, "_total"); ok {
		return []string{name, base}
	}
	return []string{name, name + "_total"}
}
