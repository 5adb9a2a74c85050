package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestReplicaEventsFollowTheirTriggers: a member whose container
// restart count rises is told on the deployment as ReplicaRestarted, once for that rise however
// often the controller looks again; a member deleted by hand is told as ReplicaLeaving, once, and
// its replica is rebuilt.
func TestReplicaEventsFollowTheirTriggers(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, clusterQueue = "events", "replicaevents-h20"
	applyCluster(t, ctx, ns)
	queue(t, ctx, clusterQueue, h20Entrance, ns, 1)
	defer tearDown(t, ctx, ns)
	kubectlApply(t, deploymentOnH20(ns, name, "server Server 1 1"))
	eventually(t, 3*time.Minute, "one replica running", func() error { return running(ctx, ns, name, 1) })
	member := memberAt(t, ctx, ns, name, "0")
	if len(member.Status.ContainerStatuses) == 0 {
		t.Fatalf("Pod %s reports no container", member.Name)
	}

	// KWOK plays the kubelet and never restarts a container, so the test reports one as the kubelet
	// would: the container's restartCount through the Pod's status subresource (as the stack's
	// administrator, since KWOK's own identity is not the test's to borrow).
	patch := fmt.Sprintf(`{"status":{"containerStatuses":[{"name":%q,"restartCount":1}]}}`, member.Status.ContainerStatuses[0].Name)
	if err := stack.Client.Status().Patch(ctx, &member, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a ReplicaRestarted event naming the replica, the member, the count and the lease window", func() error {
		return eventSeen(ctx, ns, "ReplicaRestarted", "replica r0 of role server has restarted 1 time(s)", member.Name, "30s kv_lease_duration window")
	})
	// Wake the controller on the same count again (a label is a Pod update it watches), then look.
	if _, err := stack.Kubectl("label", "pod", member.Name, "-n", ns, "e2e.mdplane.io/poke=1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	if err := toldOnce(ctx, ns, "ReplicaRestarted", member.Name); err != nil {
		t.Error(err)
	}

	if _, err := stack.Kubectl("delete", "pod", member.Name, "-n", ns, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a ReplicaLeaving event naming the member deleted and the lease window", func() error {
		return eventSeen(ctx, ns, "ReplicaLeaving", "replica r0 of role server lost member "+member.Name, "the Pod was deleted", "30s kv_lease_duration window")
	})
	eventually(t, 2*time.Minute, "r0 rebuilt with a new Pod", func() error {
		if err := running(ctx, ns, name, 1); err != nil {
			return err
		}
		now, err := leaderOf(ctx, ns, name, "0")
		if err == nil && now.UID == member.UID {
			return fmt.Errorf("r0 still runs Pod %s", now.UID)
		}
		return err
	})
	for _, reason := range []string{"ReplicaLeaving", "ReplicaRestarted"} {
		if err := toldOnce(ctx, ns, reason, member.Name); err != nil {
			t.Error(err)
		}
	}
}

// toldOnce reports an error unless exactly one event of reason names the Pod, and it was recorded
// once (the recorder turns a repeat into a series on the same event).
func toldOnce(ctx context.Context, namespace, reason, pod string) error {
	evs := &corev1.EventList{}
	if err := stack.Client.List(ctx, evs, client.InNamespace(namespace)); err != nil {
		return err
	}
	var told []string
	for _, e := range evs.Items {
		if e.Reason != reason || !strings.Contains(e.Message, pod) {
			continue
		}
		times := max(e.Count, 1)
		if e.Series != nil {
			times = max(times, e.Series.Count)
		}
		told = append(told, fmt.Sprintf("%q ×%d", e.Message, times))
	}
	if len(told) != 1 || !strings.HasSuffix(told[0], "×1") {
		return fmt.Errorf("%s events naming %s: want one, told once; got %v", reason, pod, told)
	}
	return nil
}
