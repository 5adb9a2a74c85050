package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
)

// managedQueuesLabel marks the InstanceTypes whose queues the stack's mdplane manages.
const managedQueuesLabel = "mdplane.test/managed-queues"

// applyManagedType creates namespace and an InstanceType whose queues mdplane manages, with spec
// (YAML under spec:), then publishes what the device-discovery reconciler would: the accelerator
// detail and capacity (mdplane adds the entrance beside them).
func applyManagedType(t *testing.T, ctx context.Context, namespace, name, spec string, detail workerv1.InstanceTypeDetail, capacity string) {
	t.Helper()
	kubectlApply(t, `apiVersion: v1
kind: Namespace
metadata: {name: `+namespace+`}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata:
  name: `+name+`
  labels: {`+managedQueuesLabel+`: "true"}
spec:`+spec+"\n")
	it := &workerv1.InstanceType{}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: name}, it); err != nil {
			return err
		}
		it.Status.Detail = detail.DeepCopy()
		it.Status.Accelerator = &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse(capacity))}
		return stack.Client.Status().Update(ctx, it)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestManagedQueues: an InstanceType gets its entrance published, a ResourceFlavor and a ClusterQueue
// named after it with quota from its capacity and the joint check, and a LocalQueue in the namespace
// of a deployment naming it, through which the deployment is admitted and runs.
func TestManagedQueues(t *testing.T) {
	ctx := context.Background()
	const ns, typeName = "team-q", "queues-nvidia-l4-linux-amd64"
	applyManagedType(t, ctx, ns, typeName, `
  acceleratable: true
  acceleratorGroup: nvidia-l4
  os: linux
  arch: amd64
  unitResources: {cpu: "4", ram: 16Gi}
  localStorage: 50Gi`, workerv1.InstanceTypeDetail{Manufacturer: "nvidia", Product: "NVIDIA L4", Memory: ptr.To(resource.MustParse("24Gi"))}, "4")
	entrance := workerv1.EntranceName(typeName)
	it := &workerv1.InstanceType{}

	eventually(t, time.Minute, "the entrance published and the ClusterQueue built from the type", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, it); err != nil {
			return err
		}
		if it.Status.Entrance != entrance || it.Status.Detail == nil {
			return fmt.Errorf("status.entrance %q, detail %v", it.Status.Entrance, it.Status.Detail)
		}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, &kueuev1beta2.ResourceFlavor{}); err != nil {
			return err
		}
		cq := &kueuev1beta2.ClusterQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, cq); err != nil {
			return err
		}
		quotas := map[string]string{}
		for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
			quotas[string(r.Name)] = r.NominalQuota.String()
		}
		want := map[string]string{"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi", "ephemeral-storage": "200Gi"}
		if fmt.Sprint(quotas) != fmt.Sprint(want) {
			return fmt.Errorf("quotas %v, want %v", quotas, want)
		}
		if s := cq.Spec.AdmissionChecksStrategy; s == nil || len(s.AdmissionChecks) != 1 || s.AdmissionChecks[0].Name != admissioncheck.CheckName {
			return fmt.Errorf("admission checks %+v", s)
		}
		if cq.Labels["app.kubernetes.io/managed-by"] != "mdplane" {
			return fmt.Errorf("ClusterQueue not labelled as mdplane's: %v", cq.Labels)
		}
		return nil
	})

	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: l4, namespace: `+ns+`}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 2, instanceType: `+typeName+`, resources: {accelerator: 1}}
`)
	defer tearDown(t, ctx, ns)
	eventually(t, time.Minute, "the LocalQueue named by the entrance in the deployment's namespace", func() error {
		lq := &kueuev1beta2.LocalQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: entrance}, lq); err != nil {
			return err
		}
		if lq.Spec.ClusterQueue != kueuev1beta2.ClusterQueueReference(typeName) {
			return fmt.Errorf("LocalQueue points at %s", lq.Spec.ClusterQueue)
		}
		return nil
	})
	eventually(t, 3*time.Minute, "both replicas admitted through the managed queues and running", func() error {
		return running(ctx, ns, "l4", 2)
	})
}
