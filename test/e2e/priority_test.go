package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestThePriorityClassReachesEveryGroup: a deployment labelled with a Kueue WorkloadPriorityClass
// (kueue.x-k8s.io/priority-class, Kueue's own convention) gives the Workload of every replica group,
// of every role, that class and its value, and runs. A deployment naming a class that does not exist
// is refused naming the label; an edit of the label is refused with the way out.
func TestThePriorityClassReachesEveryGroup(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	class := ownName(t, "priority")
	const name = "prioritized"
	applyCluster(t, ctx, ns)
	queue(t, ctx, ownName(t, "cq"), a10gEntrance, ns, 8)
	wpc := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: 1000}
	if err := stack.Client.Create(ctx, wpc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		_ = stack.Client.Delete(context.Background(), wpc)
	})
	manifest := func(priorityClass string) string {
		return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: %s
  namespace: %s
  labels: {kueue.x-k8s.io/priority-class: %s}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: wide, replicas: 1, size: 2, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
    - {name: narrow, replicas: 2, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, name, ns, priorityClass)
	}

	t.Run("a class that does not exist is refused, naming the label", func(t *testing.T) {
		out := applyRefused(t, manifest(class+"-missing"))
		for _, want := range []string{"metadata.labels[kueue.x-k8s.io/priority-class]", fmt.Sprintf("no Kueue WorkloadPriorityClass %q exists", class+"-missing")} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl said %q, without %q", out, want)
			}
		}
	})

	kubectlApply(t, manifest(class))
	t.Run("every group's Workload has the class and its value, and the deployment runs", func(t *testing.T) {
		eventually(t, 3*time.Minute, "three Workloads of priority class "+class, func() error {
			wls, err := workloads(ctx, ns)
			if err != nil {
				return err
			}
			if len(wls) != 3 {
				return fmt.Errorf("%d Workloads, want one per replica group (3)", len(wls))
			}
			for _, wl := range wls {
				ref := wl.Spec.PriorityClassRef
				if ref == nil || ref.Kind != kueuev1beta2.WorkloadPriorityClassKind || ref.Name != class || wl.Spec.Priority == nil || *wl.Spec.Priority != 1000 {
					return fmt.Errorf("Workload %s: priorityClassRef %+v, priority %v; want WorkloadPriorityClass %s, 1000", wl.Name, ref, wl.Spec.Priority, class)
				}
			}
			return nil
		})
		eventually(t, 3*time.Minute, "the deployment's 4 Pods running", func() error { return running(ctx, ns, name, 4) })
	})

	t.Run("an edit of the class is refused with the way out", func(t *testing.T) {
		out := applyRefused(t, manifest(class+"-other"))
		if want := fmt.Sprintf("keeps the priority class it was created with; put back %q", class); !strings.Contains(out, want) {
			t.Errorf("kubectl said %q, without %q", out, want)
		}
	})
}
