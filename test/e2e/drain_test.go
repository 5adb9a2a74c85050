package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// ownPool makes the flavor of a pool of nodes of the test's own, labelled cluster.PoolLabel=<pool> and
// carrying the test's owner taint, and a ClusterQueue of gpus in it behind entrance in namespace.
// It returns a function adding a node of four GPUs to the pool, by name.
func ownPool(t *testing.T, ctx context.Context, clusterQueue, entrance, namespace string, gpus int64) func(name string) string {
	t.Helper()
	pool := ownName(t, "pool")
	flavor := &kueuev1beta2.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: pool},
		Spec: kueuev1beta2.ResourceFlavorSpec{
			NodeLabels:  map[string]string{cluster.PoolLabel: pool},
			Tolerations: []corev1.Toleration{{Key: ownerTaintKey, Operator: corev1.TolerationOpEqual, Value: ownerTaint(t).Value, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if err := stack.Client.Create(ctx, flavor); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), flavor) })
	queueOfFlavor(t, ctx, flavor.Name, clusterQueue, entrance, namespace, gpus)
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: clusterQueue}})
	})
	return func(name string) string {
		t.Helper()
		node, err := stack.AddNode(ctx, cluster.NodeOptions{Name: name, GPUs: 4, Labels: map[string]string{cluster.PoolLabel: pool}, Taints: []corev1.Taint{ownerTaint(t)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), node) })
		return name
	}
}

// a10gType is examples/cluster.yaml's A10G InstanceType, whose LocalQueue is a10gEntrance.
const a10gType = "gpustack-nvidia-a10g-linux-amd64"

// serving counts the replicas of a deployment whose size members all stand Ready.
func serving(ctx context.Context, namespace, deployment string, size int) (int, error) {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return 0, err
	}
	readyMembers := map[string]int{}
	for _, p := range ps {
		if p.DeletionTimestamp == nil && ready(p) {
			readyMembers[p.Labels[workerv1.LabelPodOrdinal]]++
		}
	}
	n := 0
	for _, members := range readyMembers {
		if members == size {
			n++
		}
	}
	return n, nil
}

// evict evicts a Pod through the eviction API as a drain does, retrying while a disruption budget
// refuses it (429) as kubectl drain does.
func evict(t *testing.T, ctx context.Context, pod *corev1.Pod) {
	t.Helper()
	eventually(t, 3*time.Minute, "Pod "+pod.Name+" evicted", func() error {
		err := stack.Client.SubResource("eviction").Create(ctx, pod, &policyv1.Eviction{})
		if apierrors.IsTooManyRequests(err) {
			return err
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
}

// TestADrainTakesOneReplicaAtATime: `kubectl drain` of a node that holds both replicas of a role
// (two members each) completes, and the replicas are rebuilt on the pool's other node one at a time:
// the role's PodDisruptionBudget refuses the drain a second eviction until the first replica rebuilt
// is Ready again, so at least one of the two serves at every moment.
func TestADrainTakesOneReplicaAtATime(t *testing.T) {
	parallelLong(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, size = "drained", 2
	applyCluster(t, ctx, ns)
	addNode := ownPool(t, ctx, ownName(t, "cq"), a10gEntrance, ns, 8)
	first := addNode(ownName(t, "first"))
	// Members of two: a replica is a gang, and the budget counts members.
	kubectlApply(t, strings.Replace(placementDeployment(ns, name, a10gType, 2, 1), "{name: server,", fmt.Sprintf("{name: server, size: %d,", size), 1))
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	eventually(t, 3*time.Minute, "both replicas running on the pool's one node", func() error { return running(ctx, ns, name, 2*size) })
	budget := &policyv1.PodDisruptionBudget{}
	eventually(t, time.Minute, "the role's PodDisruptionBudget allowing one eviction", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-server"}, budget); err != nil {
			return err
		}
		if owner := metav1.GetControllerOf(budget); owner == nil || owner.Kind != "ModelRole" {
			return fmt.Errorf("the budget is controlled by %v, not by its ModelRole", owner)
		}
		if budget.Spec.MinAvailable == nil || budget.Spec.MinAvailable.IntValue() != 2*size-1 || budget.Status.DisruptionsAllowed != 1 {
			return fmt.Errorf("minAvailable %v, disruptions allowed %d; want %d and 1", budget.Spec.MinAvailable, budget.Status.DisruptionsAllowed, 2*size-1)
		}
		return nil
	})
	before, err := pods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	addNode(ownName(t, "second"))

	// Watch the replicas serving while the drain runs: never fewer than one.
	var (
		mu     sync.Mutex
		fewest = 2
	)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			if n, err := serving(ctx, ns, name, size); err == nil {
				mu.Lock()
				fewest = min(fewest, n)
				mu.Unlock()
			}
		}
	}()
	out, err := stack.Kubectl("drain", first, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=5m")
	close(stop)
	<-watched
	if err != nil {
		t.Fatalf("the drain did not complete: %v", err)
	}
	if !strings.Contains(out, "disruption budget") {
		t.Errorf("the drain was never held by the budget; its output:\n%s", out)
	}
	if fewest < 1 {
		t.Errorf("%d replicas served at the drain's worst moment, want at least 1", fewest)
	}
	eventually(t, 3*time.Minute, "both replicas rebuilt and running on the other node", func() error {
		if err := running(ctx, ns, name, 2*size); err != nil {
			return err
		}
		now, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		for _, p := range now {
			if p.Spec.NodeName == first {
				return fmt.Errorf("Pod %s still on the drained node", p.Name)
			}
			for _, b := range before {
				if p.UID == b.UID {
					return fmt.Errorf("Pod %s was not rebuilt", p.Name)
				}
			}
		}
		return nil
	})
	eventually(t, time.Minute, "a ReplicaEvicted event for each replica", func() error {
		for _, replica := range []string{"replica r0", "replica r1"} {
			if err := eventSeen(ctx, ns, "ReplicaEvicted", replica, "evicted"); err != nil {
				return err
			}
		}
		return nil
	})
}

// TestALostNodesReplicasAreRebuiltElsewhere: a node that stops reporting leaves the replica on it
// standing, not Ready, and the deployment names the node; once Kubernetes removes its Pods (here:
// the Node deleted, as a cluster replacing nodes does, and the Pod garbage collector) the replica is
// rebuilt on the pool's other node, and the deployment no longer names it. Its sibling on another
// node is untouched throughout.
func TestALostNodesReplicasAreRebuiltElsewhere(t *testing.T) {
	parallelWaiting(t, "the node lifecycle controller's grace period and the Pod garbage collector's quarantine")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "stranded"
	applyCluster(t, ctx, ns)
	addNode := ownPool(t, ctx, ownName(t, "cq"), a10gEntrance, ns, 8)
	lost := addNode(ownName(t, "lost"))
	kubectlApply(t, placementDeployment(ns, name, a10gType, 1, 1))
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	eventually(t, 3*time.Minute, "r0 running on the first node", func() error { return running(ctx, ns, name, 1) })
	// r1 goes to a node added after r0 is placed, so that only r0 stands on the node that is lost.
	kept := addNode(ownName(t, "kept"))
	if _, err := stack.Kubectl("cordon", lost); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json", "-p", `[{"op":"replace","path":"/spec/roles/0/replicas","value":2}]`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "r1 running on the second node", func() error { return running(ctx, ns, name, 2) })
	if _, err := stack.Kubectl("uncordon", lost); err != nil {
		t.Fatal(err)
	}
	before, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if before["0"].Spec.NodeName != lost || before["1"].Spec.NodeName != kept {
		t.Fatalf("r0 on %s and r1 on %s, want %s and %s", before["0"].Spec.NodeName, before["1"].Spec.NodeName, lost, kept)
	}

	if err := stack.StopHeartbeat(ctx, lost); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the deployment naming the node that stopped reporting", func() error {
		md, err := modelDeployment(ctx, ns, name)
		if err != nil {
			return err
		}
		if want := "role server has 1 of 2 replicas Ready (r0: node " + lost + " stopped reporting (Ready Unknown since "; !strings.Contains(md.Status.PhaseMessage, want) {
			return fmt.Errorf("phase message %q, want it to say %q", md.Status.PhaseMessage, want)
		}
		return nil
	})
	node := &corev1.Node{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Name: lost}, node); err != nil {
		t.Fatal(err)
	}
	if err := stack.Client.Delete(ctx, node); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "r0 rebuilt on the other node, r1 untouched, and no node named", func() error {
		if err := running(ctx, ns, name, 2); err != nil {
			return err
		}
		now, err := standing(ctx, ns, name)
		if err != nil {
			return err
		}
		if now["0"].UID == before["0"].UID || now["0"].Spec.NodeName != kept {
			return fmt.Errorf("r0 is Pod %s on %s, want a new Pod on %s", now["0"].UID, now["0"].Spec.NodeName, kept)
		}
		if now["1"].UID != before["1"].UID {
			return fmt.Errorf("r1 was rebuilt too")
		}
		return phaseReady(ctx, ns, name)
	})
}
