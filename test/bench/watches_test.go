package bench

import (
	"maps"
	"strings"
	"testing"
	"time"
)

// The closed watches are read from apiserver_terminated_watchers_total by resource, and nothing else
// of the metrics counts.
func TestParseClosedWatchesReadsTheTerminatedWatchersByResource(t *testing.T) {
	metrics := `# HELP apiserver_terminated_watchers_total [STABLE] Counter of watchers closed due to unresponsiveness broken down by resource.
# TYPE apiserver_terminated_watchers_total counter
apiserver_terminated_watchers_total{group="",resource="pods"} 8
apiserver_terminated_watchers_total{group="kueue.x-k8s.io",resource="workloads"} 3
apiserver_watch_events_total{group="",resource="pods"} 32246
`
	got := parseClosedWatches(metrics)
	want := ClosedWatches{"pods": 8, "workloads": 3}
	if !maps.Equal(got, want) {
		t.Errorf("parseClosedWatches = %v, want %v", got, want)
	}
}

// A phase's closed watches are those the count grew by; a resource that grew by none is left out.
func TestClosedWatchesSinceIsWhatClosedInThePhase(t *testing.T) {
	before := ClosedWatches{"pods": 8, "workloads": 3}
	after := ClosedWatches{"pods": 14, "workloads": 3, "modelreplicas": 1}
	want := ClosedWatches{"pods": 6, "modelreplicas": 1}
	if got := after.since(before); !maps.Equal(got, want) {
		t.Errorf("since = %v, want %v", got, want)
	}
}

// The CPU table ends with the watches closed in each phase, by resource; a phase whose count could
// not be read shows a dash, and a table without any closed watch has no such rows.
func TestPrintCPUPrintsTheWatchesClosedInEachPhase(t *testing.T) {
	phases := []PhaseCosts{
		{Name: "mdplane", Costs: Costs{Elapsed: time.Second, ClosedWatches: ClosedWatches{"pods": 6}}},
		{Name: "joint floor", Costs: Costs{Elapsed: time.Second, ClosedWatches: ClosedWatches{}}},
		{Name: "replica floor", Costs: Costs{Elapsed: time.Second}},
	}
	var out strings.Builder
	PrintCPU(&out, phases)
	if !strings.Contains(out.String(), "watches the API server closed") {
		t.Fatalf("no closed watches in:\n%s", out.String())
	}
	found := false
	for line := range strings.Lines(out.String()) {
		if strings.Join(strings.Fields(line), " ") == "pods 6 0 -" {
			found = true
		}
	}
	if !found {
		t.Errorf("no line %q in:\n%s", "pods 6 0 -", out.String())
	}

	out.Reset()
	PrintCPU(&out, phases[1:])
	if strings.Contains(out.String(), "watches the API server closed") {
		t.Errorf("closed watches printed where no phase had one:\n%s", out.String())
	}
}
