package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestAWebhookRefusalReadsAsValidate: what the cluster refuses, kubectl prints with the same field
// errors `mdplane validate` prints offline.
func TestAWebhookRefusalReadsAsValidate(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-c")
	manifest := `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: refused, namespace: team-c}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 64}, env: [{name: GPUSTACK_REPLICA_SIZE, value: "2"}]}
    - {name: prefill, kind: Prefill, instanceType: gpustack-nvidia-a10g-linux-amd64}
`
	md := &workerv1.ModelDeployment{}
	if err := yaml.Unmarshal([]byte(manifest), md); err != nil {
		t.Fatal(err)
	}
	// The type's capacity is in one refusal's words, and a parallel test adding or removing a node
	// of its product moves it: the webhook and the offline validation each read the type, at two
	// moments, so a pair read across such a move is read again.
	eventually(t, time.Minute, "kubectl printing every refusal the offline validation gives", func() error {
		out := applyRefused(t, manifest)
		it := &workerv1.InstanceType{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: "gpustack-nvidia-a10g-linux-amd64"}, it); err != nil {
			return err
		}
		errs := validation.ValidateCreate(md, validation.Cluster{InstanceTypes: map[string]*workerv1.InstanceType{it.Name: it}})
		if len(errs) < 3 {
			t.Fatalf("expected three refusals offline, got %v", errs)
		}
		for _, e := range errs {
			if !strings.Contains(out, e.Error()) {
				return fmt.Errorf("kubectl did not print %q:\n%s", e.Error(), out)
			}
		}
		return nil
	})
}

// TestDeletionIsNotBlockedByAGoneInstanceType: the rules that read an InstanceType decline while the
// deployment is being deleted, so the update that clears Crossplane's finalizer passes even when the
// type no longer exists.
func TestDeletionIsNotBlockedByAGoneInstanceType(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	kubectlApply(t, `apiVersion: v1
kind: Namespace
metadata: {name: team-gone-type}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: short-lived}
spec: {acceleratable: false, os: linux, arch: amd64, unitResources: {cpu: "1", ram: 2Gi}}
`)
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: orphan, namespace: team-gone-type}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: short-lived}
`)
	md := &unstructured.Unstructured{}
	md.SetAPIVersion(workerv1.SchemeGroupVersion.String())
	md.SetKind(workerv1.ModelDeploymentKind)
	eventually(t, time.Minute, "Crossplane's finalizer on the deployment", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: "team-gone-type", Name: "orphan"}, md); err != nil {
			return err
		}
		if len(md.GetFinalizers()) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	if _, err := stack.Kubectl("delete", "instancetype", "short-lived"); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("delete", "modeldeployment", "orphan", "-n", "team-gone-type", "--wait=false"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the deployment gone", func() error {
		err := stack.Client.Get(ctx, client.ObjectKey{Namespace: "team-gone-type", Name: "orphan"}, md)
		if err == nil {
			return fmt.Errorf("still there, finalizers %v", md.GetFinalizers())
		}
		return client.IgnoreNotFound(err)
	})
}

// TestTheAcceleratorCountDefaultsFromTheInstanceType: the one default a schema cannot reach.
func TestTheAcceleratorCountDefaultsFromTheInstanceType(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-e")
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: defaulted, namespace: team-e}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64}
`)
	md := &workerv1.ModelDeployment{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: "team-e", Name: "defaulted"}, md); err != nil {
		t.Fatal(err)
	}
	res := md.Spec.Roles[0].Resources
	if res == nil || res.Accelerator == nil || res.Accelerator.String() != "1" {
		t.Fatalf("resources.accelerator not defaulted to 1 on an acceleratable type: %+v", res)
	}
}

// TestADeploymentDeclaringEveryCountIsNotSentToTheDefaulter: the defaulter's match condition, as the
// API server evaluates it. A deployment whose every role declares its accelerator count is admitted
// without a call to the mutating webhook (the API server counts an exclusion); one leaving a count
// unset is defaulted by it (TestTheAcceleratorCountDefaultsFromTheInstanceType).
func TestADeploymentDeclaringEveryCountIsNotSentToTheDefaulter(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-mc")
	t.Cleanup(func() { tearDown(t, ctx, "team-mc") })
	before := defaulterExclusions(t)
	f := filepath.Join(t.TempDir(), "declared.yaml")
	if err := os.WriteFile(f, []byte(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: declared, namespace: team-mc}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := stack.Kubectl("create", "--dry-run=server", "-f", f); err != nil {
		t.Fatalf("the create: %v\n%s", err, out)
	}
	if after := defaulterExclusions(t); after <= before {
		t.Fatalf("the API server did not skip the defaulter for a deployment declaring every count: exclusions %v, then %v", before, after)
	}
}

// defaulterExclusions is the API server's count of requests its match conditions kept from the
// ModelDeployment defaulter.
func defaulterExclusions(t *testing.T) float64 {
	t.Helper()
	raw, err := stack.Kubectl("get", "--raw", "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, line := range strings.Split(raw, "\n") {
		if strings.HasPrefix(line, "apiserver_admission_match_condition_exclusions_total{") && strings.Contains(line, `name="mmodeldeployment.worker.gpustack.ai"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			if err != nil {
				t.Fatalf("reading %q: %v", line, err)
			}
			total += v
		}
	}
	return total
}

// TestTwoBindingsNeverShareATenant: a domain name is the tenant the cache master keys blocks by, so
// a second Binding declaring a taken name on the same master is refused by the webhook, naming the
// Binding that holds it; a name of its own is admitted.
func TestTwoBindingsNeverShareATenant(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-tenants") // Binding team-a-dram, domain team-tenants, on pool dram
	binding := func(name, domain string) string {
		return `apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: ` + name + `, namespace: team-tenants}
spec: {poolRef: {name: dram}, domain: {name: ` + domain + `, blockSize: 16, dtype: bfloat16}, quota: {ceiling: 1Gi}}
`
	}
	out := applyRefused(t, binding("copy", "team-tenants"))
	for _, part := range []string{"spec.domain.name", `KVCachePoolBinding team-tenants/team-a-dram (pool "dram") already declares domain "team-tenants"`} {
		if !strings.Contains(out, part) {
			t.Errorf("the refusal does not name %q:\n%s", part, out)
		}
	}
	kubectlApply(t, binding("own", "team-tenants-own"))
	if _, err := stack.Kubectl("delete", "kvcachepoolbinding", "own", "-n", "team-tenants"); err != nil {
		t.Fatal(err)
	}
}
