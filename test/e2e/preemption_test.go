package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
)

// TestAHigherPriorityDeploymentPreemptsReplicas: on a queue that preempts lower priorities (what
// instance-type-preemption: LowerPriority makes of a type's queue) and holds every set with the joint
// check, a higher-priority deployment that does not fit takes the quota of as many replicas of a
// lower-priority one as it needs. The preempted deployment keeps serving on the replica Kueue left it,
// untouched, and says who took its quota and why; once the preemptor goes, its replicas get the
// quota back and the word is cleared.
func TestAHigherPriorityDeploymentPreemptsReplicas(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	cq := ownName(t, "cq")
	applyCluster(t, ctx, ns)
	queue(t, ctx, cq, a10gEntrance, ns, 3, admissioncheck.CheckName)
	preemptWithinQueue(t, ctx, cq, kueuev1beta2.PreemptionPolicyLowerPriority)
	classes := map[string]int32{ownName(t, "low"): 100, ownName(t, "high"): 1000}
	var low, high string
	for class, value := range classes {
		wpc := &kueuev1beta2.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Value: value}
		if err := stack.Client.Create(ctx, wpc); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), wpc) })
		if value == 100 {
			low = class
		} else {
			high = class
		}
	}
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	manifest := func(name, class string, replicas int) string {
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
    - {name: server, replicas: %d, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, name, ns, class, replicas)
	}

	kubectlApply(t, manifest("batchy", low, 3))
	eventually(t, 3*time.Minute, "the lower-priority deployment's 3 replicas running on the queue's 3 GPUs", func() error { return running(ctx, ns, "batchy", 3) })
	before, err := pods(ctx, ns, "batchy")
	if err != nil {
		t.Fatal(err)
	}

	kubectlApply(t, manifest("urgent", high, 2))
	eventually(t, 3*time.Minute, "the higher-priority deployment's 2 replicas running", func() error { return running(ctx, ns, "urgent", 2) })

	t.Run("the preempted deployment keeps its last replica serving, untouched, and says who took the rest", func(t *testing.T) {
		eventually(t, 2*time.Minute, "batchy QuotaReserved False PreemptedInPart naming the preemptor", func() error {
			c, err := deploymentConditionOf(ctx, ns, "batchy", "QuotaReserved")
			if err != nil {
				return err
			}
			for _, want := range []string{"1 of 3 instances hold quota (Preempted: server 2)", "role server r", "of ModelDeployment " + ns + "/urgent",
				"priority class " + high + ", priority 1000", "it has a higher priority in the same ClusterQueue (reason InClusterQueue)"} {
				if c.Status != "False" || c.Reason != "PreemptedInPart" || !strings.Contains(c.Message, want) {
					return fmt.Errorf("QuotaReserved %+v, want False PreemptedInPart saying %q", c, want)
				}
			}
			return nil
		})
		now, err := pods(ctx, ns, "batchy")
		if err != nil {
			t.Fatal(err)
		}
		survivors := 0
		for _, p := range now {
			for _, b := range before {
				if p.UID == b.UID && p.DeletionTimestamp == nil && ready(p) {
					survivors++
				}
			}
		}
		if survivors != 1 {
			t.Errorf("%d of batchy's first Pods still serve, want the 1 Kueue did not preempt", survivors)
		}
		// Each replica reports in a write of its own, so the second may say it a moment after the
		// deployment does.
		eventually(t, time.Minute, "both preempted ModelReplicas of batchy saying who preempted them", func() error {
			var replicas v1alpha1.ModelReplicaList
			if err := stack.Client.List(ctx, &replicas, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: "batchy"}); err != nil {
				return err
			}
			told := 0
			for _, r := range replicas.Items {
				if strings.Contains(r.Status.PreemptedBy, "of ModelDeployment "+ns+"/urgent") {
					told++
				}
			}
			if told != 2 {
				return fmt.Errorf("%d of batchy's ModelReplicas say who preempted them, want the 2 preempted", told)
			}
			return nil
		})
	})

	t.Run("once the preemptor goes the replicas get the quota back and the word is cleared", func(t *testing.T) {
		if _, err := stack.Kubectl("delete", "modeldeployment", "urgent", "-n", ns, "--wait=false"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, "batchy's 3 replicas running again", func() error { return running(ctx, ns, "batchy", 3) })
		eventually(t, 2*time.Minute, "batchy QuotaReserved True, and no replica saying it was preempted", func() error {
			c, err := deploymentConditionOf(ctx, ns, "batchy", "QuotaReserved")
			if err != nil {
				return err
			}
			if c.Status != "True" {
				return fmt.Errorf("QuotaReserved %+v", c)
			}
			var replicas v1alpha1.ModelReplicaList
			if err := stack.Client.List(ctx, &replicas, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: "batchy"}); err != nil {
				return err
			}
			for _, r := range replicas.Items {
				if r.Status.PreemptedBy != "" {
					return fmt.Errorf("ModelReplica %s still says %q", r.Name, r.Status.PreemptedBy)
				}
			}
			return nil
		})
	})
}

// preemptWithinQueue sets a ClusterQueue's preemption within itself, as the queues controller does
// from instance-type-preemption.
func preemptWithinQueue(t *testing.T, ctx context.Context, clusterQueue string, policy kueuev1beta2.PreemptionPolicy) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq := &kueuev1beta2.ClusterQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: clusterQueue}, cq); err != nil {
			return err
		}
		cq.Spec.Preemption = &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: policy}
		return stack.Client.Update(ctx, cq)
	})
	if err != nil {
		t.Fatal(err)
	}
}
