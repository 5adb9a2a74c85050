package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestAKubeletEvictedMemberIsRebuilt: a member the kubelet evicts under node pressure stays as a Pod
// in phase Failed, reason Evicted, and nothing deletes it; its replica is rebuilt as a deleted
// member's is, and its sibling is left alone. The test writes the Pod's status as the kubelet does
// (KWOK plays no node pressure).
func TestAKubeletEvictedMemberIsRebuilt(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const name = "pressed"
	ns, before := runOnOwnNode(t, ctx, name, 2)

	evictAsTheKubelet(t, ctx, before["0"])

	eventually(t, 3*time.Minute, "r0 rebuilt, r1 untouched, the deployment Ready", func() error {
		if err := running(ctx, ns, name, 2); err != nil {
			return err
		}
		after, err := standing(ctx, ns, name)
		if err != nil {
			return err
		}
		if after["0"].UID == before["0"].UID {
			return fmt.Errorf("r0 is still the evicted Pod %s (phase %s)", after["0"].Name, after["0"].Status.Phase)
		}
		if after["1"].UID != before["1"].UID {
			return fmt.Errorf("r1 was rebuilt too")
		}
		return phaseReady(ctx, ns, name)
	})
	eventually(t, time.Minute, "a ReplicaEvicted event quoting the kubelet", func() error {
		return eventSeen(ctx, ns, "ReplicaEvicted", "replica r0", "evicted: TerminationByKubelet: The node was low on resource: memory.")
	})
}

// evictAsTheKubelet writes a Pod's status as the kubelet does when it evicts the Pod under memory
// pressure. Others may have written the Pod since the test read it, so it reads the Pod again on a
// conflict, as any client would.
func evictAsTheKubelet(t *testing.T, ctx context.Context, pod corev1.Pod) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		evicted := &corev1.Pod{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(&pod), evicted); err != nil {
			return err
		}
		now := metav1.Now()
		evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
		for i := range evicted.Status.Conditions {
			if evicted.Status.Conditions[i].Type == corev1.PodReady || evicted.Status.Conditions[i].Type == corev1.ContainersReady {
				evicted.Status.Conditions[i].Status, evicted.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, now
			}
		}
		evicted.Status.Conditions = append(evicted.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "TerminationByKubelet", Message: "The node was low on resource: memory.", LastTransitionTime: now})
		return stack.Client.Status().Update(ctx, evicted)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// runOnOwnNode runs a one-role deployment of replicas one-card replicas on a node, pool and queue
// of the test's own, and returns its namespace and its Pods by ordinal once each runs.
func runOnOwnNode(t *testing.T, ctx context.Context, name string, replicas int) (string, map[string]corev1.Pod) {
	t.Helper()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	addNode := ownPool(t, ctx, ownName(t, "cq"), a10gEntrance, ns, 8)
	addNode(ownName(t, "node"))
	kubectlApply(t, placementDeployment(ns, name, a10gType, replicas, 1))
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	eventually(t, 3*time.Minute, "every replica running", func() error { return running(ctx, ns, name, replicas) })
	before, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return ns, before
}

// phaseReady passes once the deployment's phase is Ready, and says its phase and message otherwise.
func phaseReady(ctx context.Context, namespace, name string) error {
	md, err := modelDeployment(ctx, namespace, name)
	if err != nil {
		return err
	}
	if md.Status.Phase != workerv1.PhaseReady {
		return fmt.Errorf("phase %s: %s", md.Status.Phase, md.Status.PhaseMessage)
	}
	return nil
}
