package cluster

import (
	"encoding/json"
	"net/http"
	"sync"
)

// ElasticEngine stands in for the native resize routes of every Elastic EP master on the stack
// (POST /scale_elastic_ep, /is_scaling_elastic_ep), keyed by the master's address as the request's
// host: it records each resize command and applies it, or refuses it as a test says.
type ElasticEngine struct {
	mu      sync.Mutex
	calls   map[string][]map[string]any
	refusal map[string]string
}

// Refuse makes the master at podAddress answer every resize with HTTP 503 carrying message; an
// empty message applies them again.
func (e *ElasticEngine) Refuse(podAddress, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.refusal == nil {
		e.refusal = map[string]string{}
	}
	e.refusal[podAddress] = message
}

// Calls are the resize commands (their JSON bodies) the master at podAddress received, in order.
func (e *ElasticEngine) Calls(podAddress string) []map[string]any {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]map[string]any(nil), e.calls[podAddress]...)
}

// serves reports whether path is one of the routes the engine answers.
func (e *ElasticEngine) serves(path string) bool {
	return path == "/scale_elastic_ep" || path == "/is_scaling_elastic_ep"
}

func (e *ElasticEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/is_scaling_elastic_ep" {
		_, _ = w.Write([]byte(`{"is_scaling_elastic_ep": false}`))
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	e.mu.Lock()
	if e.calls == nil {
		e.calls = map[string][]map[string]any{}
	}
	e.calls[r.Host] = append(e.calls[r.Host], body)
	refusal := e.refusal[r.Host]
	e.mu.Unlock()
	if refusal != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": refusal})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"message": "Scaled to the new data parallel size"})
}
