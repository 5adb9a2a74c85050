package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// TestAnEngineSlowerThanThePodsReadyTimeoutBacksOff: under Kueue's waitForPodsReady (the stack's
// timeout, cluster.PodsReadyTimeout), a replica whose engine loads for longer is evicted at the
// timeout, and mdplane leaves its slot vacant for a backoff, saying why and until when, rather than
// rebuilding it at once to be evicted again; once the backoff has passed the slot is filled again.
// Near miss: a deployment whose engine loads within the timeout is admitted once and never evicted.
func TestAnEngineSlowerThanThePodsReadyTimeoutBacksOff(t *testing.T) {
	parallelWaiting(t, "Kueue's waitForPodsReady timeout, then the backoff after it")
	ctx := context.Background()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	queue(t, ctx, ownName(t, "cq"), a10gEntrance, ns, 2)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	loading := func(name string, load time.Duration) string {
		return strings.Replace(placementDeployment(ns, name, a10gType, 1, 1), "resources: {accelerator: 1}}",
			fmt.Sprintf("resources: {accelerator: 1}, env: [{name: %s, value: %q}]}", cluster.ReadyDelayEnv, load.String()), 1)
	}
	kubectlApply(t, loading("slow", 30*time.Minute))
	kubectlApply(t, loading("quick", 20*time.Second))
	eventually(t, 3*time.Minute, "quick Ready within the timeout", func() error { return running(ctx, ns, "quick", 1) })
	quick, err := pods(ctx, ns, "quick")
	if err != nil {
		t.Fatal(err)
	}

	var evicted v1alpha1.ReadyTimeout
	eventually(t, cluster.PodsReadyTimeout+2*time.Minute, "slow's r0 evicted at the timeout, its slot held for the backoff, and the deployment saying so", func() error {
		role := &v1alpha1.ModelRole{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "slow-server"}, role); err != nil {
			return err
		}
		evicted = role.Status.ReadyTimeouts["r0"]
		if evicted.Count != 1 || !strings.Contains(evicted.Message, "PodsReadyTimeout") {
			return fmt.Errorf("r0's PodsReady timeouts %+v, want one", evicted)
		}
		md, err := modelDeployment(ctx, ns, "slow")
		if err != nil {
			return err
		}
		want := "r0: Kueue evicted its group at the waitForPodsReady timeout 1 time(s) in a row"
		if until := evicted.Until.UTC().Format(time.RFC3339); !strings.Contains(md.Status.PhaseMessage, want) || !strings.Contains(md.Status.PhaseMessage, until) {
			return fmt.Errorf("phase message %q, want it to say %q and %s", md.Status.PhaseMessage, want, until)
		}
		return nil
	})
	if time.Until(evicted.Until.Time) > 10*time.Second {
		var replicas v1alpha1.ModelReplicaList
		if err := stack.Client.List(ctx, &replicas, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: "slow"}); err != nil {
			t.Fatal(err)
		}
		for _, r := range replicas.Items {
			if r.DeletionTimestamp == nil {
				t.Errorf("ModelReplica %s stands in r0's slot inside its backoff (until %s)", r.Name, evicted.Until)
			}
		}
	}
	eventually(t, time.Until(evicted.Until.Time)+time.Minute, "slow's r0 filled again once the backoff passed", func() error {
		var replicas v1alpha1.ModelReplicaList
		if err := stack.Client.List(ctx, &replicas, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: "slow"}); err != nil {
			return err
		}
		for _, r := range replicas.Items {
			if r.DeletionTimestamp == nil && !r.CreationTimestamp.Before(&metav1.Time{Time: evicted.Evicted.Time}) {
				return nil
			}
		}
		return fmt.Errorf("no replica created in r0's slot since the eviction")
	})

	wl := &kueuev1beta2.Workload{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: quick[0].Labels["kueue.x-k8s.io/pod-group-name"]}, wl); err != nil {
		t.Fatal(err)
	}
	for _, c := range wl.Status.Conditions {
		if c.Type == kueuev1beta2.WorkloadEvicted && c.Status == metav1.ConditionTrue {
			t.Errorf("quick's group was evicted: %s: %s", c.Reason, c.Message)
		}
	}
	now, err := pods(ctx, ns, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != 1 || now[0].UID != quick[0].UID {
		t.Errorf("quick's Pod was replaced")
	}
}
