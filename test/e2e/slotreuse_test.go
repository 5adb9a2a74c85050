package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// testHold is the finalizer the test puts on a Workload to keep it standing after its Pods are
// gone, as Kueue's own finalizer does while Kueue is down.
const testHold = "e2e.mdplane.io/hold"

// TestARebuiltReplicaWaitsForItsSlotsOldWorkload: a rebuilt replica's group takes its slot's pod
// group name, so its members are created only once the old group's Workload is gone, not while
// Kueue may still account for it under that name (the sequence a Kueue restart during a rebuild
// produced: the new group skipped as "already accounted in cache" for minutes). The test keeps the
// old Workload standing with a finalizer of its own, as Kueue's does while Kueue is down.
func TestARebuiltReplicaWaitsForItsSlotsOldWorkload(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const name = "reused"
	ns, before := runOnOwnNode(t, ctx, name, 1)
	member := before["0"]
	group := member.Labels[workerv1.LabelPodGroupName]
	old := &kueue.Workload{}
	if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: group}, old); err != nil {
		t.Fatalf("the group's Workload %s: %v", group, err)
	}
	eventually(t, time.Minute, "the test's finalizer on the old Workload", func() error {
		wl := &kueue.Workload{}
		if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: group}, wl); err != nil {
			return err
		}
		wl.Finalizers = append(wl.Finalizers, testHold)
		return stack.Client.Update(ctx, wl)
	})
	t.Cleanup(func() { _ = releaseWorkload(ctx, ns, group) })

	if err := stack.Client.Delete(ctx, &member); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "the old member gone and its Workload deleted but standing", func() error {
		wl := &kueue.Workload{}
		if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: group}, wl); err != nil {
			return err
		}
		if wl.DeletionTimestamp == nil {
			return fmt.Errorf("Workload %s not deleted yet", group)
		}
		return noMembers(ctx, ns, name, group)
	})
	// The members controller looks again every 2 s while the slot is held; five looks find it held.
	time.Sleep(10 * time.Second)
	if err := noMembers(ctx, ns, name, group); err != nil {
		t.Fatalf("members were created while the slot's old Workload stood: %v", err)
	}

	eventually(t, time.Minute, "the old Workload released", func() error { return releaseWorkload(ctx, ns, group) })
	eventually(t, 3*time.Minute, "the rebuilt replica running in a new Workload", func() error {
		if err := running(ctx, ns, name, 1); err != nil {
			return err
		}
		wl := &kueue.Workload{}
		if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: group}, wl); err != nil {
			return err
		}
		if wl.UID == old.UID {
			return fmt.Errorf("Workload %s is still the old one", group)
		}
		return phaseReady(ctx, ns, name)
	})
}

// noMembers passes while no Pod of the deployment stands under the group's name.
func noMembers(ctx context.Context, namespace, deployment, group string) error {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if p.Labels[workerv1.LabelPodGroupName] == group {
			return fmt.Errorf("Pod %s (phase %s) stands in group %s", p.Name, p.Status.Phase, group)
		}
	}
	return nil
}

// releaseWorkload takes the test's finalizer off the group's Workload, if it still stands.
func releaseWorkload(ctx context.Context, namespace, group string) error {
	wl := &kueue.Workload{}
	if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: group}, wl); err != nil {
		return client.IgnoreNotFound(err)
	}
	kept := make([]string, 0, len(wl.Finalizers))
	for _, f := range wl.Finalizers {
		if f != testHold {
			kept = append(kept, f)
		}
	}
	wl.Finalizers = kept
	return stack.Client.Update(ctx, wl)
}
