package v1

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"
)

// keys are the JSON keys an object marshals to.
func keys(t *testing.T, v any) []string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// The field names are a contract: clients read them.
func TestTheSnapshotsJSONFields(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want []string
	}{
		{"an empty snapshot keeps partial and the timestamp, and drops empty lists", &ModelDeploymentMetrics{},
			[]string{"metadata", "partial", "timestamp"}},
		{"a full snapshot", &ModelDeploymentMetrics{Processing: []Gauge{{}}, Queueing: []Gauge{{}}, CacheHits: []CacheHit{{}},
			Latency: []Window{{}}, Traffic: []Window{{}}, Transfer: []Window{{}}, Missing: []Missing{{}}},
			[]string{"cacheHits", "latency", "metadata", "missing", "partial", "processing", "queueing", "timestamp", "traffic", "transfer"}},
		{"a gauge", Gauge{}, []string{"name", "observedAt", "podCount", "scope", "source", "unit", "value"}},
		{"a window", Window{}, []string{"name", "observedAt", "pod", "samples", "scope", "source", "unit", "value", "windowSeconds"}},
		{"a cache hit", CacheHit{}, []string{"hits", "observedAt", "pod", "podCount", "queries", "rate", "scope", "source", "unit", "windowSeconds"}},
		{"a missing entry without a Pod", Missing{}, []string{"reason", "source"}},
		{"a missing entry of a Pod", Missing{Pod: "p"}, []string{"pod", "reason", "source"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := keys(t, tc.v); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("keys %v, want %v", got, tc.want)
			}
		})
	}
}
