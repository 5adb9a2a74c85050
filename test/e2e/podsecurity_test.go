package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestPodSecurityBaseline: in a namespace enforcing Pod Security baseline, a deployment with the
// default compile cache (a hostPath volume) gets no Pod, and its ModelDeployment says why where its
// user looks: PodsCreated False/PodRefused and a Warning PodRefused event, both naming the role, the
// replica and the API server's own message. The way docs/operations.md gives (the compile cache
// through additionalVolumes, an emptyDir) runs there: the Pods are created and Ready, without a
// hostPath, and the condition turns True.
func TestPodSecurityBaseline(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "baseline"
	applyCluster(t, ctx, ns)
	queue(t, ctx, "pod-security", a10gEntrance, ns, 8)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	if _, err := stack.Kubectl("label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline"); err != nil {
		t.Fatal(err)
	}
	deployment := func(volumes string) string {
		return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen2.5-7B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - name: server
      instanceType: gpustack-nvidia-a10g-linux-amd64
      resources: {accelerator: 1}
%s`, name, ns, volumes)
	}

	t.Run("the default compile cache is refused and the deployment says so", func(t *testing.T) {
		kubectlApply(t, deployment(""))
		const refusal = `violates PodSecurity "baseline:latest": hostPath volumes`
		eventually(t, 2*time.Minute, "PodsCreated False/PodRefused naming the role, the replica and the API server's message", func() error {
			c, err := deploymentConditionOf(ctx, ns, name, "PodsCreated")
			if err != nil {
				return err
			}
			if c.Status != "False" || c.Reason != "PodRefused" || !strings.HasPrefix(c.Message, "role server replica 0: pods ") || !strings.Contains(c.Message, refusal) {
				return fmt.Errorf("PodsCreated is %s/%s: %s", c.Status, c.Reason, c.Message)
			}
			return nil
		})
		eventually(t, time.Minute, "a Warning PodRefused event on the ModelDeployment", func() error {
			return warningOn(ctx, ns, name, "PodRefused", "role server replica 0: pods ", refusal)
		})
		ps, err := pods(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) > 0 {
			t.Fatalf("%d Pods were created in a namespace enforcing baseline", len(ps))
		}
	})

	t.Run("the compile cache through additionalVolumes runs under baseline", func(t *testing.T) {
		kubectlApply(t, deployment(`      additionalVolumes:
        - {mountPath: /var/lib/gpustack/cache, emptyDir: {sizeLimit: 50Gi}}
`))
		for _, p := range runningPods(t, ctx, ns, name, "server", 1) {
			for _, v := range p.Spec.Volumes {
				if v.HostPath != nil {
					t.Errorf("Pod %s has the hostPath volume %s", p.Name, v.Name)
				}
			}
		}
		eventually(t, time.Minute, "PodsCreated True/Created", func() error {
			return conditionIs(ctx, ns, name, "PodsCreated", "True", "Created")
		})
	})
}

// warningOn reports an error unless the namespace holds a Warning event of reason on the
// ModelDeployment name whose message carries every part.
func warningOn(ctx context.Context, namespace, name, reason string, parts ...string) error {
	evs := &corev1.EventList{}
	if err := stack.Client.List(ctx, evs, client.InNamespace(namespace)); err != nil {
		return err
	}
	var seen []string
	for _, e := range evs.Items {
		if e.Reason != reason {
			continue
		}
		seen = append(seen, fmt.Sprintf("%s on %s %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
		if e.Type != corev1.EventTypeWarning || e.InvolvedObject.Kind != workerv1.ModelDeploymentKind || e.InvolvedObject.Name != name {
			continue
		}
		all := true
		for _, part := range parts {
			all = all && strings.Contains(e.Message, part)
		}
		if all {
			return nil
		}
	}
	return fmt.Errorf("no Warning %s event on ModelDeployment %s with %q; %s events: %q", reason, name, parts, reason, seen)
}
