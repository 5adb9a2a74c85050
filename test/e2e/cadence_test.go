package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// readyDelay is how long KWOK holds a replacement's Pod before it turns Ready (the engine starting):
// long beside Kueue's admission, which takes about a second on the stack.
const readyDelay = "5s"

// TestCapacityPreservingRollout: with modeldeployment.gpustack.ai/rollout-cadence:
// capacity-preserving, a rolling edit of a three-replica role whose engines take five seconds to turn
// Ready never has fewer than two Ready replicas, and ReplicasUpToDate names the Ready gate while it
// waits; the same edit under the default cadence completes too, and its Ready floor is reported
// beside (the spec's admission gate does not wait for readiness).
func TestCapacityPreservingRollout(t *testing.T) {
	parallelLong(t)
	for _, tc := range []struct {
		cadence workerv1.RolloutCadence
		floor   int // the fewest Ready replicas the rollout may reach; -1: reported, not held
	}{
		{workerv1.RolloutCadenceCapacity, 2},
		{workerv1.RolloutCadenceAdmission, -1},
	} {
		t.Run(string(tc.cadence), func(t *testing.T) {
			ctx := context.Background()
			ns := "team-cadence-" + strings.SplitN(string(tc.cadence), "-", 2)[0]
			const name = "steady"
			manifest := fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: %s
  namespace: %s
  annotations: {%s: %s}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - name: server
      kind: Server
      replicas: 3
      instanceType: gpustack-nvidia-h20-linux-amd64
      resources: {accelerator: 1}
      env: [{name: %s, value: %q}]
`, name, ns, workerv1.AnnotationRolloutCadence, tc.cadence, cluster.ReadyDelayEnv, readyDelay)
			runOnH20(t, ctx, ns, "cadence-"+ns, 8, name, 3, manifest)
			check := watchInvariants(t, ctx, ns, name, 3)
			defer check()
			initial, w := watchPods(t, ctx, ns, name)
			defer w.Stop()

			gates := watchGates(ctx, ns, name)
			if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
				"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`); err != nil {
				t.Fatal(err)
			}
			edited := func(p *corev1.Pod) bool { return strings.Contains(argsOf(p), "--max-model-len 8192") }
			pods := map[string]*corev1.Pod{}
			for i := range initial.Items {
				pods[initial.Items[i].Name] = &initial.Items[i]
			}
			start, floor, floorAt := time.Now(), 3, ""
			timeout := time.After(5 * time.Minute)
			for done := false; !done; {
				var ev watch.Event
				select {
				case ev = <-w.ResultChan():
				case <-timeout:
					t.Fatalf("rollout not done after 5 minutes; fewest Ready replicas %d", floor)
				}
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				if ev.Type == watch.Deleted {
					delete(pods, p.Name)
				} else {
					pods[p.Name] = p
				}
				readyNow, newReady := 0, 0
				for _, q := range pods {
					if q.DeletionTimestamp == nil && ready(*q) {
						readyNow++
						if edited(q) {
							newReady++
						}
					}
				}
				if readyNow < floor {
					floor, floorAt = readyNow, fmt.Sprintf("%.1fs after the edit, on %s of Pod %s", time.Since(start).Seconds(), ev.Type, p.Name)
				}
				if tc.floor >= 0 && readyNow < tc.floor {
					t.Fatalf("%d of 3 replicas Ready %s: the capacity-preserving cadence keeps at least %d", readyNow, floorAt, tc.floor)
				}
				done = newReady == 3 && len(pods) == 3
			}
			seen := gates()
			fmt.Printf("e2e %s cadence: 3-replica rolling edit with engines Ready %s after admission took %.1fs; fewest Ready replicas %d (%s); ReplicasUpToDate said: %s\n",
				tc.cadence, readyDelay, time.Since(start).Seconds(), floor, floorAt, strings.Join(seen, " | "))
			if tc.cadence == workerv1.RolloutCadenceCapacity && !containsAny(seen, "server waits for its replacement to be Ready (capacity-preserving cadence)") {
				t.Errorf("ReplicasUpToDate never named the Ready gate; it said: %s", strings.Join(seen, " | "))
			}
		})
	}
}

// watchGates polls the deployment's ReplicasUpToDate every 250 ms until the returned function is
// called, which returns the distinct messages it carried while False.
func watchGates(ctx context.Context, namespace, name string) func() []string {
	var mu sync.Mutex
	var seen []string
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if c, err := deploymentConditionOf(ctx, namespace, name, "ReplicasUpToDate"); err == nil && c.Status == "False" {
				mu.Lock()
				if !containsAny(seen, c.Message) {
					seen = append(seen, c.Message)
				}
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(250 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return seen
	}
}

// containsAny reports whether any of messages contains part.
func containsAny(messages []string, part string) bool {
	for _, m := range messages {
		if strings.Contains(m, part) {
			return true
		}
	}
	return false
}
