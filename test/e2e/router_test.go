package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestLLMDRouterOnTheStack: a prefill/decode deployment under llm-d-router gets its router, whose
// Deployment runs on KWOK; the deployment's endpoint moves to the router only once a router replica
// is Ready, and RouterReady and the roleSummary's router count say so.
func TestLLMDRouterOnTheStack(t *testing.T) {
	ctx := context.Background()
	applyCluster(t, ctx, "team-l")
	queue(t, ctx, "llmd-router", "gpustack-fnv64-7bc37bef52624161", "team-l", 8) // a ClusterQueue of its own
	const a10g = "instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}"
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: routed, namespace: team-l}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  router: {name: llm-d-router}
  roles:
    - {name: prefill, kind: Prefill, `+a10g+`}
    - {name: decode, kind: Decode, `+a10g+`}
`)
	md := &unstructured.Unstructured{}
	md.SetAPIVersion(workerv1.SchemeGroupVersion.String())
	md.SetKind(workerv1.ModelDeploymentKind)
	key := client.ObjectKey{Namespace: "team-l", Name: "routed"}
	router := &appsv1.Deployment{}
	// The endpoint is watched from the start: it must not name the router before a router replica is
	// Ready.
	eventually(t, 3*time.Minute, "the router Ready and the endpoint on it", func() error {
		if err := stack.Client.Get(ctx, key, md); err != nil {
			return err
		}
		endpoint, _, _ := unstructured.NestedString(md.Object, "status", "endpoint")
		routerReady := false
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: "team-l", Name: "routed-router"}, router); err == nil {
			routerReady = router.Status.ReadyReplicas > 0
		}
		if strings.Contains(endpoint, "routed-router") && !routerReady {
			t.Fatalf("status.endpoint is %s while no router replica is Ready", endpoint)
		}
		if !routerReady {
			return fmt.Errorf("router Deployment not Ready (endpoint %q)", endpoint)
		}
		c, err := deploymentConditionOf(ctx, "team-l", "routed", "RouterReady")
		if err != nil || c.Status != "True" || c.Reason != "Ready" {
			return fmt.Errorf("RouterReady %+v: %v", c, err)
		}
		if endpoint != "http://routed-router.team-l.svc:8081" {
			return fmt.Errorf("endpoint %q", endpoint)
		}
		summary, _, _ := unstructured.NestedString(md.Object, "status", "roleSummary")
		if !strings.HasPrefix(summary, "1R") {
			return fmt.Errorf("roleSummary %q does not count the Ready router Pod", summary)
		}
		return nil
	})
	if got := []string{router.Spec.Template.Spec.Containers[0].Name, router.Spec.Template.Spec.Containers[1].Name}; got[0] != "envoy" || got[1] != "epp" {
		t.Errorf("router containers %v, want envoy then epp", got)
	}
	if _, err := stack.Kubectl("delete", "modeldeployment", "routed", "-n", "team-l", "--wait=false"); err != nil {
		t.Fatal(err)
	}
}
