package snapshot

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// twoReads assembles md from a first read of each Pod at t0 and a second one after span, and returns
// the second snapshot.
func twoReads(md *workerv1.ModelDeployment, c *chain, first, second []string, span time.Duration, t *testing.T) *metricsv1.ModelDeploymentMetrics {
	t.Helper()
	sel := Select(md, c.pods, c.owners)
	read := func(body []string, at time.Time) []Read {
		var reads []Read
		for _, target := range sel.Targets {
			reads = append(reads, Read{Target: target, Families: text(t, body...), At: at})
		}
		return reads
	}
	_, samples := Assemble(md, sel, read(first, t0), Samples{}, t0)
	m, _ := Assemble(md, sel, read(second, t0.Add(span)), samples, t0.Add(span))
	return m
}

func vllmBody(running, waiting, ttftCount, ttftSum, hits, queries float64) []string {
	return lines(
		[]string{"# TYPE vllm:num_requests_running gauge", `vllm:num_requests_running{model_name="m"} ` + f(running),
			"# TYPE vllm:num_requests_waiting gauge", `vllm:num_requests_waiting{model_name="m"} ` + f(waiting),
			"# TYPE vllm:prefix_cache_hits_total counter", "vllm:prefix_cache_hits_total " + f(hits),
			"# TYPE vllm:prefix_cache_queries_total counter", "vllm:prefix_cache_queries_total " + f(queries)},
		histogram("vllm:time_to_first_token_seconds", ttftCount, ttftSum),
		histogram("vllm:request_time_per_output_token_seconds", ttftCount, ttftSum/10),
		histogram("vllm:inter_token_latency_seconds", ttftCount*10, ttftSum/10),
	)
}

func f(v float64) string { return formatFloat(v) }

func TestTheSecondReadMakesWindowsAndSumsGauges(t *testing.T) {
	c := newChain()
	c.engine("md-server-0", "server", mdUID)
	c.engine("md-server-1", "server", mdUID)
	md := deployment(workerv1.EngineVLLM, "", role("server", "", 2))
	m := twoReads(md, c, vllmBody(1, 0, 10, 5, 10, 100), vllmBody(3, 2, 30, 25, 40, 200), 10*time.Second, t)
	at := metav1.NewTime(t0.Add(10 * time.Second))
	wantProcessing := []metricsv1.Gauge{{Name: "running", Source: "vllm:num_requests_running", Scope: "engine/server", Unit: "requests", Value: 6, PodCount: 2, ObservedAt: at}}
	wantQueueing := []metricsv1.Gauge{{Name: "waiting", Source: "vllm:num_requests_waiting", Scope: "engine/server", Unit: "requests", Value: 4, PodCount: 2, ObservedAt: at}}
	if diff := cmp.Diff(wantProcessing, m.Processing); diff != "" {
		t.Errorf("gauges with one name, source and scope are summed over Pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantQueueing, m.Queueing); diff != "" {
		t.Errorf("queueing (-want +got):\n%s", diff)
	}
	ttft := metricsv1.Window{Name: "ttft", Pod: "md-server-0", Source: "vllm:time_to_first_token_seconds", Scope: "engine/server",
		Unit: "seconds", Value: 1, Samples: 20, WindowSeconds: 10, ObservedAt: at}
	if len(m.Latency) != 6 || !cmp.Equal(ttft, m.Latency[2]) {
		t.Errorf("ttft is Δsum/Δcount over the window, sorted by pod and name: %+v", m.Latency)
	}
	hit := metricsv1.CacheHit{Pod: "md-server-0", Source: "vllm:prefix_cache", Scope: "local-prefix", Unit: "tokens",
		Hits: 30, Queries: 100, Rate: 0.3, WindowSeconds: 10, PodCount: 1, ObservedAt: at}
	if len(m.CacheHits) != 2 || !cmp.Equal(hit, m.CacheHits[0]) {
		t.Errorf("cache hit rate is Δhits/Δqueries: %+v", m.CacheHits)
	}
	wantMissing := []metricsv1.Missing{
		{Pod: "md-server-0", Source: "vllm:external_prefix_cache", Reason: "external prefix cache is not in use on this Pod"},
		{Pod: "md-server-1", Source: "vllm:external_prefix_cache", Reason: "external prefix cache is not in use on this Pod"},
	}
	if diff := cmp.Diff(wantMissing, m.Missing); diff != "" || m.Partial {
		t.Errorf("an external store without a pool is noted and leaves the snapshot whole (-want +got):\n%s partial=%v", diff, m.Partial)
	}
	if m.Kind != "ModelDeploymentMetrics" || m.APIVersion != "metrics.worker.gpustack.ai/v1" || m.Name != "md" || m.Namespace != "team-a" || !m.Timestamp.Equal(&at) {
		t.Errorf("object identity: %+v", m.ObjectMeta)
	}
}

func TestWindowRules(t *testing.T) {
	busy := vllmBody(1, 0, 10, 5, 10, 100)
	cases := []struct {
		name          string
		first, second []string
		span          time.Duration
		want          []metricsv1.Missing
		partial       bool
	}{
		{name: "the first read awaits a second counter sample and is partial", first: nil, second: busy, span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:inter_token_latency_seconds", Reason: "awaiting a second counter sample"},
				{Pod: "p", Source: "vllm:prefix_cache", Reason: "awaiting a second counter sample"},
				{Pod: "p", Source: "vllm:request_time_per_output_token_seconds", Reason: "awaiting a second counter sample"},
				{Pod: "p", Source: "vllm:time_to_first_token_seconds", Reason: "awaiting a second counter sample"},
			}, partial: true},
		{name: "reads more than five minutes apart make no window", first: busy, second: vllmBody(1, 0, 20, 9, 20, 200), span: 5*time.Minute + time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:inter_token_latency_seconds", Reason: "awaiting a second counter sample"},
				{Pod: "p", Source: "vllm:prefix_cache", Reason: "awaiting a second counter sample"},
				{Pod: "p", Source: "vllm:request_time_per_output_token_seconds", Reason: "awaiting a second counter sample"},
				{Pod: "p", Source: "vllm:time_to_first_token_seconds", Reason: "awaiting a second counter sample"},
			}, partial: true},
		{name: "a counter going down is a reset", first: busy, second: vllmBody(1, 0, 5, 1, 1, 10), span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:inter_token_latency_seconds", Reason: "counter reset"},
				{Pod: "p", Source: "vllm:prefix_cache", Reason: "counter reset or incompatible denominator"},
				{Pod: "p", Source: "vllm:request_time_per_output_token_seconds", Reason: "counter reset"},
				{Pod: "p", Source: "vllm:time_to_first_token_seconds", Reason: "counter reset"},
			}, partial: true},
		{name: "more hits than queries is an incompatible denominator", first: busy, second: vllmBody(1, 0, 11, 6, 60, 110), span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:prefix_cache", Reason: "counter reset or incompatible denominator"},
			}, partial: true},
		{name: "an idle window is noted and leaves the snapshot whole", first: busy, second: busy, span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:inter_token_latency_seconds", Reason: "idle sampling window"},
				{Pod: "p", Source: "vllm:prefix_cache", Reason: "idle sampling window"},
				{Pod: "p", Source: "vllm:request_time_per_output_token_seconds", Reason: "idle sampling window"},
				{Pod: "p", Source: "vllm:time_to_first_token_seconds", Reason: "idle sampling window"},
			}},
		{name: "a busy Pod with no cache queries says so and is partial", first: busy, second: vllmBody(1, 0, 11, 6, 10, 100), span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:prefix_cache", Reason: "no queries in the sampling window"},
			}, partial: true},
		{name: "an absent gauge is named, and partial",
			first: busy[2:], second: vllmBody(1, 0, 11, 6, 11, 101)[2:], span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "vllm:external_prefix_cache", Reason: ReasonExternalCacheAbsent},
				{Pod: "p", Source: "vllm:num_requests_running", Reason: "metric is absent"},
			}, partial: true},
		{name: "a Pod with no cache counter at all is missing its cache-hit counters",
			first: busy[:4], second: busy[:4], span: time.Second,
			want: []metricsv1.Missing{
				{Pod: "p", Source: "cache-hit counters", Reason: "metric is absent"},
				{Pod: "p", Source: "vllm:inter_token_latency_seconds", Reason: "metric is absent"},
				{Pod: "p", Source: "vllm:request_time_per_output_token_seconds", Reason: "metric is absent"},
				{Pod: "p", Source: "vllm:time_to_first_token_seconds", Reason: "metric is absent"},
			}, partial: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain()
			c.engine("p", "server", mdUID)
			md := deployment(workerv1.EngineVLLM, "", role("server", "", 1))
			var m *metricsv1.ModelDeploymentMetrics
			if tc.first == nil {
				sel := Select(md, c.pods, c.owners)
				m, _ = Assemble(md, sel, []Read{{Target: sel.Targets[0], Families: text(t, tc.second...), At: t0}}, Samples{}, t0)
			} else {
				m = twoReads(md, c, tc.first, tc.second, tc.span, t)
			}
			if diff := cmp.Diff(tc.want, m.Missing); diff != "" || m.Partial != tc.partial {
				t.Errorf("missing (-want +got):\n%s\npartial = %v, want %v", diff, m.Partial, tc.partial)
			}
		})
	}
}

func TestSamplesOlderThanTenMinutesArePruned(t *testing.T) {
	c := newChain()
	c.engine("p", "server", mdUID)
	md := deployment(workerv1.EngineVLLM, "", role("server", "", 1))
	sel := Select(md, c.pods, c.owners)
	prev := Samples{"gone/pod/source": {At: t0.Add(-10*time.Minute - time.Second)}, "kept/pod/source": {At: t0.Add(-10 * time.Minute)}}
	_, next := Assemble(md, sel, nil, prev, t0)
	if _, ok := next["gone/pod/source"]; ok {
		t.Error("a sample older than ten minutes is kept")
	}
	if _, ok := next["kept/pod/source"]; !ok {
		t.Error("a sample of ten minutes is dropped")
	}
	if _, ok := prev["gone/pod/source"]; !ok {
		t.Error("Assemble changed the samples it was given")
	}
	_, next = Assemble(md, sel, []Read{{Target: sel.Targets[0], Families: text(t, vllmBody(1, 0, 1, 1, 1, 1)...), At: t0}}, Samples{}, t0)
	if _, ok := next["md-uid/uid-p/vllm:time_to_first_token_seconds"]; !ok {
		t.Errorf("samples are keyed <md UID>/<pod UID>/<source or scope>: %v", next)
	}
	if _, ok := next["md-uid/uid-p/local-prefix"]; !ok {
		t.Errorf("cache samples are keyed by scope: %v", next)
	}
}

func TestAScrapeFailureIsAMissingScrapeEntry(t *testing.T) {
	c := newChain()
	c.engine("p", "server", mdUID)
	md := deployment(workerv1.EngineVLLM, "", role("server", "", 1))
	sel := Select(md, c.pods, c.owners)
	m, _ := Assemble(md, sel, []Read{{Target: sel.Targets[0], Err: "metrics endpoint returned HTTP 500", At: t0}}, Samples{}, t0)
	want := []metricsv1.Missing{{Pod: "p", Source: "scrape", Reason: "metrics endpoint returned HTTP 500"}}
	if diff := cmp.Diff(want, m.Missing); diff != "" || !m.Partial {
		t.Errorf("(-want +got):\n%s partial=%v", diff, m.Partial)
	}
}

func TestRouterTraffic(t *testing.T) {
	gateway := func(requests, errors, ok200, err503 float64) []string {
		return []string{
			"smg_worker_requests_active 2", "smg_worker_pool_size 3",
			"# TYPE smg_router_requests_total counter", "smg_router_requests_total " + formatFloat(requests),
			"# TYPE smg_router_request_errors_total counter", `smg_router_request_errors_total{kind="x"} ` + formatFloat(errors),
			"# TYPE smg_http_responses_total counter",
			`smg_http_responses_total{status_code="200"} ` + formatFloat(ok200),
			`smg_http_responses_total{status_code="503"} ` + formatFloat(err503),
		}
	}
	c := newChain()
	c.router("r", workerv1.RouterSGLangGateway, "md-router")
	md := deployment(workerv1.EngineSGLang, workerv1.RouterSGLangGateway)
	m := twoReads(md, c, gateway(100, 10, 90, 5), gateway(200, 30, 170, 15), 10*time.Second, t)
	got := map[string][2]float64{}
	for _, w := range m.Traffic {
		got[w.Name+" "+w.Unit+" "+w.Source] = [2]float64{w.Value, w.Samples}
	}
	want := map[string][2]float64{
		"requests requests/second smg_router_requests_total":                             {10, 100},
		"errors errors/second smg_router_request_errors_total":                           {2, 20},
		"http-5xx-responses responses/second smg_http_responses_total":                   {1, 10},
		"error-ratio fraction smg_router_requests_total+smg_router_request_errors_total": {0.2, 100},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rates are Δcount/Δt, 5xx counts status ≥ 500, the error ratio divides errors by requests (-want +got):\n%s", diff)
	}
	if len(m.Processing) != 2 || m.Processing[0].Name != "router-backends" || m.Processing[0].Unit != "backends" || m.Processing[0].Scope != "router" {
		t.Errorf("router gauges: %+v", m.Processing)
	}

	onlyRequests := []string{"# TYPE smg_router_requests_total counter", "smg_router_requests_total 1", "smg_worker_requests_active 0", "smg_worker_pool_size 1"}
	m = twoReads(md, c, onlyRequests, onlyRequests, time.Second, t)
	wantMissing := []metricsv1.Missing{
		{Pod: "r", Source: "smg_http_responses_total", Reason: "labeled counter not yet exported beside its read pair"},
		{Pod: "r", Source: "smg_router_request_errors_total", Reason: "labeled counter not yet exported beside its read pair"},
	}
	if diff := cmp.Diff(wantMissing, m.Missing); diff != "" || m.Partial {
		t.Errorf("a labeled counter not yet exported beside its pair leaves the snapshot whole (-want +got):\n%s partial=%v", diff, m.Partial)
	}
}

func TestSGLangCacheTiers(t *testing.T) {
	body := func(input, device, host float64) []string {
		return lines([]string{"sglang:num_running_reqs 1", "sglang:num_queue_reqs 0",
			"# TYPE sglang:prefill_effective_tokens_total counter",
			`sglang:prefill_effective_tokens_total{mode="input"} ` + formatFloat(input),
			`sglang:prefill_effective_tokens_total{mode="device_hit"} ` + formatFloat(device),
			`sglang:prefill_effective_tokens_total{mode="host_hit"} ` + formatFloat(host)},
			histogram("sglang:time_to_first_token_seconds", input, input), histogram("sglang:inter_token_latency_seconds", input, input))
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{name: "a Pod without a host tier reads the device tier only", want: []string{"device-prefix 0.25"}},
		{name: "--enable-hierarchical-cache builds the host tier", args: []string{"--enable-hierarchical-cache"}, want: []string{"device-prefix 0.25", "host-prefix 0.25"}},
		{name: "--radix-cache-backend flexkv builds the host tier", args: []string{"--radix-cache-backend", "flexkv"}, want: []string{"device-prefix 0.25", "host-prefix 0.25"}},
		{name: "a unique prefix of --enable-hierarchical-cache counts, as SGLang reads it", args: []string{"--enable-hier"}, want: []string{"device-prefix 0.25", "host-prefix 0.25"}},
		{name: "--hicache-storage-backend builds the storage tier", args: []string{"--hicache-storage-backend=mooncake"}, want: []string{"device-prefix 0.25", "storage-prefix 0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain()
			c.engine("p", "server", mdUID).Spec.Containers = []corev1.Container{{Name: "engine", Args: tc.args}}
			md := deployment(workerv1.EngineSGLang, "", role("server", "", 1))
			m := twoReads(md, c, body(10, 0, 0), body(30, 10, 10), time.Second, t)
			var got []string
			for _, h := range m.CacheHits {
				got = append(got, h.Scope+" "+formatFloat(h.Rate))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			for _, miss := range m.Missing {
				if miss.Reason != ReasonTierNotBuilt {
					t.Errorf("unexpected missing entry %+v", miss)
				}
			}
			if m.Partial {
				t.Error("a tier the Pod does not build leaves the snapshot whole")
			}
		})
	}
}

func TestUnavailable(t *testing.T) {
	c := newChain()
	a, b := c.engine("a", "server", mdUID), c.engine("b", "server", mdUID)
	md := deployment(workerv1.EngineVLLM, "", role("server", "", 2))
	sel := Select(md, c.pods, c.owners)
	cases := []struct {
		name  string
		sel   Selection
		reads []Read
		want  string
	}{
		{name: "no owned Pod is unavailable", sel: Selection{}, want: "ModelDeployment has no owned metrics Pods"},
		{name: "no readable Pod is unavailable with the first Pod's error", sel: sel,
			reads: []Read{{Target: Target{Pod: a}, Err: "metrics endpoint returned HTTP 500"}, {Target: Target{Pod: b}, Err: "pod has no ready advertised metrics endpoint"}},
			want:  "all ModelDeployment metrics Pods are unreadable: metrics endpoint returned HTTP 500"},
		{name: "one readable Pod is enough", sel: sel,
			reads: []Read{{Target: Target{Pod: a}, Err: "metrics endpoint returned HTTP 500"}, {Target: Target{Pod: b}, Families: Families{}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, _ := Unavailable(tc.sel, tc.reads)
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVLLMExternalStore(t *testing.T) {
	body := func(n float64) []string {
		return lines(vllmBody(1, 0, n, n, n, 10*n), []string{
			"# TYPE vllm:external_prefix_cache_hits_total counter", "vllm:external_prefix_cache_hits_total " + formatFloat(n),
			"# TYPE vllm:external_prefix_cache_queries_total counter", "vllm:external_prefix_cache_queries_total " + formatFloat(2*n)})
	}
	for _, tc := range []struct {
		name string
		pool bool
		kind workerv1.RoleKind
		args []string
		want string
	}{
		{name: "a Pod with a pool and a KV connector reads the external store", pool: true, args: []string{"--kv-transfer-config", "{}"}, want: "external-store 0.5"},
		{name: "vLLM's underscore spelling of the connector counts", pool: true, args: []string{"--kv_transfer_config={}"}, want: "external-store 0.5"},
		{name: "a Pod without a pool has no external store", args: []string{"--kv-transfer-config", "{}"}, want: ReasonExternalCacheAbsent},
		{name: "the decode half of a pair has no external store", pool: true, kind: workerv1.RoleKindDecode, args: []string{"--kv-transfer-config", "{}"}, want: ReasonExternalCacheAbsent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain()
			c.engine("p", "server", mdUID).Spec.Containers = []corev1.Container{{Name: "engine", Args: tc.args}}
			md := deployment(workerv1.EngineVLLM, "", role("server", tc.kind, 1))
			if tc.pool {
				md.Spec.KVCache = &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "b"}}
			}
			m := twoReads(md, c, body(10), body(20), time.Second, t)
			got := ""
			for _, h := range m.CacheHits {
				if h.Scope == "external-store" {
					got = h.Scope + " " + formatFloat(h.Rate)
				}
			}
			for _, miss := range m.Missing {
				if miss.Source == "vllm:external_prefix_cache" {
					got = miss.Reason
				}
			}
			if got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
