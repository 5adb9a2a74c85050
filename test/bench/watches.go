package bench

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// ClosedWatches counts, by resource, the watches the API server closed because their client took
// the events too slowly (apiserver_terminated_watchers_total): it closes a watch whose buffer of
// events is still full when it has the next one to send, and the client then watches or lists
// again. On two loaded cores that happens to the controllers' watches most; a fake node's KWOK whose
// watch is closed reads its Pods again and may play the pod-ready stage a second time for Pods it
// made Ready meanwhile, a write the API server refuses.
type ClosedWatches map[string]int

// WatchCloses reads the API server's count of closed watches now and returns what reads it again
// and gives the watches closed in between; nil when either read failed (the table then shows
// none).
func (r *Runner) WatchCloses(ctx context.Context) func() ClosedWatches {
	before, err := r.closedWatches(ctx)
	return func() ClosedWatches {
		after, err2 := r.closedWatches(ctx)
		if err := errors.Join(err, err2); err != nil {
			r.logf("the watches the API server closed are not counted: %v", err)
			return nil
		}
		return after.since(before)
	}
}

func (r *Runner) closedWatches(ctx context.Context) (ClosedWatches, error) {
	raw, err := apiServerMetrics(ctx, r.cs)
	if err != nil {
		return nil, err
	}
	return parseClosedWatches(string(raw)), nil
}

// parseClosedWatches reads apiserver_terminated_watchers_total from the API server's metrics, by
// resource name ("pods", "workloads"; resources of one name in two groups count together).
func parseClosedWatches(metrics string) ClosedWatches {
	out := ClosedWatches{}
	for line := range strings.SplitSeq(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, "apiserver_terminated_watchers_total{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		n, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		out[label(labels, "resource")] += int(n)
	}
	return out
}

// since is what closed after an earlier count.
func (c ClosedWatches) since(before ClosedWatches) ClosedWatches {
	out := ClosedWatches{}
	for resource, n := range c {
		if d := n - before[resource]; d > 0 {
			out[resource] = d
		}
	}
	return out
}

// resources are the resources any of the phases had a watch closed on, sorted.
func closedResources(phases []PhaseCosts) []string {
	seen := map[string]bool{}
	for _, p := range phases {
		for resource := range p.Costs.ClosedWatches {
			seen[resource] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}
