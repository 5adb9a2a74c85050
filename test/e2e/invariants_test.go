package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// watchPods lists a deployment's Pods and watches them from that list on: one ordered stream.
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
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(namespace), selector,
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: initial.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	return initial, w
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
