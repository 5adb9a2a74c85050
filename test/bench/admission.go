package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// LoadResult is what one open-loop load of server-side dry-run creates measured.
type LoadResult struct {
	Name      string
	Sent      int
	Refused   int
	FirstErr  string
	Latencies []time.Duration // of every request, answered or refused, sorted
}

// Percentile is the latency at p (0 < p ≤ 1) of the load's requests.
func (l LoadResult) Percentile(p float64) time.Duration {
	if len(l.Latencies) == 0 {
		return 0
	}
	i := int(float64(len(l.Latencies))*p+0.5) - 1
	return l.Latencies[min(max(i, 0), len(l.Latencies)-1)]
}

// DryRunLoad sends server-side dry-run creates of obj, each under a name of its own, at rate a
// second for d, without waiting for answers before sending the next (an open loop, as many clients
// applying at once would): what a bulk `kubectl apply --dry-run=server` of that many objects costs.
func DryRunLoad(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, rate int, d time.Duration, name string) LoadResult {
	res := LoadResult{Name: name}
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.Now().Add(d)
	for i := 0; time.Now().Before(end); i++ {
		<-tick.C
		o := obj.DeepCopy()
		o.SetName(fmt.Sprintf("%s-%06d", obj.GetName(), i))
		res.Sent++
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			_, err := dc.Resource(gvr).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			res.Latencies = append(res.Latencies, took)
			if err != nil {
				res.Refused++
				if res.FirstErr == "" {
					res.FirstErr = err.Error()
				}
			}
		}()
	}
	wg.Wait()
	slices.Sort(res.Latencies)
	return res
}

// DryRunOneByOne sends n server-side dry-run creates of obj one after another, each under a name
// of its own: the latency of a lone review.
func DryRunOneByOne(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, n int) LoadResult {
	res := LoadResult{Name: "one by one"}
	for i := range n {
		o := obj.DeepCopy()
		o.SetName(fmt.Sprintf("%s-one-%04d", obj.GetName(), i))
		start := time.Now()
		_, err := dc.Resource(gvr).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		res.Sent++
		res.Latencies = append(res.Latencies, time.Since(start))
		if err != nil {
			res.Refused++
			if res.FirstErr == "" {
				res.FirstErr = err.Error()
			}
		}
	}
	slices.Sort(res.Latencies)
	return res
}

// PrintLoads prints each load's requests, refusals and latencies, and what the first added at p99
// over the second (the same requests without mdplane's webhooks).
func PrintLoads(out io.Writer, rate int, d time.Duration, loads ...LoadResult) {
	fmt.Fprintf(out, "\nserver-side dry-run creates at %d a second for %s (open loop)\n\n", rate, d)
	fmt.Fprintf(out, "  %-52s %8s %8s %10s %10s %10s\n", "load", "sent", "refused", "p50", "p99", "max")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	for _, l := range loads {
		fmt.Fprintf(out, "  %-52s %8d %8d %10s %10s %10s\n", l.Name, l.Sent, l.Refused, ms(l.Percentile(0.5)), ms(l.Percentile(0.99)), ms(l.Percentile(1)))
	}
	for _, l := range loads {
		if l.FirstErr != "" {
			fmt.Fprintf(out, "  first refusal of %q: %s\n", l.Name, l.FirstErr)
		}
	}
}
