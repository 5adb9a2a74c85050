package cluster

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Exporter stands in for the engine of every Pod on the fake nodes, whose addresses lead nowhere:
// the stack translates every connection to one to it (serveFakePods), so mdplane-controllers' scrapes,
// probes, drain reads and resizes of those Pods reach it. It answers /metrics with the body set for
// the Pod address the request names as its host, else with Default, else 404; an Elastic EP
// master's resize routes through Elastic; and a group-forward probe's completion (vLLM's
// /v1/completions, SGLang's /generate) with an empty answer bound to no request, so the probe's leg
// stays Unknown as no engine answered it.
type Exporter struct {
	mu     sync.Mutex
	bodies map[string]body
	// Default answers for the Pods no test set a body for: on the stack, every engine's drain gauges
	// at 0, so a scale-down's drain read finds a seated replica idle (a test may make it busy).
	Default string
	// Elastic answers the Elastic EP masters' native resize routes.
	Elastic ElasticEngine
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

// body is what the exporter answers for an address, and since when.
type body struct {
	text string
	set  time.Time
}

// Set makes the exporter answer for the Pod address (ip:port) with text.
func (e *Exporter) Set(podAddress, text string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bodies == nil {
		e.bodies = map[string]body{}
	}
	e.bodies[podAddress] = body{text: text, set: time.Now()}
}

// Forget stops answering for the Pod address.
func (e *Exporter) Forget(podAddress string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.bodies, podAddress)
}

// forgetPod stops answering for every address of a deleted Pod's IP, except what was set since
// heldSince, when the next Pod holding that IP started (zero if none holds it). The stack calls it
// when a fake node's Pod is deleted: KWOK hands a freed address to the next Pod at once, which must
// not inherit a body a test set for the Pod before it, nor lose one set for itself before the
// deletion was seen.
func (e *Exporter) forgetPod(ip string, heldSince time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for address, b := range e.bodies {
		if host, _, err := net.SplitHostPort(address); err == nil && host == ip && (heldSince.IsZero() || b.set.Before(heldSince)) {
			delete(e.bodies, address)
		}
	}
}

func (e *Exporter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e.Elastic.serves(r.URL.Path) {
		e.Elastic.ServeHTTP(w, r)
		return
	}
	e.mu.Lock()
	b, ok := e.bodies[r.Host]
	text := b.text
	if !ok && e.Default != "" {
		text, ok = e.Default, true
	}
	e.mu.Unlock()
	if r.Method == http.MethodPost && (r.URL.Path == "/v1/completions" || r.URL.Path == "/generate") {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
		return
	}
	if !ok || r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	_, _ = w.Write([]byte(text))
}
