package cluster

import (
	"net/http"
	"sync"
)

// Exporter stands in for the /metrics of every Pod on the stack, whose KWOK addresses lead nowhere:
// mdplane-controllers dials it for each Pod it scrapes (--metrics-scrape-dial-override, a test-only
// flag), and it answers each request with the body set for the Pod address the request names as its
// host, else with Default, else 404.
type Exporter struct {
	mu     sync.Mutex
	bodies map[string]string
	// Default answers for the Pods no test set a body for: on the stack, every engine's drain gauges
	// at 0, so a scale-down's drain read finds a seated replica idle (a test may make it busy).
	Default string
}

// IdleGauges are vLLM's and SGLang's drain gauges (functions/render-roles DrainGauges), all 0.
const IdleGauges = `vllm:num_requests_running 0
vllm:num_requests_waiting 0
sglang:num_running_reqs 0
sglang:num_queue_reqs 0
sglang:num_prefill_bootstrap_queue_reqs 0
sglang:num_prefill_inflight_queue_reqs 0
sglang:num_decode_prealloc_queue_reqs 0
sglang:num_decode_transfer_queue_reqs 0
`

// Set makes the exporter answer for the Pod address (ip:port) with body.
func (e *Exporter) Set(podAddress, body string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bodies == nil {
		e.bodies = map[string]string{}
	}
	e.bodies[podAddress] = body
}

// Forget stops answering for the Pod address.
func (e *Exporter) Forget(podAddress string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.bodies, podAddress)
}

func (e *Exporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	body, ok := e.bodies[r.Host]
	if !ok && e.Default != "" {
		body, ok = e.Default, true
	}
	e.mu.Unlock()
	if !ok || r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(body))
}
