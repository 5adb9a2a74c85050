package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// standing returns the deployment's Pods that are not being deleted, by ordinal.
func standing(ctx context.Context, namespace, deployment string) (map[string]corev1.Pod, error) {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range ps {
		if p.DeletionTimestamp == nil {
			out[p.Labels[workerv1.LabelPodOrdinal]] = p
		}
	}
	return out, nil
}

func patchReplicas(t *testing.T, namespace, deployment string, replicas int) {
	t.Helper()
	if _, err := stack.Kubectl("patch", "modeldeployment", deployment, "-n", namespace, "--type=json",
		"-p", fmt.Sprintf(`[{"op":"replace","path":"/spec/roles/0/replicas","value":%d}]`, replicas)); err != nil {
		t.Fatal(err)
	}
}

// TestScaleWithoutRestarts: scaling up adds only the new ordinals; scaling down sheds the highest
// ordinals and deletes their Workloads; the survivors keep their Pods throughout.
func TestScaleWithoutRestarts(t *testing.T) {
	ctx := context.Background()
	const ns = "team-s"
	applyCluster(t, ctx, ns)
	queue(t, ctx, "rollout-scale", h20Entrance, ns, 8)
	kubectlApply(t, deploymentOnH20(ns, "scaled", "server Server 2 1"))
	defer tearDown(t, ctx, ns)

	phase := time.Now()
	eventually(t, 3*time.Minute, "two replicas running", func() error { return running(ctx, ns, "scaled", 2) })
	fmt.Printf("e2e figure: 2 replicas running in %s\n", time.Since(phase).Round(100*time.Millisecond))
	before, err := standing(ctx, ns, "scaled")
	if err != nil {
		t.Fatal(err)
	}

	phase = time.Now()
	patchReplicas(t, ns, "scaled", 4)
	eventually(t, 3*time.Minute, "four replicas running, the first two untouched", func() error {
		if err := running(ctx, ns, "scaled", 4); err != nil {
			return err
		}
		now, err := standing(ctx, ns, "scaled")
		if err != nil {
			return err
		}
		for ordinal, p := range before {
			if now[ordinal].UID != p.UID {
				return fmt.Errorf("replica r%s restarted: Pod %s became %s", ordinal, p.UID, now[ordinal].UID)
			}
		}
		return nil
	})

	fmt.Printf("e2e figure: scale 2→4 running in %s\n", time.Since(phase).Round(100*time.Millisecond))
	phase = time.Now()
	patchReplicas(t, ns, "scaled", 1)
	eventually(t, 3*time.Minute, "one replica left, r0 untouched, the departed groups' Workloads gone", func() error {
		ps, err := pods(ctx, ns, "scaled")
		if err != nil {
			return err
		}
		if len(ps) != 1 || ps[0].UID != before["0"].UID {
			return fmt.Errorf("%d Pods remain (want r0's %s)", len(ps), before["0"].UID)
		}
		for ordinal := int32(1); ordinal < 4; ordinal++ {
			wl := &kueuev1beta2.Workload{}
			err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workerv1.GroupName(ns, "scaled", "server", ordinal)}, wl)
			if err == nil {
				return fmt.Errorf("the Workload of departed replica r%d remains", ordinal)
			}
		}
		return nil
	})
	fmt.Printf("e2e figure: scale 4→1 settled (Pods and Workloads gone) in %s\n", time.Since(phase).Round(100*time.Millisecond))
}

// TestRollingEdit: an extraArgs edit on a three-replica role replaces one replica at a time, each
// replacement admitted before the next old replica leaves; never more than one replica missing.
func TestRollingEdit(t *testing.T) {
	ctx := context.Background()
	const ns, name = "team-r", "edited"
	applyCluster(t, ctx, ns)
	queue(t, ctx, "rollout-edit", h20Entrance, ns, 8)
	kubectlApply(t, deploymentOnH20(ns, name, "server Server 3 1"))
	defer tearDown(t, ctx, ns)
	eventually(t, 3*time.Minute, "three replicas running", func() error { return running(ctx, ns, name, 3) })
	// Watch the namespace's Pods: one ordered stream of departures, creations and admissions.
	wc, err := client.NewWithWatch(stack.Config, client.Options{Scheme: stack.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	initial := &corev1.PodList{}
	if err := wc.List(ctx, initial, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: name}); err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: name},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: initial.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var timeline []string
	record := func(format string, args ...any) {
		timeline = append(timeline, fmt.Sprintf("%6.2fs ", time.Since(start).Seconds())+fmt.Sprintf(format, args...))
	}
	fail := func(format string, args ...any) {
		t.Fatalf("%s; timeline:\n%s", fmt.Sprintf(format, args...), strings.Join(timeline, "\n"))
	}
	edited := func(p *corev1.Pod) bool {
		return strings.Contains(strings.Join(append(p.Spec.Containers[0].Command, p.Spec.Containers[0].Args...), " "), "--max-model-len 8192")
	}
	gated := func(p *corev1.Pod) bool {
		for _, g := range p.Spec.SchedulingGates {
			if g.Name == admissionGate {
				return true
			}
		}
		return false
	}
	type seen struct{ leaving, gated bool }
	state := map[string]seen{}
	podsNow := map[string]*corev1.Pod{}
	for i := range initial.Items {
		p := &initial.Items[i]
		podsNow[p.Name], state[p.Name] = p, seen{leaving: p.DeletionTimestamp != nil, gated: gated(p)}
	}
	departures := 0
	timeout := time.After(8 * time.Minute)
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-timeout:
			fail("rollout not done after 8 minutes")
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		ordinal, kind := p.Labels[workerv1.LabelPodOrdinal], "old"
		if edited(p) {
			kind = "new"
		}
		if ev.Type == watch.Deleted {
			delete(podsNow, p.Name)
			record("r%s: %s Pod gone", ordinal, kind)
			continue
		}
		podsNow[p.Name] = p
		before, known := state[p.Name]
		now := seen{leaving: p.DeletionTimestamp != nil, gated: gated(p)}
		state[p.Name] = now
		switch {
		case !known && kind == "new":
			record("r%s: new Pod created", ordinal)
		case now.leaving && !before.leaving && known:
			record("r%s: %s Pod leaving", ordinal, kind)
			if kind == "old" {
				departures++
				// The next old replica leaves only when every other replica is admitted.
				for _, q := range podsNow {
					if q.Labels[workerv1.LabelPodOrdinal] != ordinal && q.DeletionTimestamp == nil && gated(q) {
						fail("r%s left while r%s was not admitted", ordinal, q.Labels[workerv1.LabelPodOrdinal])
					}
				}
			}
		case before.gated && !now.gated:
			record("r%s: %s Pod admitted", ordinal, kind)
		}
		standingOrdinals, admittedNew := map[string]bool{}, 0
		for _, q := range podsNow {
			if q.DeletionTimestamp == nil {
				standingOrdinals[q.Labels[workerv1.LabelPodOrdinal]] = true
				if edited(q) && !gated(q) {
					admittedNew++
				}
			}
		}
		if len(standingOrdinals) < 2 {
			fail("%d of 3 replicas standing: more than one missing", len(standingOrdinals))
		}
		if admittedNew == 3 && len(podsNow) == 3 {
			break
		}
	}
	fmt.Printf("e2e rollout timeline (3 replicas, one at a time):\n%s\n", strings.Join(timeline, "\n"))
	if departures != 3 {
		fail("%d old replicas left, want 3", departures)
	}
	eventually(t, 3*time.Minute, "three replicas running the new arguments", func() error {
		if err := running(ctx, ns, name, 3); err != nil {
			return err
		}
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if !strings.Contains(strings.Join(append(p.Spec.Containers[0].Command, p.Spec.Containers[0].Args...), " "), "--max-model-len 8192") {
				return fmt.Errorf("Pod %s runs without the new arguments", p.Name)
			}
		}
		return nil
	})
}
