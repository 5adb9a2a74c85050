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

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// applyCPUType creates a CPU-only InstanceType (its queues are the test's, not mdplane's) and
// publishes its entrance as its reconciler would; it is deleted when the test ends.
func applyCPUType(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: `+name+`}
spec: {acceleratable: false, os: linux, arch: amd64, unitResources: {cpu: "1", ram: 2Gi}, localStorage: 10Gi}
`)
	t.Cleanup(func() {
		_ = stack.Client.Delete(ctx, &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	it := &workerv1.InstanceType{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: name}, it); err != nil {
			return err
		}
		it.Status.Entrance, it.Status.Phase = workerv1.EntranceName(name), "Ready"
		return stack.Client.Status().Update(ctx, it)
	}); err != nil {
		t.Fatal(err)
	}
}

// elasticDeployment is an Elastic EP deployment of one role on the A10G type of examples/cluster.yaml;
// roleFields are the role's other fields.
func elasticDeployment(namespace, name, roleFields string) string {
	return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-30B-A3B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.29.0}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, %s}
`, name, namespace, roleFields)
}

// TestOnARoleCarryingElasticEpSizeInstanceTypeResourcesAndCommandAreFrozen: the rule refuses a size
// edit with its own message, and admits an identical update (the accelerator count the mutating
// webhook defaulted, "1", written back as the number 1 included) and a width increase.
func TestOnARoleCarryingElasticEpSizeInstanceTypeResourcesAndCommandAreFrozen(t *testing.T) {
	ctx := context.Background()
	const ns = "team-ee-2"
	applyCluster(t, ctx, ns)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	const head = "e2e-elastic-head-frozen"
	applyCPUType(t, ctx, head)
	width := func(n int, more string) string {
		return elasticDeployment(ns, "frozen", fmt.Sprintf("%selasticEp: {width: %d, headInstanceType: %s}", more, n, head))
	}
	kubectlApply(t, width(2, ""))
	eventually(t, time.Minute, "Crossplane's finalizer on the deployment", func() error {
		md, err := modelDeployment(ctx, ns, "frozen")
		if err != nil {
			return err
		}
		if len(md.Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	// kubectl apply sends nothing for an unchanged manifest: these are real writes of the same spec.
	if out, err := stack.Kubectl("annotate", "modeldeployment", "frozen", "-n", ns, "e2e/touched=1"); err != nil {
		t.Fatalf("an identical update was refused:\n%s", out)
	}
	kubectlApply(t, width(2, "resources: {accelerator: 1}, "))
	kubectlApply(t, width(3, "resources: {accelerator: 1}, "))
	out := applyRefused(t, width(3, "size: 2, "))
	if !strings.Contains(out, validation.ElasticFrozenMessage) || strings.Contains(out, "expected int") {
		t.Errorf("the size edit was not refused with the rule's message:\n%s", out)
	}
}
