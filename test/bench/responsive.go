package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// responsive is the condition Crossplane sets False on a composite while its watch circuit breaker
// is open (events about it dropped but for one now and then).
const responsive = "Responsive"

// Responsiveness records every ModelDeployment seen with Responsive=False during a run.
type Responsiveness struct {
	mu     sync.Mutex
	opened map[string]responsiveSighting
	done   chan struct{}
}

type responsiveSighting struct {
	first   time.Time
	polls   int
	message string
}

// WatchResponsiveness reads every ModelDeployment's conditions each second until ctx ends or Stop.
func (r *Runner) WatchResponsiveness(ctx context.Context) *Responsiveness {
	w := &Responsiveness{opened: map[string]responsiveSighting{}, done: make(chan struct{})}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-w.done:
				return
			case <-tick.C:
			}
			list := &workerv1.ModelDeploymentList{}
			if err := r.c.List(ctx, list, client.InNamespace("")); err != nil {
				continue
			}
			for _, md := range list.Items {
				c := md.Status.GetCondition(responsive)
				if c.Status != corev1.ConditionFalse {
					continue
				}
				w.mu.Lock()
				key := md.Namespace + "/" + md.Name
				s, seen := w.opened[key]
				if !seen {
					s.first = time.Now()
				}
				s.polls++
				s.message = c.Message
				w.opened[key] = s
				w.mu.Unlock()
			}
		}
	}()
	return w
}

// Stop ends the watch.
func (w *Responsiveness) Stop() { close(w.done) }

// Print says which deployments Crossplane found unresponsive, and for how many seconds' polls.
func (w *Responsiveness) Print(out io.Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.opened) == 0 {
		fmt.Fprintln(out, "  no ModelDeployment was Responsive=False at any poll (once a second, the whole run)")
		return
	}
	names := make([]string, 0, len(w.opened))
	for n := range w.opened {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		s := w.opened[n]
		fmt.Fprintf(out, "  %s Responsive=False in %d polls, first at %s: %s\n", n, s.polls, s.first.Format(time.TimeOnly), s.message)
	}
}
