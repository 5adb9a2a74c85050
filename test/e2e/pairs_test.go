package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestCoherentPairRollout: a vLLM-Ascend prefill/decode pair under llm-d-router shares one transfer
// document, so a degree edit of its decode half rolls both halves; on every change of the pair's Pods
// during that rollout, the Pods the router's endpoint selector (its ConfigMap's, read from the stack)
// selects carry one transfer configuration, and at the end all four replicas of the new one are
// selected; the rollout invariants hold per role (one configuration per instance, no Pod changed in
// place, at most one replica of a role missing).
func TestCoherentPairRollout(t *testing.T) {
	parallelLong(t)
	exclusive(t, "the ascend-910b NPU group")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const typeName, name = "e2e-pair-910b-linux-arm64", "vasc"
	ascendType(t, ctx, ns, typeName, 2)
	manifest := func(decodeTP int) string {
		return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: quay.io/ascend/vllm-ascend:v0.11.0}
  router: {name: llm-d-router}
  roles:
    - {name: prefill, kind: Prefill, replicas: 2, instanceType: %s, resources: {accelerator: 2}, extraArgs: [--tensor-parallel-size, "2"]}
    - {name: decode, kind: Decode, replicas: 2, instanceType: %s, resources: {accelerator: 2}, extraArgs: [--tensor-parallel-size, "%d"]}
`, name, ns, typeName, typeName, decodeTP)
	}
	kubectlApply(t, manifest(2))
	runningPods(t, ctx, ns, name, "prefill", 2)
	runningPods(t, ctx, ns, name, "decode", 2)
	routerSettles(t, ctx, ns, name, llmdSelector)

	selector := routerSelector(t, ctx, ns, name)
	if !strings.Contains(selector.String(), workerv1.LabelTransferRouted+"=true") {
		t.Fatalf("the router's endpoint selector %q does not select by %s", selector, workerv1.LabelTransferRouted)
	}
	var oldConfig string
	eventually(t, time.Minute, "all four replicas of the one configuration routed", func() error {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		configs, selected := selectedConfigs(selector, ps)
		if len(configs) != 1 || configs[0] == "" || selected != 4 {
			return fmt.Errorf("%d Pods selected, of configurations %v (want the four, on one document)", selected, configs)
		}
		oldConfig = configs[0]
		return nil
	})

	// The rollout invariants, per role: both roles roll, each one replica at a time.
	invariants := watchChaos(t, ctx, ns, name, []*chaosRole{{name: "prefill", replicas: 2, size: 1}, {name: "decode", replicas: 2, size: 1}})
	invariants.permit(func(w *chaosWatch) { w.replacing["prefill"], w.replacing["decode"] = true, true })
	initial, w := watchPods(t, ctx, ns, name)
	defer w.Stop()
	current := map[string]*corev1.Pod{}
	for i := range initial.Items {
		current[initial.Items[i].Name] = &initial.Items[i]
	}
	kubectlApply(t, manifest(1))
	start := time.Now()
	var timeline []string
	last, events, gaps := oldConfig, 0, 0
	var engines, newStanding, leaving int // of the last event: the rollout's progress
	timeout := time.After(6 * time.Minute)
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-timeout:
			t.Fatalf("the pair's rollout not done after 6 minutes (%d Pod events; %d engine Pods, %d of the new configuration routed, %d leaving); routing timeline:\n%s\n%s",
				events, engines, newStanding, leaving, strings.Join(timeline, "\n"), chaosDiagnosis(ns))
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		events++
		if ev.Type == watch.Deleted {
			delete(current, p.Name)
		} else {
			current[p.Name] = p
		}
		list := make([]corev1.Pod, 0, len(current))
		for _, q := range current {
			list = append(list, *q)
		}
		configs, selected := selectedConfigs(selector, list)
		if len(configs) > 1 {
			t.Fatalf("%.2fs after the edit, on %s of Pod %s, the router selects Pods of %d transfer configurations %v; routing timeline:\n%s",
				time.Since(start).Seconds(), ev.Type, p.Name, len(configs), configs, strings.Join(timeline, "\n"))
		}
		now := ""
		if len(configs) == 1 {
			now = configs[0]
		}
		if now != last {
			if now == "" {
				gaps++
			}
			timeline = append(timeline, fmt.Sprintf("%6.2fs  routed %q (%d Pods selected)", time.Since(start).Seconds(), now, selected))
			last = now
		}
		// The router's own Pod carries the deployment's instance label too and is replaced on its own
		// schedule: the rollout is done when the engines are.
		engines, newStanding, leaving = 0, 0, 0
		for _, q := range current {
			if kind := q.Labels[workerv1.LabelRoleKind]; kind != "prefill" && kind != "decode" {
				continue
			}
			engines++
			switch {
			case q.DeletionTimestamp != nil:
				leaving++
			case transferDegrees(q) != oldConfig && q.Labels[workerv1.LabelTransferRouted] == "true":
				newStanding++
			}
		}
		if newStanding == 4 && leaving == 0 && engines == 4 {
			break
		}
	}
	if violations := invariants.stop(); len(violations) > 0 {
		events, _ := stack.Kubectl("get", "replicasets,events", "-n", ns, "-o", "wide")
		t.Fatalf("rollout invariants broken: %s\n%s\n%s", strings.Join(violations, "; "), chaosDiagnosis(ns), events)
	}
	if last == oldConfig || last == "" {
		t.Fatalf("the rollout ended routing %q, not the new configuration; routing timeline:\n%s", last, strings.Join(timeline, "\n"))
	}
	fmt.Printf("e2e coherent pair: decode TP 2→1 rolled 2 prefill + 2 decode replicas in %.1fs; %d Pod events, each with one transfer configuration selected; %d moments with none selected; routing timeline:\n%s\n",
		time.Since(start).Seconds(), events, gaps, strings.Join(timeline, "\n"))
	eventually(t, time.Minute, "the switch recorded as an event on the deployment", func() error {
		list := &corev1.EventList{}
		if err := stack.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == "TransferConfigurationRouted" && e.InvolvedObject.Name == name {
				return nil
			}
		}
		return fmt.Errorf("no TransferConfigurationRouted event on %s", name)
	})
}

// routerSelector is the endpoint selector of the deployment's llm-d-router, from its ConfigMap.
func routerSelector(t *testing.T, ctx context.Context, namespace, deployment string) labels.Selector {
	t.Helper()
	var selector labels.Selector
	eventually(t, 2*time.Minute, "the router's ConfigMap", func() error {
		cm := &corev1.ConfigMap{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment + "-router"}, cm); err != nil {
			return err
		}
		s, err := labels.Parse(cm.Data["endpoint-selector"])
		selector = s
		return err
	})
	return selector
}

// legDegrees are the two halves' degrees in vLLM-Ascend's leg document as rendered (keys sorted).
var legDegrees = regexp.MustCompile(`"decode":\{[^}]*\},"prefill":\{[^}]*\}`)

// transferDegrees is the transfer configuration a Pod was started with, read from its command line
// independently of mdplane's own reading: the degrees both halves' documents carry.
func transferDegrees(p *corev1.Pod) string {
	return legDegrees.FindString(argsOf(p))
}

// selectedConfigs is the distinct transfer configurations of the prefill and decode Pods selector
// selects (leaving ones included: the router may still hold them), and how many Pods it selects.
func selectedConfigs(selector labels.Selector, pods []corev1.Pod) ([]string, int) {
	set, selected := map[string]bool{}, 0
	for _, p := range pods {
		if !selector.Matches(labels.Set(p.Labels)) {
			continue
		}
		selected++
		if kind := p.Labels[workerv1.LabelRoleKind]; kind == "prefill" || kind == "decode" {
			set[transferDegrees(&p)] = true
		}
	}
	out := make([]string, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	sort.Strings(out)
	return out, selected
}
