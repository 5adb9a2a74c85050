package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// poolTaint is the taint a GPU pool dedicates to its nodes: the one a flavor tolerates.
var poolTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}

// taintedType makes a managed InstanceType whose one node is the test's own (a product no other
// node has), tainted with taints, and waits for the type to be Active; it returns the type's and
// the node's names.
func taintedType(t *testing.T, ctx context.Context, namespace string, taints ...corev1.Taint) (string, string) {
	t.Helper()
	typeName, nodeName := ownName(t, "type"), ownName(t, "node")
	product := "NVIDIA-" + ownName(t, "gpu")
	node, err := stack.AddNode(ctx, cluster.NodeOptions{Name: nodeName, Product: product, GPUs: 4, Taints: taints})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: typeName}})
		_ = stack.Client.Delete(context.Background(), node)
	})
	applyManagedType(t, namespace, typeName, fmt.Sprintf(`
  acceleratable: true
  os: linux
  arch: amd64
  unitResources: {cpu: "4", ram: 16Gi}
  localStorage: 10Gi
  acceleratorGroup: nvidia-%s`, ownName(t, "gpu")))
	awaitInstanceType(t, ctx, typeName, workerv1.InstanceTypePhaseActive)
	return typeName, nodeName
}

// flavorTolerates waits until the type's flavor tolerates exactly want, and returns it.
func flavorTolerates(t *testing.T, ctx context.Context, typeName string, want ...corev1.Taint) *kueuev1beta2.ResourceFlavor {
	t.Helper()
	var tolerations []corev1.Toleration
	for _, taint := range want {
		tol := corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpExists, Effect: taint.Effect}
		if taint.Value != "" {
			tol.Operator, tol.Value = corev1.TolerationOpEqual, taint.Value
		}
		tolerations = append(tolerations, tol)
	}
	rf := &kueuev1beta2.ResourceFlavor{}
	eventually(t, time.Minute, fmt.Sprintf("the flavor of %s tolerating %v", typeName, want), func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, rf); err != nil {
			return err
		}
		if !slices.Equal(rf.Spec.Tolerations, tolerations) {
			return fmt.Errorf("it tolerates %v", rf.Spec.Tolerations)
		}
		return nil
	})
	return rf
}

// TestTransientTaintsLeaveTheFlavor: a node that is cordoned and tainted by autoscalers and
// lifecycle agents (every built-in transient key) changes neither its type's flavor nor the running
// Pods it holds. The type's one node carries the pool's taint; a replica runs there, its Pod
// tolerating it through the flavor. The node is then cordoned (Kubernetes adds its unschedulable
// taint) and given each transient key at once with one taint the pool dedicates anew: once the
// flavor tolerates that one, the controller has read the node with every transient taint, and the
// flavor tolerates the two dedicated taints only, under the same name; the Pod is the same Pod with
// the same tolerations, still Ready.
func TestTransientTaintsLeaveTheFlavor(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	typeName, nodeName := taintedType(t, ctx, ns, poolTaint)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	flavorTolerates(t, ctx, typeName, poolTaint)
	const name = "transient"
	kubectlApply(t, placementDeployment(ns, name, typeName, 1, 1))
	var before corev1.Pod
	eventually(t, 3*time.Minute, "the replica running", func() error {
		if err := running(ctx, ns, name, 1); err != nil {
			return err
		}
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		before = ps[0]
		return nil
	})

	node := &corev1.Node{}
	patchNode := func(change func(*corev1.Node)) {
		t.Helper()
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			t.Fatal(err)
		}
		orig := node.DeepCopy()
		change(node)
		if err := stack.Client.Patch(ctx, node, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
			t.Fatal(err)
		}
	}
	patchNode(func(n *corev1.Node) { n.Spec.Unschedulable = true })
	eventually(t, time.Minute, "Kubernetes tainting the cordoned node", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: nodeName}, node); err != nil {
			return err
		}
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnschedulable }) {
			return fmt.Errorf("taints %v", node.Spec.Taints)
		}
		return nil
	})
	// NoSchedule for every key, NoExecute ones included, so that the running Pod stays: the rule
	// reads the key, whatever the effect.
	transient := []string{"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler",
		"ignore-taint.cluster-autoscaler.kubernetes.io/cni", "startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver",
		"status-taint.cluster-autoscaler.kubernetes.io/gpu-health", "karpenter.sh/disrupted", "karpenter.sh/disruption",
		"karpenter.sh/unregistered", "cloud.google.com/impending-node-termination", "node.cluster.x-k8s.io/uninitialized"}
	dedicated := corev1.Taint{Key: "example.com/pool", Value: "inference", Effect: corev1.TaintEffectNoSchedule}
	patchNode(func(n *corev1.Node) {
		for _, key := range transient {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: "1764900000", Effect: corev1.TaintEffectNoSchedule})
		}
		n.Spec.Taints = append(n.Spec.Taints, dedicated)
	})

	t.Run("the flavor tolerates the pool's taints only, under its name", func(t *testing.T) {
		rf := flavorTolerates(t, ctx, typeName, dedicated, poolTaint)
		if want := map[string]string{workerv1.InstanceTypeNodeLabel(typeName): "true"}; !maps.Equal(rf.Spec.NodeLabels, want) {
			t.Errorf("the flavor selects %v, want %v", rf.Spec.NodeLabels, want)
		}
		cq := &kueuev1beta2.ClusterQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, cq); err != nil {
			t.Fatal(err)
		}
		if got := cq.Spec.ResourceGroups[0].Flavors[0].Name; string(got) != typeName {
			t.Errorf("the ClusterQueue admits through flavor %s, want %s", got, typeName)
		}
	})

	t.Run("the running Pod is the same, with the same tolerations, Ready", func(t *testing.T) {
		p := &corev1.Pod{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(&before), p); err != nil {
			t.Fatal(err)
		}
		if p.UID != before.UID || !ready(*p) || p.DeletionTimestamp != nil {
			t.Errorf("Pod %s: UID %s (was %s), Ready %v, deleting %v", p.Name, p.UID, before.UID, ready(*p), p.DeletionTimestamp != nil)
		}
		if !equality.Semantic.DeepEqual(p.Spec.Tolerations, before.Spec.Tolerations) {
			t.Errorf("Pod %s tolerates %v, was %v", p.Name, p.Spec.Tolerations, before.Spec.Tolerations)
		}
	})
}

// TestTheTransientTaintsSettingReachesTheFlavor: a taint key the Setting instance-type-transient-
// taints names, or one under a prefix it names, stops being tolerated as soon as the Setting is
// written, and is tolerated again once it is removed. No Pod is needed: the flavor says it.
func TestTheTransientTaintsSettingReachesTheFlavor(t *testing.T) {
	sequential(t, "writes the cluster-wide settings every flavor reads")
	ctx := context.Background()
	ns := ownName(t, "ns")
	health := corev1.Taint{Key: "health.example.com/xid-79", Effect: corev1.TaintEffectNoExecute}
	draining := corev1.Taint{Key: "example.com/draining", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	typeName, _ := taintedType(t, ctx, ns, poolTaint, health, draining)
	t.Cleanup(func() {
		if _, err := stack.Kubectl("delete", "environmentconfig", "mdplane-settings", "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	flavorTolerates(t, ctx, typeName, draining, health, poolTaint)

	kubectlApply(t, settingsObject("instance-type-transient-taints", "health.example.com/,example.com/draining"))
	flavorTolerates(t, ctx, typeName, poolTaint)

	if _, err := stack.Kubectl("delete", "environmentconfig", "mdplane-settings"); err != nil {
		t.Fatal(err)
	}
	flavorTolerates(t, ctx, typeName, draining, health, poolTaint)
}
