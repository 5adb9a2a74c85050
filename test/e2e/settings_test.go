package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// settingsObject is the mdplane-settings EnvironmentConfig holding one Setting.
func settingsObject(key, value string) string {
	return fmt.Sprintf("apiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata: {name: mdplane-settings}\ndata:\n  %s: %q\n", key, value)
}

// TestASettingReachesOnlyNewPods: a bad value in the mdplane-settings EnvironmentConfig is refused
// by kubectl naming the key; a good one (the decoder's routing-sidecar image) reaches the Pods of a
// replica added after it, while the running decoder keeps its Pod and its image.
func TestASettingReachesOnlyNewPods(t *testing.T) {
	sequential(t, "writes the cluster-wide settings every new Pod reads")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "set"
	applyCluster(t, ctx, ns)
	queue(t, ctx, "settings-reach", "gpustack-fnv64-7bc37bef52624161", ns, 8) // the a10g entrance, a ClusterQueue of its own
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		if _, err := stack.Kubectl("delete", "environmentconfig", "mdplane-settings", "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	const a10g = "instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}"
	kubectlApply(t, fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  router: {name: llm-d-router}
  roles:
    - {name: prefill, kind: Prefill, %s}
    - {name: decode, kind: Decode, replicas: 1, %s}
`, name, ns, a10g, a10g))
	before := runningPods(t, ctx, ns, name, "decode", 1)[0]
	sidecar := func(p corev1.Pod) string {
		if c := container(p, "routing-proxy"); c != nil {
			return c.Image
		}
		return ""
	}
	if sidecar(before) == "" {
		t.Fatalf("decoder %s has no routing-proxy", before.Name)
	}

	if out := applyRefused(t, settingsObject("model-deployment-tcp-tw-reuse", "maybe")); !strings.Contains(out, "model-deployment-tcp-tw-reuse") {
		t.Fatalf("a bad Setting was refused without naming its key:\n%s", out)
	}
	const image = "registry.local/mirror/llm-d-router-disagg-sidecar:v0.10.1"
	kubectlApply(t, settingsObject("model-deployment-routing-sidecar-image", image))
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"replace","path":"/spec/roles/1/replicas","value":2}]`); err != nil {
		t.Fatal(err)
	}
	now := runningPods(t, ctx, ns, name, "decode", 2)
	for _, p := range now {
		switch {
		case p.UID == before.UID && sidecar(p) != sidecar(before):
			t.Errorf("the running decoder's sidecar moved from %s to %s", sidecar(before), sidecar(p))
		case p.UID == before.UID:
		case p.Labels[workerv1.LabelPodOrdinal] == before.Labels[workerv1.LabelPodOrdinal]:
			t.Errorf("the running decoder %s was replaced by %s", before.Name, p.Name)
		case sidecar(p) != image:
			t.Errorf("the added decoder %s runs sidecar %s, want the Setting's %s", p.Name, sidecar(p), image)
		}
	}
}
