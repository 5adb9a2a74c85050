package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// watchPods lists a deployment's Pods and watches them from that list on: one ordered stream, which
// carries on past the API server closing the watch (podStream).
func watchPods(t *testing.T, ctx context.Context, namespace, deployment string) (*corev1.PodList, watch.Interface) {
	t.Helper()
	wc, err := client.NewWithWatch(stack.Config, client.Options{Scheme: stack.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	selector := client.MatchingLabels{workerv1.LabelInstance: deployment}
	initial := &corev1.PodList{}
	if err := wc.List(ctx, initial, client.InNamespace(namespace), selector); err != nil {
		t.Fatal(err)
	}
	from := func(version string) (watch.Interface, error) {
		return wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(namespace), selector,
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: version}})
	}
	w, err := from(initial.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	s := &podStream{result: make(chan watch.Event), stop: make(chan struct{}), current: w}
	go s.follow(t, w, initial.ResourceVersion, from)
	return initial, s
}

// podStream is a Pod watch that survives the API server closing it, as it closes a watch it finds
// slow to read on a busy machine: it watches again from the last resourceVersion it delivered, as
// an informer does, so that no event is lost or told twice. A version the server no longer holds
// (410 Gone) fails the test, since events would be missing; the stream then ends.
type podStream struct {
	result   chan watch.Event
	stop     chan struct{}
	stopOnce sync.Once
	mu       sync.Mutex
	current  watch.Interface // the API server's watch being read
}

func (s *podStream) ResultChan() <-chan watch.Event { return s.result }

// Stop ends the stream: its channel closes once the watch being read stops.
func (s *podStream) Stop() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.mu.Lock()
		s.current.Stop()
		s.mu.Unlock()
	})
}

func (s *podStream) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *podStream) follow(t *testing.T, w watch.Interface, version string, from func(string) (watch.Interface, error)) {
	defer close(s.result)
	for {
		s.mu.Lock()
		s.current = w
		s.mu.Unlock()
		if s.stopped() {
			w.Stop()
			return
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				if status := apierrors.FromObject(ev.Object); apierrors.IsGone(status) || apierrors.IsResourceExpired(status) {
					if !s.stopped() {
						t.Errorf("the Pod watch could not resume from resourceVersion %s: %v", version, status)
					}
					w.Stop()
					return
				}
				continue
			}
			if p, ok := ev.Object.(*corev1.Pod); ok {
				version = p.ResourceVersion
			}
			select {
			case s.result <- ev:
			case <-s.stop:
				w.Stop()
				return
			}
		}
		if s.stopped() {
			return
		}
		var err error
		if w, err = from(version); err != nil {
			if !s.stopped() {
				t.Errorf("watching Pods again from resourceVersion %s: %v", version, err)
			}
			return
		}
	}
}

// watchInvariants follows every change to a deployment's Pods until the returned function is called,
// which fails the test with the first violation of the rollout invariants seen:
//   - no instance mixes configurations: the standing members of one ordinal run one command line;
//   - no Pod is updated in place: a Pod's containers never change after it was first seen;
//   - at most one replica of the role is missing at any time (replicas is what the test declared).
func watchInvariants(t *testing.T, ctx context.Context, namespace, deployment string, replicas int) func() {
	t.Helper()
	initial, w := watchPods(t, ctx, namespace, deployment)
	var mu sync.Mutex
	var violation string
	done := make(chan struct{})
	go func() {
		defer close(done)
		first := map[string]string{} // Pod UID -> containers as first seen
		pods := map[string]*corev1.Pod{}
		for i := range initial.Items {
			p := &initial.Items[i]
			pods[p.Name], first[string(p.UID)] = p, fmt.Sprint(p.Spec.Containers)
		}
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			containers := fmt.Sprint(p.Spec.Containers)
			if seen, ok := first[string(p.UID)]; ok && seen != containers {
				mu.Lock()
				if violation == "" {
					violation = fmt.Sprintf("Pod %s was updated in place", p.Name)
				}
				mu.Unlock()
			}
			first[string(p.UID)] = containers
			if ev.Type == watch.Deleted {
				delete(pods, p.Name)
			} else {
				pods[p.Name] = p
			}
			byOrdinal := map[string]map[string]bool{}
			for _, q := range pods {
				if q.DeletionTimestamp != nil {
					continue
				}
				o := q.Labels[workerv1.LabelPodOrdinal]
				if byOrdinal[o] == nil {
					byOrdinal[o] = map[string]bool{}
				}
				byOrdinal[o][strings.Join(append(q.Spec.Containers[0].Command, q.Spec.Containers[0].Args...), " ")] = true
			}
			mu.Lock()
			for o, configs := range byOrdinal {
				if len(configs) > 1 && violation == "" {
					violation = fmt.Sprintf("instance r%s mixes %d configurations", o, len(configs))
				}
			}
			if len(byOrdinal) < replicas-1 && violation == "" {
				violation = fmt.Sprintf("%d of %d replicas standing: more than one missing", len(byOrdinal), replicas)
			}
			mu.Unlock()
		}
	}()
	return func() {
		t.Helper()
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		if violation != "" {
			t.Fatalf("rollout invariant broken: %s", violation)
		}
	}
}
