package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// The conformance tests (TestConformance*) prove an installation on any cluster: they reach it only
// through its kubeconfig (target), never the stack's processes or fake nodes, make every object
// under names of their own run, run no Pod (their deployments wait for quota on a type no node
// offers), and delete what they made. make conformance runs them alone against the cluster in
// KUBECONFIG; make test runs them with the suite, against the stack reached the same way.

// target is the cluster the conformance tests prove.
var target *cluster.Cluster

// conformanceRun names this run's objects, so that two runs and a cluster's own objects never meet.
var conformanceRun = func() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// proven are the claims of the conformance tests that passed, for the run's summary.
var proven struct {
	sync.Mutex
	claims []string
}

// conformant records the test's claim once it passed.
func conformant(t *testing.T, claim string) {
	t.Cleanup(func() {
		if !t.Failed() && !t.Skipped() {
			proven.Lock()
			proven.claims = append(proven.claims, t.Name()+": "+claim)
			proven.Unlock()
		}
	})
}

// conformanceSummary is what a conformance run prints last: every claim proven.
func conformanceSummary() string {
	proven.Lock()
	defer proven.Unlock()
	sort.Strings(proven.claims)
	return fmt.Sprintf("conformance: %d claims proven on the cluster\n  %s", len(proven.claims), strings.Join(proven.claims, "\n  "))
}

// runConformance is TestMain on a cluster of a platform team's: only the conformance tests run, and
// the rest of the suite is named as skipped, with why.
func runConformance(m *testing.M, kubeconfig string) int {
	var err error
	if target, err = cluster.Attach(kubeconfig, os.Getenv("MDPLANE_CONFORMANCE_CONTEXT")); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	// Every other test needs the stack: it would fail here rather than skip.
	flag.Parse()
	if err := flag.Set("test.run", "^TestConformance"); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		return 1
	}
	fmt.Printf("conformance: against %s (run %s); the rest of the suite is skipped: it needs the stack's fake GPU nodes, "+
		"its processes to kill and restart, or cluster-wide fixtures of fixed names (make test runs it)\n", target.Config.Host, conformanceRun)
	code := m.Run()
	fmt.Println(conformanceSummary())
	return code
}

// TestMakeConformanceProvesTheStack: make conformance, as a platform team runs it, against this
// suite's stack reached only through its kubeconfig: a process of its own that runs every
// conformance test and no other, each passing, and prints the claims it proved. The suite's stack
// serves rather than a second one: the conformance tests name everything after their run, so they
// run beside the suite's own, and a second stack would cost make test minutes.
func TestMakeConformanceProvesTheStack(t *testing.T) {
	parallelLong(t)
	cmd := exec.Command("make", "--no-print-directory", "conformance")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+stack.Kubeconfig, "MDPLANE_CONFORMANCE_CONTEXT=")
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil {
		t.Fatalf("make conformance: %v\n%s", err, out)
	}
	passed := strings.Count(out, "--- PASS: TestConformance")
	if want := fmt.Sprintf("conformance: %d claims proven on the cluster", passed); passed == 0 || !strings.Contains(out, want) {
		t.Errorf("make conformance does not print %q:\n%s", want, out)
	}
	if strings.Contains(out, "--- SKIP") || strings.Contains(out, "--- FAIL") {
		t.Errorf("make conformance skipped or failed a test:\n%s", out)
	}
	t.Logf("make conformance against the stack: %d claims proven", passed)
}

// TestConformanceInstalled: mdplane is installed as docs/install.md says and serving.
func TestConformanceInstalled(t *testing.T) {
	parallel(t)
	conformant(t, "the Configuration and its Functions are Healthy, every kind is established, the webhooks carry their CA, "+
		"the joint AdmissionCheck is Active and the metrics API is Available")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	condition := func(obj *unstructured.Unstructured, typ string) string {
		conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conditions {
			if c := c.(map[string]any); c["type"] == typ {
				return fmt.Sprint(c["status"])
			}
		}
		return "absent"
	}
	for _, want := range []struct{ apiVersion, kind, name, condition string }{
		{"pkg.crossplane.io/v1", "Configuration", "mdplane", "Healthy"},
		{"pkg.crossplane.io/v1", "Function", "mdplane-function-render-roles", "Healthy"},
		{"pkg.crossplane.io/v1", "Function", "mdplane-function-kv-cache", "Healthy"},
		{"kueue.x-k8s.io/v1beta2", "AdmissionCheck", "gpustack-model-deployment-joint", "Active"},
		{"apiregistration.k8s.io/v1", "APIService", "v1.metrics.worker.gpustack.ai", "Available"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "modeldeployments.worker.gpustack.ai", "Established"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "modelroles.internal.mdplane.io", "Established"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "modelreplicas.internal.mdplane.io", "Established"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "instancetypes.worker.gpustack.ai", "Established"},
		{"apiextensions.k8s.io/v1", "CustomResourceDefinition", "kvcachepoolbindings.worker.gpustack.ai", "Established"},
	} {
		// A fresh installation converges within a minute: each is waited for, not read once.
		eventually(t, time.Minute, fmt.Sprintf("%s %s %s", want.kind, want.name, want.condition), func() error {
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(want.apiVersion)
			obj.SetKind(want.kind)
			if err := target.Client.Get(ctx, client.ObjectKey{Name: want.name}, obj); err != nil {
				return err
			}
			if got := condition(obj, want.condition); got != "True" {
				return fmt.Errorf("%s is %s", want.condition, got)
			}
			return nil
		})
	}
	for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		cfg := &unstructured.Unstructured{}
		cfg.SetAPIVersion("admissionregistration.k8s.io/v1")
		cfg.SetKind(kind)
		if err := target.Client.Get(ctx, client.ObjectKey{Name: "mdplane"}, cfg); err != nil {
			t.Errorf("%s mdplane: %v", kind, err)
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
		for _, h := range hooks {
			if ca, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle"); ca == "" {
				t.Errorf("%s mdplane: webhook %v has no caBundle: the webhooks have not injected their CA", kind, h.(map[string]any)["name"])
			}
		}
	}
}

// conformanceFixture makes a namespace named after the run and the claim, and an InstanceType no
// node offers (a CPU type of an architecture of that name), so a deployment on it waits for quota
// and runs no Pod; both, and the queue objects the controllers make for the type, are deleted when
// the test ends. Each claim has its own, so the claims run in parallel.
func conformanceFixture(t *testing.T, ctx context.Context, claim string) (namespace, instanceType string) {
	t.Helper()
	namespace = "mdplane-conformance-" + conformanceRun + "-" + claim
	instanceType = namespace
	manifest := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[1]s, labels: {app.kubernetes.io/part-of: mdplane-conformance}}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: %[2]s, labels: {app.kubernetes.io/part-of: mdplane-conformance}}
spec:
  displayName: mdplane conformance (no node offers it)
  acceleratable: false
  os: linux
  arch: %[2]s
  unitResources: {cpu: "1", ram: 2Gi}
  localStorage: 1Gi
`, namespace, instanceType)
	f := filepath.Join(t.TempDir(), "fixture.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := target.Kubectl("apply", "--server-side", "-f", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		for _, args := range [][]string{
			{"delete", "modeldeployments", "--all", "-n", namespace, "--timeout=3m"},
			{"delete", "namespace", namespace, "--timeout=3m"},
			{"delete", "instancetype", instanceType, "--ignore-not-found", "--timeout=1m"},
			{"delete", "clusterqueues.kueue.x-k8s.io", instanceType, "--ignore-not-found", "--timeout=1m"},
			{"delete", "resourceflavors.kueue.x-k8s.io", instanceType, "--ignore-not-found", "--timeout=1m"},
		} {
			if out, err := target.Kubectl(args...); err != nil {
				t.Errorf("cleaning up: %v\n%s", err, out)
			}
		}
	})
	return namespace, instanceType
}

// conformanceDeployment is a vLLM deployment of one role on the (CPU) type.
func conformanceDeployment(namespace, name, instanceType, roleFields string) string {
	return vLLMDeployment(namespace, name) + fmt.Sprintf("    - {name: server, instanceType: %s%s}\n", instanceType, roleFields)
}

// TestConformanceARefusalIsTheOfflineValidation: the installed webhooks refuse what mdplane validate
// refuses, with the same messages, and admit its near miss.
func TestConformanceARefusalIsTheOfflineValidation(t *testing.T) {
	parallel(t)
	conformant(t, "the webhooks refuse a deployment with the messages of the offline validation, and admit its near miss")
	ctx := context.Background()
	namespace, instanceType := conformanceFixture(t, ctx, "refusal")
	dryRun := func(manifest string) (string, error) {
		f := filepath.Join(t.TempDir(), "md.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		return target.Kubectl("apply", "--dry-run=server", "-f", f)
	}
	refused := conformanceDeployment(namespace, "refused", instanceType, `, env: [{name: GPUSTACK_REPLICA_SIZE, value: "2"}]`)
	out, err := dryRun(refused)
	if err == nil {
		t.Fatalf("a deployment setting a variable mdplane owns was admitted:\n%s", out)
	}
	md := &workerv1.ModelDeployment{}
	if err := yaml.Unmarshal([]byte(refused), md); err != nil {
		t.Fatal(err)
	}
	it := &workerv1.InstanceType{}
	if err := target.Client.Get(ctx, client.ObjectKey{Name: instanceType}, it); err != nil {
		t.Fatal(err)
	}
	errs := validation.ValidateCreate(md, validation.Cluster{InstanceTypes: map[string]*workerv1.InstanceType{it.Name: it}})
	if len(errs) == 0 {
		t.Fatal("the offline validation admits the refused deployment")
	}
	for _, e := range errs {
		if !strings.Contains(out, e.Error()) {
			t.Errorf("the webhooks did not say %q:\n%s", e.Error(), out)
		}
	}
	if out, err := dryRun(conformanceDeployment(namespace, "admitted", instanceType, "")); err != nil {
		t.Errorf("the near miss, without the variable, was refused: %v\n%s", err, out)
	}
}

// TestConformanceADeploymentIsComposedAndWaitsForQuota: a deployment on a type no node offers is
// composed by Crossplane through mdplane's functions, its replica's Pod is created by the controllers
// and held by Kueue for quota, its status says so, and its metrics snapshot answers that no Pod can
// be read.
func TestConformanceADeploymentIsComposedAndWaitsForQuota(t *testing.T) {
	parallel(t)
	conformant(t, "a deployment is composed through the functions, its Pod created and held by Kueue for quota, "+
		"its status Starting with QuotaReserved not True, and its metrics snapshot unavailable without a running Pod")
	ctx := context.Background()
	namespace, instanceType := conformanceFixture(t, ctx, "quota")
	const name = "held"
	manifest := conformanceDeployment(namespace, name, instanceType, "")
	f := filepath.Join(t.TempDir(), "md.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := target.Kubectl("apply", "-f", f); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	eventually(t, 3*time.Minute, "the replica's Pod created and gated by Kueue", func() error {
		pods := &corev1.PodList{}
		if err := target.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{workerv1.LabelInstance: name}); err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		if p := pods.Items[0]; p.Spec.NodeName != "" || !gated(&p) {
			return fmt.Errorf("Pod %s is not held for quota (node %q, gates %v)", p.Name, p.Spec.NodeName, p.Spec.SchedulingGates)
		}
		return nil
	})
	eventually(t, 2*time.Minute, "the deployment Starting, its quota not reserved", func() error {
		md := &workerv1.ModelDeployment{}
		if err := target.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md); err != nil {
			return err
		}
		quota := md.Status.GetCondition("QuotaReserved")
		if md.Status.Phase != workerv1.PhaseStarting || quota.Status == corev1.ConditionTrue || quota.Reason == "" {
			return fmt.Errorf("phase %q, QuotaReserved %s %s", md.Status.Phase, quota.Status, quota.Reason)
		}
		return nil
	})
	out, err := target.Kubectl("get", "--raw", "/apis/metrics.worker.gpustack.ai/v1/namespaces/"+namespace+"/modeldeployments/"+name+"/metrics")
	if err == nil || !strings.Contains(out, "ServiceUnavailable") && !strings.Contains(out, "503") {
		t.Errorf("the snapshot of a deployment without a running Pod: %v\n%s", err, out)
	}
}
