package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNoWebhookNoAdmission: with every replica of mdplane-webhooks down, a ModelDeployment create is
// refused (the webhooks' failurePolicy is Fail), and the refusal names the webhook; once they are
// back, the same create is admitted.
func TestNoWebhookNoAdmission(t *testing.T) {
	sequential(t, "scales the webhooks to zero: every admission in the cluster fails meanwhile")
	ctx := context.Background()
	applyCluster(t, ctx, "team-fc")
	t.Cleanup(func() { tearDown(t, ctx, "team-fc") })
	manifest := strings.NewReplacer("team-wh", "team-fc", "reserved-env", "unjudged",
		`, env: [{name: GPUSTACK_REPLICA_SIZE, value: "2"}]`, "").Replace(refusedByAWebhook)
	file := filepath.Join(t.TempDir(), "unjudged.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := stack.StopWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	out, err := stack.Kubectl("create", "--dry-run=server", "-f", file)
	if err := stack.StartWebhooks(ctx); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		t.Fatalf("a create was admitted with no webhook answering:\n%s", out)
	}
	if !strings.Contains(out, "modeldeployment.worker.gpustack.ai") || !strings.Contains(out, "failed calling webhook") {
		t.Fatalf("the refusal does not name the webhook:\n%s", out)
	}
	if out, err := stack.Kubectl("create", "--dry-run=server", "-f", file); err != nil {
		t.Fatalf("with the webhooks back, the create: %v\n%s", err, out)
	}
}

// TestAFunctionDownLeavesRunningPodsAlone: render-roles killed (as a crashed function Pod), an edit
// of a running deployment renders nothing: Crossplane applies nothing of a pipeline that failed, so
// every Pod stays as it was (same UID, same command), and the deployment's events say which
// function could not be run (Warning ComposeResources, in kubectl describe). That takes Crossplane
// two minutes: its call waits for the function's connection until the reconcile's deadline, which
// also leaves it no time to write its Synced condition. Started again, the function renders the
// edit and the rollout carries it to every Pod.
//
// The render-roles killed is a spare of mdplane's, the same package installed under another name,
// called by a copy of mdplane's Composition that the deployment names: killing mdplane's own
// would stop every deployment's composition, so the test would have to run alone.
func TestAFunctionDownLeavesRunningPodsAlone(t *testing.T) {
	parallelWaiting(t, "waits about two minutes for Crossplane's call to the stopped Function to time out")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "steady"
	composition := ownName(t, "composition")
	fn, err := stack.SpareFunction(ctx, "mdplane-function-render-roles", composition)
	t.Cleanup(func() {
		for _, o := range []struct{ apiVersion, kind, name string }{
			{"apiextensions.crossplane.io/v1", "Composition", composition}, {"pkg.crossplane.io/v1", "Function", fn}} {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(o.apiVersion)
			u.SetKind(o.kind)
			u.SetName(o.name)
			_ = stack.Client.Delete(context.Background(), u)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(deploymentOnH20(ns, name, "server Server 2 1"), "\nspec:\n", "\nspec:\n  crossplane: {compositionRef: {name: "+composition+"}}\n", 1)
	runOnH20(t, ctx, ns, ownName(t, "queue"), 2, name, 2, manifest)
	before, err := pods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	check := watchInvariants(t, ctx, ns, name, 2)
	defer check()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = stack.StartFunction(ctx, fn)
		}
	})
	if err := stack.KillFunction(ctx, fn); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 4*time.Minute, "a ComposeResources warning naming the function", func() error {
		events := &corev1.EventList{}
		if err := stack.Client.List(ctx, events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": name}); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == "ComposeResources" && strings.Contains(e.Message, `cannot run Function "`+fn+`"`) {
				return nil
			}
		}
		return fmt.Errorf("%d events of %s, none a ComposeResources warning naming %s", len(events.Items), name, fn)
	})
	after, err := pods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d Pods before the function went down, %d after", len(before), len(after))
	}
	uids := map[string]bool{}
	for _, p := range before {
		uids[string(p.UID)] = true
	}
	for i := range after {
		if !uids[string(after[i].UID)] || after[i].DeletionTimestamp != nil || strings.Contains(argsOf(&after[i]), "8192") {
			t.Fatalf("Pod %s changed while the function was down", after[i].Name)
		}
	}
	if err := stack.StartFunction(ctx, fn); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 3*time.Minute, "the edit rendered and rolled out", func() error {
		return runningWith(ctx, ns, name, 2, "--max-model-len 8192")
	})
}
