package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/controllers/inventory"
	"github.com/mdplane/mdplane/controllers/queues"
	"github.com/mdplane/mdplane/test/cluster"
)

// applyManagedType creates namespace and an InstanceType with spec (YAML under spec:), unlabelled:
// mdplane manages its queues and derives its status from the nodes, as on any cluster.
func applyManagedType(t *testing.T, namespace, name, spec string) {
	t.Helper()
	kubectlApply(t, `apiVersion: v1
kind: Namespace
metadata: {name: `+namespace+`}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata:
  name: `+name+`
spec:`+spec+"\n")
}

// awaitInstanceType waits until the controllers have published the type's entrance and its phase is
// phase, and returns it as it then is.
func awaitInstanceType(t *testing.T, ctx context.Context, name, phase string) *workerv1.InstanceType {
	t.Helper()
	it := &workerv1.InstanceType{}
	eventually(t, 2*time.Minute, fmt.Sprintf("InstanceType %s: its entrance published, phase %s", name, phase), func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: name}, it); err != nil {
			return err
		}
		if want := workerv1.EntranceName(name); it.Status.Entrance != want || it.Status.Phase != phase {
			return fmt.Errorf("entrance %q (want %s), phase %q: %s", it.Status.Entrance, want, it.Status.Phase, it.Status.PhaseMessage)
		}
		return nil
	})
	return it
}

// typeCondition is an InstanceType's condition of type typ, or an error naming what there is.
func typeCondition(it *workerv1.InstanceType, typ, status, reason string, parts ...string) error {
	c := meta.FindStatusCondition(it.Status.Conditions, typ)
	if c == nil {
		return fmt.Errorf("no %s condition: %+v", typ, it.Status.Conditions)
	}
	if string(c.Status) != status || c.Reason != reason {
		return fmt.Errorf("%s is %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	for _, p := range parts {
		if !strings.Contains(c.Message, p) {
			return fmt.Errorf("%s says %q, not %q", typ, c.Message, p)
		}
	}
	return nil
}

// typeQuotas is what the ClusterQueue mdplane built for a type of unit resources (cpu, ram,
// localStorage) holds with cards accelerators: controllers/queues' Quotas, the unit resources
// scaled by the cards.
func typeQuotas(cards int64, cpu, ram, storage string) corev1.ResourceList {
	scaled := func(unit string) resource.Quantity {
		q := resource.MustParse(unit)
		q.Mul(cards)
		return q
	}
	return corev1.ResourceList{
		cluster.GPUResource: *resource.NewQuantity(cards, resource.DecimalSI), corev1.ResourceCPU: scaled(cpu),
		corev1.ResourceMemory: scaled(ram), corev1.ResourceEphemeralStorage: scaled(storage),
	}
}

// clusterQueueHolds passes once the ClusterQueue's one flavor holds exactly want, by amount.
func clusterQueueHolds(ctx context.Context, name string, want corev1.ResourceList) error {
	cq := &kueuev1beta2.ClusterQueue{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
		return err
	}
	if len(cq.Spec.ResourceGroups) != 1 || len(cq.Spec.ResourceGroups[0].Flavors) != 1 {
		return fmt.Errorf("ClusterQueue %s: resource groups %+v", name, cq.Spec.ResourceGroups)
	}
	got := corev1.ResourceList{}
	for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
		got[r.Name] = r.NominalQuota
	}
	same := len(got) == len(want)
	for k, w := range want {
		g, ok := got[k]
		same = same && ok && g.Cmp(w) == 0
	}
	if !same {
		return fmt.Errorf("ClusterQueue %s holds %v, want %v", name, quotaString(got), quotaString(want))
	}
	return nil
}

func quotaString(l corev1.ResourceList) string {
	parts := make([]string, 0, len(l))
	for k, q := range l {
		parts = append(parts, string(k)+"="+q.String())
	}
	return "{" + strings.Join(parts, " ") + "}"
}

// heldOn is what the Pods bound to the nodes hold of a resource, whatever their namespace, as the
// scheduler counts it.
func heldOn(ctx context.Context, resourceName corev1.ResourceName, nodes ...string) (int64, error) {
	var held int64
	for _, n := range nodes {
		list := &corev1.PodList{}
		if err := stack.Client.List(ctx, list, client.MatchingFields{"spec.nodeName": n}); err != nil {
			return 0, err
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			q := inventory.PodRequest(p, resourceName)
			held += q.Value()
		}
	}
	return held, nil
}

// TestInstanceTypeFromNodes: an InstanceType's status, and so its managed queues, follow the nodes
// of its accelerator group, which nobody but the nodes' labels and allocatable tells mdplane.
//
// With no node of group nvidia-l4 the type is Preparing (NodesAvailable False NoMatchingNodes), its
// manufacturer read from the group's name, its ClusterQueue built with no quota, and a deployment on
// it waits, saying in QuotaReserved's message (reason Pending, the spec's), and so in kubectl
// describe, that the type has no nodes. Two nodes labelled by GPU feature discovery as NVIDIA-L4 with four GPUs each
// make it Active with capacity 8, the detail their labels give, quota for 8 cards (unit resources
// scaled), and the deployment admitted through the LocalQueue mdplane created in its namespace and
// running; remaining is what the Pods bound to those nodes leave. A third node raises capacity and
// quota to 12, cordoning it lowers them to 8 (the condition names it); with the deployment gone,
// deleting the nodes one by one lowers them to 4 and then 0, Preparing again, the detail kept as last
// observed.
func TestInstanceTypeFromNodes(t *testing.T) {
	parallel(t) // its nodes are of a product no other test's type selects, and off the test queues' pool
	ctx := context.Background()
	ns := ownName(t, "ns")
	const typeName, product = "queues-nvidia-l4-linux-amd64", "NVIDIA-L4"
	const unitCPU, unitRAM, localStorage = "4", "16Gi", "50Gi"
	nodes := []string{"l4-node-0", "l4-node-1", "l4-node-2"}
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		for _, n := range nodes {
			_ = stack.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		_ = stack.Client.Delete(ctx, &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: typeName}})
	})
	applyManagedType(t, ns, typeName, `
  acceleratable: true
  acceleratorGroup: nvidia-l4
  os: linux
  arch: amd64
  unitResources: {cpu: "`+unitCPU+`", ram: `+unitRAM+`}
  localStorage: `+localStorage)
	entrance := workerv1.EntranceName(typeName)
	quotas := func(cards int64) corev1.ResourceList { return typeQuotas(cards, unitCPU, unitRAM, localStorage) }
	it := &workerv1.InstanceType{}
	get := func() error { return stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, it) }
	// capacity passes once the type counts cards and its ClusterQueue holds quota for them.
	capacity := func(cards int64) func() error {
		return func() error {
			if err := get(); err != nil {
				return err
			}
			if v := it.Status.Accelerator; v == nil || v.Capacity == nil || v.Capacity.Value() != cards {
				return fmt.Errorf("status.accelerator %+v, want capacity %d (%s)", v, cards, it.Status.PhaseMessage)
			}
			return clusterQueueHolds(ctx, typeName, quotas(cards))
		}
	}

	t.Run("with no node of its group the type is Preparing and its queue has no quota", func(t *testing.T) {
		awaitInstanceType(t, ctx, typeName, workerv1.InstanceTypePhasePreparing)
		eventually(t, time.Minute, "NodesAvailable False, the manufacturer from the group's name, the queues built empty", func() error {
			if err := get(); err != nil {
				return err
			}
			if err := typeCondition(it, workerv1.InstanceTypeNodesAvailable, "False", workerv1.ReasonNoMatchingNodes, "no node offers accelerator group nvidia-l4"); err != nil {
				return err
			}
			if err := typeCondition(it, workerv1.InstanceTypeDetailObserved, "True", workerv1.ReasonGroupName); err != nil {
				return err
			}
			if d := it.Status.Detail; d == nil || d.Manufacturer != workerv1.ManufacturerNVIDIA || d.Product != "" {
				return fmt.Errorf("status.detail %+v, want manufacturer nvidia alone", d)
			}
			if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, &kueuev1beta2.ResourceFlavor{}); err != nil {
				return err
			}
			cq := &kueuev1beta2.ClusterQueue{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, cq); err != nil {
				return err
			}
			if s := cq.Spec.AdmissionChecksStrategy; s == nil || len(s.AdmissionChecks) != 1 || s.AdmissionChecks[0].Name != admissioncheck.CheckName {
				return fmt.Errorf("admission checks %+v", s)
			}
			if cq.Labels["app.kubernetes.io/managed-by"] != "mdplane" {
				return fmt.Errorf("ClusterQueue not labelled as mdplane's: %v", cq.Labels)
			}
			return clusterQueueHolds(ctx, typeName, quotas(0))
		})
	})

	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: l4, namespace: `+ns+`}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 2, instanceType: `+typeName+`, resources: {accelerator: 1}}
`)
	noNodes := "InstanceType " + typeName + " has no nodes"

	t.Run("a deployment on it waits, and says the type has no nodes", func(t *testing.T) {
		eventually(t, time.Minute, "the LocalQueue named by the entrance in the deployment's namespace", func() error {
			lq := &kueuev1beta2.LocalQueue{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: entrance}, lq); err != nil {
				return err
			}
			if lq.Spec.ClusterQueue != kueuev1beta2.ClusterQueueReference(typeName) {
				return fmt.Errorf("LocalQueue points at %s", lq.Spec.ClusterQueue)
			}
			return nil
		})
		eventually(t, 2*time.Minute, "QuotaReserved False Pending, saying the type has no nodes", func() error {
			c, err := deploymentConditionOf(ctx, ns, "l4", "QuotaReserved")
			if err != nil {
				return err
			}
			if c.Status != "False" || c.Reason != "Pending" || !strings.Contains(c.Message, noNodes) {
				return fmt.Errorf("QuotaReserved %+v, want False Pending saying %q", c, noNodes)
			}
			return nil
		})
		// Read again, as a person would: Crossplane applies each render's status with server-side
		// apply, so a render from a cache a moment behind (a busy machine) puts the previous
		// QuotaReserved back until the next render (a change, or Crossplane's poll) writes it again.
		eventually(t, 2*time.Minute, "kubectl describe saying the type has no nodes", func() error {
			out, err := stack.Kubectl("describe", "modeldeployment", "l4", "-n", ns)
			if err != nil {
				return err
			}
			if !strings.Contains(out, noNodes) {
				return fmt.Errorf("kubectl describe modeldeployment l4 does not say %q:\n%s", noNodes, out)
			}
			return nil
		})
		ps, err := pods(ctx, ns, "l4")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Spec.NodeName != "" {
				t.Errorf("Pod %s was scheduled on %s while its type has no quota", p.Name, p.Spec.NodeName)
			}
		}
	})

	owner := ownerTaint(t)
	addNode := func(t *testing.T, name string) *corev1.Node {
		t.Helper()
		n, err := stack.AddNode(ctx, cluster.NodeOptions{Name: name, Product: product, GPUs: 4, Taints: []corev1.Taint{owner}})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	t.Run("two NVIDIA-L4 nodes of four GPUs make it Active with 8 cards, and the deployment runs", func(t *testing.T) {
		first := addNode(t, nodes[0])
		addNode(t, nodes[1])
		eventually(t, 2*time.Minute, "capacity 8 and quota for 8 cards", capacity(8))
		eventually(t, time.Minute, "phase Active, the detail from the nodes' labels", func() error {
			if err := get(); err != nil {
				return err
			}
			if it.Status.Phase != workerv1.InstanceTypePhaseActive {
				return fmt.Errorf("phase %q: %s", it.Status.Phase, it.Status.PhaseMessage)
			}
			if err := typeCondition(it, workerv1.InstanceTypeNodesAvailable, "True", workerv1.ReasonSchedulableNodes, "with 8 nvidia.com/gpu"); err != nil {
				return err
			}
			if err := typeCondition(it, workerv1.InstanceTypeDetailObserved, "True", workerv1.ReasonNodeLabels); err != nil {
				return err
			}
			mib, err := strconv.ParseInt(first.Labels[cluster.LabelGPUMemory], 10, 64)
			if err != nil {
				return err
			}
			memory := resource.NewQuantity(mib<<20, resource.BinarySI)
			d := it.Status.Detail
			if d == nil || d.Manufacturer != workerv1.ManufacturerNVIDIA || d.Product != product || d.Memory == nil || d.Memory.Cmp(*memory) != 0 ||
				d.Family != first.Labels[cluster.LabelGPUFamily] ||
				d.ComputeCapability != first.Labels[cluster.LabelGPUComputeMajor]+"."+first.Labels[cluster.LabelGPUComputeMinor] {
				return fmt.Errorf("status.detail %+v (memory %v), want nvidia, %s, %s, as node %s is labelled: %v", d, d.Memory, product, memory, first.Name, first.Labels)
			}
			return nil
		})
		eventually(t, 3*time.Minute, "both replicas admitted through the managed queues and running", func() error {
			return running(ctx, ns, "l4", 2)
		})
		eventually(t, 2*time.Minute, "the deployment Ready", func() error {
			status, err := deploymentCondition(ctx, ns, "l4", "Ready")
			if err != nil || status != "True" {
				return fmt.Errorf("Ready=%s: %v", status, err)
			}
			return nil
		})
		// The type's flavor pins its Pods to its nodes; remaining counts what every Pod bound there
		// leaves, the deployment's and any other.
		eventually(t, time.Minute, "remaining is the 8 cards less what the Pods bound to the L4 nodes hold", func() error {
			if err := get(); err != nil {
				return err
			}
			held, err := heldOn(ctx, cluster.GPUResource, nodes[:2]...)
			if err != nil {
				return err
			}
			v := it.Status.Accelerator
			if v == nil || v.Remaining == nil || v.Remaining.Value() != 8-held {
				return fmt.Errorf("status.accelerator %+v, want remaining %d (Pods on the L4 nodes hold %d)", v, 8-held, held)
			}
			return typeCondition(it, workerv1.InstanceTypeCapacityFree, "True", workerv1.ReasonFree)
		})
		ps, err := pods(ctx, ns, "l4")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Spec.NodeName != nodes[0] && p.Spec.NodeName != nodes[1] {
				t.Errorf("Pod %s is bound to %s, not to one of the type's nodes %v", p.Name, p.Spec.NodeName, nodes[:2])
			}
		}
	})

	t.Run("a third node raises capacity and quota to 12, cordoning it lowers them to 8", func(t *testing.T) {
		addNode(t, nodes[2])
		eventually(t, 2*time.Minute, "capacity 12 and quota for 12 cards", capacity(12))
		if _, err := stack.Kubectl("cordon", nodes[2]); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "capacity 8 and quota for 8 cards", capacity(8))
		if err := typeCondition(it, workerv1.InstanceTypeNodesAvailable, "True", workerv1.ReasonSchedulableNodes, nodes[2]+" cordoned"); err != nil {
			t.Error(err)
		}
		if err := running(ctx, ns, "l4", 2); err != nil {
			t.Errorf("lowering the quota under admitted replicas stopped them: %v", err)
		}
	})

	// deleteNode deletes a node no Pod is bound to: a Pod left on a deleted node would never finish,
	// with nobody playing its kubelet.
	deleteNode := func(t *testing.T, name string) {
		t.Helper()
		list := &corev1.PodList{}
		if err := stack.Client.List(ctx, list, client.MatchingFields{"spec.nodeName": name}); err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			t.Fatalf("node %s still runs Pod %s/%s: not deleting it", name, p.Namespace, p.Name)
		}
		if _, err := stack.Kubectl("delete", "node", name); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("with the deployment gone, deleting the nodes lowers capacity to 4 and then 0", func(t *testing.T) {
		tearDown(t, ctx, ns)
		deleteNode(t, nodes[0])
		eventually(t, 2*time.Minute, "capacity 4 and quota for 4 cards", capacity(4))
		deleteNode(t, nodes[2])
		eventually(t, 2*time.Minute, "still capacity 4 (the deleted node was cordoned), all of it free, one node left", func() error {
			if err := capacity(4)(); err != nil {
				return err
			}
			if v := it.Status.Accelerator; v.Remaining == nil || v.Remaining.Value() != 4 {
				return fmt.Errorf("status.accelerator %+v, want all 4 cards remaining with no Pod running", v)
			}
			return typeCondition(it, workerv1.InstanceTypeNodesAvailable, "True", workerv1.ReasonSchedulableNodes, "schedulable: 1 of 1 node ")
		})
		deleteNode(t, nodes[1])
		eventually(t, 2*time.Minute, "capacity 0, no quota", capacity(0))
		eventually(t, time.Minute, "Preparing again, the detail kept as last observed", func() error {
			if err := get(); err != nil {
				return err
			}
			if it.Status.Phase != workerv1.InstanceTypePhasePreparing {
				return fmt.Errorf("phase %q: %s", it.Status.Phase, it.Status.PhaseMessage)
			}
			if err := typeCondition(it, workerv1.InstanceTypeNodesAvailable, "False", workerv1.ReasonNoMatchingNodes); err != nil {
				return err
			}
			if err := typeCondition(it, workerv1.InstanceTypeDetailObserved, "True", workerv1.ReasonLastObserved); err != nil {
				return err
			}
			if d := it.Status.Detail; d == nil || d.Product != product {
				return fmt.Errorf("status.detail %+v, want product %s kept", d, product)
			}
			return nil
		})
	})
}

// placementDeployment is a one-role deployment of replicas replicas of cards accelerators each on
// instanceType.
func placementDeployment(namespace, name, instanceType string, replicas, cards int) string {
	return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: %d, instanceType: %s, resources: {accelerator: %d}}
`, name, namespace, replicas, instanceType, cards)
}

// kwokNodes are the names of the fake nodes whose labels hold every pair of want.
func kwokNodes(ctx context.Context, want map[string]string) ([]string, error) {
	list := &corev1.NodeList{}
	if err := stack.Client.List(ctx, list, client.MatchingLabels(want)); err != nil {
		return nil, err
	}
	var out []string
	for _, n := range list.Items {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out, nil
}

// TestPlacementThroughFlavor: Kueue places every Pod through its InstanceType's ResourceFlavor, which
// selects the label mdplane puts on the type's nodes and tolerates their taints.
//
// On the stack's A10G and H20 nodes plus two the test adds, an arm64 node of the same H20 product and
// an L40S node tainted nvidia.com/gpu=present:NoSchedule, three managed types are made: H20 on
// amd64, L40S, H20 on arm64. Four replicas of two cards on the H20 type are bound to its node only,
// none to the A10G node nor to the arm64 H20 node; a replica on the L40S type, whose only node is
// tainted, is scheduled there, its Pod given the flavor's toleration; a replica on the arm64 type
// lands on the arm64 node. Each type's remaining is its capacity less what the Pods bound to its
// nodes hold, the deployment's cards among them; each node carries the labels of its types only.
func TestPlacementThroughFlavor(t *testing.T) {
	sequential(t, "compares an InstanceType's remaining capacity with every Pod on a shared H20 node")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const h20Type, l40sType, armType = "placement-nvidia-h20-linux-amd64", "placement-nvidia-l40s-linux-amd64", "placement-nvidia-h20-linux-arm64"
	gpuTaint := corev1.Taint{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}
	const l40sNode, armNode = "placement-l40s-0", "placement-h20-arm64-0"
	extra := []cluster.NodeOptions{
		{Name: l40sNode, Product: "NVIDIA-L40S", GPUs: 4, Taints: []corev1.Taint{gpuTaint}},
		{Name: armNode, Product: "NVIDIA-H20", GPUs: 4, Arch: "arm64"},
	}
	typeNames := []string{h20Type, l40sType, armType}
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		for _, n := range extra {
			_ = stack.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name}})
		}
		for _, name := range typeNames {
			_ = stack.Client.Delete(ctx, &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	for _, o := range extra {
		if _, err := stack.AddNode(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	h20Nodes, err := kwokNodes(ctx, map[string]string{cluster.LabelGPUProduct: "NVIDIA-H20", corev1.LabelArchStable: "amd64"})
	if err != nil {
		t.Fatal(err)
	}
	a10gNodes, err := kwokNodes(ctx, map[string]string{cluster.LabelGPUProduct: "NVIDIA-A10G"})
	if err != nil {
		t.Fatal(err)
	}
	if len(h20Nodes) == 0 || len(a10gNodes) == 0 {
		t.Fatalf("the stack has H20 nodes %v and A10G nodes %v: it needs both", h20Nodes, a10gNodes)
	}
	typeNodes := map[string][]string{h20Type: h20Nodes, l40sType: {l40sNode}, armType: {armNode}}
	for name, spec := range map[string]string{h20Type: "nvidia-h20\n  arch: amd64", l40sType: "nvidia-l40s\n  arch: amd64", armType: "nvidia-h20\n  arch: arm64"} {
		applyManagedType(t, ns, name, `
  acceleratable: true
  os: linux
  unitResources: {cpu: "4", ram: 16Gi}
  localStorage: 10Gi
  acceleratorGroup: `+spec)
	}
	deployments := []struct {
		name, instanceType string
		replicas, cards    int
	}{{"h20", h20Type, 4, 2}, {"l40s", l40sType, 1, 1}, {"arm", armType, 1, 1}}
	for _, d := range deployments {
		awaitInstanceType(t, ctx, d.instanceType, workerv1.InstanceTypePhaseActive)
		kubectlApply(t, placementDeployment(ns, d.name, d.instanceType, d.replicas, d.cards))
	}

	t.Run("every replica runs", func(t *testing.T) {
		for _, d := range deployments {
			eventually(t, 3*time.Minute, fmt.Sprintf("the %d replicas of %s running", d.replicas, d.name), func() error {
				return running(ctx, ns, d.name, d.replicas)
			})
		}
	})

	t.Run("every Pod is bound only to its type's nodes, given the flavor's node selector and tolerations", func(t *testing.T) {
		for _, d := range deployments {
			ps, err := pods(ctx, ns, d.name)
			if err != nil {
				t.Fatal(err)
			}
			key := workerv1.InstanceTypeNodeLabel(d.instanceType)
			for _, p := range ps {
				if !slices.Contains(typeNodes[d.instanceType], p.Spec.NodeName) {
					t.Errorf("Pod %s of type %s is bound to %q, not to one of the type's nodes %v", p.Name, d.instanceType, p.Spec.NodeName, typeNodes[d.instanceType])
				}
				if p.Spec.NodeSelector[key] != "true" {
					t.Errorf("Pod %s has node selector %v, without %s=true", p.Name, p.Spec.NodeSelector, key)
				}
				tolerates := slices.ContainsFunc(p.Spec.Tolerations, func(tol corev1.Toleration) bool {
					return tol.Key == gpuTaint.Key && tol.Effect == gpuTaint.Effect && (tol.Operator == corev1.TolerationOpExists || tol.Value == gpuTaint.Value)
				})
				if want := d.instanceType == l40sType; tolerates != want {
					t.Errorf("Pod %s tolerates %s: %v, want %v (tolerations %v)", p.Name, gpuTaint.ToString(), tolerates, want, p.Spec.Tolerations)
				}
			}
		}
	})

	t.Run("each type's remaining is its capacity less what the Pods on its nodes hold", func(t *testing.T) {
		for _, d := range deployments {
			eventually(t, time.Minute, "the remaining cards of "+d.instanceType, func() error {
				it := &workerv1.InstanceType{}
				if err := stack.Client.Get(ctx, client.ObjectKey{Name: d.instanceType}, it); err != nil {
					return err
				}
				held, err := heldOn(ctx, cluster.GPUResource, typeNodes[d.instanceType]...)
				if err != nil {
					return err
				}
				if held < int64(d.replicas*d.cards) {
					return fmt.Errorf("the Pods on %v hold %d cards, fewer than deployment %s's %d", typeNodes[d.instanceType], held, d.name, d.replicas*d.cards)
				}
				v := it.Status.Accelerator
				if v == nil || v.Capacity == nil || v.Remaining == nil || v.Remaining.Value() != v.Capacity.Value()-held {
					return fmt.Errorf("status.accelerator %+v, want remaining capacity less %d held on %v", v, held, typeNodes[d.instanceType])
				}
				return nil
			})
		}
	})

	t.Run("each flavor selects its type's label, on that type's nodes only, and tolerates their taints", func(t *testing.T) {
		for _, name := range typeNames {
			key := workerv1.InstanceTypeNodeLabel(name)
			labelled, err := kwokNodes(ctx, map[string]string{key: "true"})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(labelled, typeNodes[name]) {
				t.Errorf("the nodes labelled %s=true are %v, want %v", key, labelled, typeNodes[name])
			}
			rf := &kueuev1beta2.ResourceFlavor{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Name: name}, rf); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(rf.Spec.NodeLabels, map[string]string{key: "true"}) {
				t.Errorf("ResourceFlavor %s selects %v, want %s=true", name, rf.Spec.NodeLabels, key)
			}
			var want []corev1.Toleration
			if name == l40sType {
				want = []corev1.Toleration{{Key: gpuTaint.Key, Operator: corev1.TolerationOpEqual, Value: gpuTaint.Value, Effect: gpuTaint.Effect}}
			}
			if !slices.Equal(rf.Spec.Tolerations, want) {
				t.Errorf("ResourceFlavor %s tolerates %v, want %v", name, rf.Spec.Tolerations, want)
			}
		}
	})
}

// rackedDeployment is a deployment of one role of replicas groups of size Pods, each Pod with cards
// accelerators, every group required within one domain of the rack level.
func rackedDeployment(namespace, name, instanceType string, replicas, size, cards int) string {
	return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - name: server
      replicas: %d
      size: %d
      instanceType: %s
      resources: {accelerator: %d}
      topology: {requiredLevel: %s}
`, name, namespace, replicas, size, instanceType, cards, cluster.RackLabel)
}

// TestTopologyRequiredLevel: a managed type annotated with worker.gpustack.ai/topology-levels gets a
// Kueue Topology (the rack level, then the hostname) and a flavor naming it, and Kueue's
// Topology-Aware Scheduling honours roles[].topology.requiredLevel.
//
// Four nodes of 8 cards, two per rack: a replica of three 8-card Pods fits the type's 32-card quota
// but no rack, so it waits, no Pod bound, its Workload saying the topology cannot fit it and the
// deployment's QuotaReserved naming the level; two
// replicas of two 8-card Pods each run, each replica's Pods in one rack.
func TestTopologyRequiredLevel(t *testing.T) {
	parallel(t) // its nodes are of a product no other test's type selects, and off the test queues' pool
	ctx := context.Background()
	ns := ownName(t, "ns")
	const typeName = "topology-nvidia-b200-linux-amd64"
	racks := map[string]string{"topology-b200-0": "rack-a", "topology-b200-1": "rack-a", "topology-b200-2": "rack-b", "topology-b200-3": "rack-b"}
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		for name := range racks {
			_ = stack.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
		_ = stack.Client.Delete(ctx, &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: typeName}})
	})
	for name, rack := range racks {
		if _, err := stack.AddNode(ctx, cluster.NodeOptions{Name: name, Product: "NVIDIA-B200", GPUs: 8, Labels: map[string]string{cluster.RackLabel: rack},
			Taints: []corev1.Taint{ownerTaint(t)}}); err != nil {
			t.Fatal(err)
		}
	}
	applyManagedType(t, ns, typeName, `
  acceleratable: true
  os: linux
  unitResources: {cpu: "4", ram: 16Gi}
  localStorage: 10Gi
  acceleratorGroup: nvidia-b200
  arch: amd64`)
	if _, err := stack.Kubectl("annotate", "instancetype", typeName, queues.AnnotationTopologyLevels+"="+cluster.RackLabel); err != nil {
		t.Fatal(err)
	}
	awaitInstanceType(t, ctx, typeName, workerv1.InstanceTypePhaseActive)

	var topologyName string
	t.Run("the type's queue admits through a flavor naming a Topology of the rack and the hostname", func(t *testing.T) {
		eventually(t, 2*time.Minute, "ClusterQueue "+typeName+" active on a topology flavor", func() error {
			cq := &kueuev1beta2.ClusterQueue{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, cq); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(cq.Status.Conditions, kueuev1beta2.ClusterQueueActive) {
				return fmt.Errorf("ClusterQueue not active: %+v", cq.Status.Conditions)
			}
			rf := &kueuev1beta2.ResourceFlavor{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Name: string(cq.Spec.ResourceGroups[0].Flavors[0].Name)}, rf); err != nil {
				return err
			}
			if rf.Spec.TopologyName == nil {
				return fmt.Errorf("ResourceFlavor %s names no topology", rf.Name)
			}
			tp := &kueuev1beta2.Topology{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Name: string(*rf.Spec.TopologyName)}, tp); err != nil {
				return err
			}
			var levels []string
			for _, l := range tp.Spec.Levels {
				levels = append(levels, l.NodeLabel)
			}
			if want := []string{cluster.RackLabel, corev1.LabelHostname}; !slices.Equal(levels, want) {
				return fmt.Errorf("Topology %s has levels %v, want %v", tp.Name, levels, want)
			}
			topologyName = tp.Name
			return nil
		})
	})

	t.Run("a replica no rack can hold waits with a message naming the level", func(t *testing.T) {
		kubectlApply(t, rackedDeployment(ns, "wide", typeName, 1, 3, 8))
		eventually(t, 3*time.Minute, "the replica's Workload refused for its topology", func() error {
			wls, err := workloads(ctx, ns)
			if err != nil {
				return err
			}
			if len(wls) != 1 {
				return fmt.Errorf("%d Workloads, want the replica's one", len(wls))
			}
			c := meta.FindStatusCondition(wls[0].Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
			if c == nil || c.Status != metav1.ConditionFalse {
				return fmt.Errorf("Workload %s QuotaReserved %+v, want False", wls[0].Name, c)
			}
			if want := fmt.Sprintf("topology %q allows to fit only 2 out of 3 pod(s)", topologyName); !strings.Contains(c.Message, want) {
				return fmt.Errorf("Workload %s says %q, not %q", wls[0].Name, c.Message, want)
			}
			return nil
		})
		eventually(t, 2*time.Minute, "the deployment's QuotaReserved naming the level", func() error {
			c, err := deploymentConditionOf(ctx, ns, "wide", "QuotaReserved")
			if err != nil {
				return err
			}
			if want := "within one domain of topology level " + cluster.RackLabel; c.Status != "False" || !strings.Contains(c.Message, want) {
				return fmt.Errorf("QuotaReserved %+v, want False naming %q", c, want)
			}
			return nil
		})
		ps, err := pods(ctx, ns, "wide")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			if p.Spec.NodeName != "" {
				t.Errorf("Pod %s is bound to %s, though its replica fits no rack", p.Name, p.Spec.NodeName)
			}
		}
		tearDown(t, ctx, ns)
	})

	t.Run("each replica's Pods run within one rack", func(t *testing.T) {
		kubectlApply(t, rackedDeployment(ns, "racked", typeName, 2, 2, 8))
		eventually(t, 3*time.Minute, "the 4 Pods of racked running", func() error { return running(ctx, ns, "racked", 4) })
		ps, err := pods(ctx, ns, "racked")
		if err != nil {
			t.Fatal(err)
		}
		groups := map[string][]string{}
		for _, p := range ps {
			group := p.Labels[workerv1.LabelPodGroupName]
			rack, ok := racks[p.Spec.NodeName]
			if !ok {
				t.Errorf("Pod %s is bound to %s, not to one of the type's nodes", p.Name, p.Spec.NodeName)
			}
			groups[group] = append(groups[group], rack)
		}
		if len(groups) != 2 {
			t.Fatalf("the Pods form groups %v, want two replicas; Kueue's evictions in %s: %v", groups, ns, workloadEvictions(ctx, ns))
		}
		for group, in := range groups {
			if len(in) != 2 || in[0] != in[1] {
				t.Errorf("replica %s has its Pods in racks %v, want one rack", group, in)
			}
		}
		// The nodes are tainted and only the flavor tolerates the taint: with Kueue's
		// TASReplaceNodeOnNodeTaints on (install.md asks for it off), Kueue evicts a replica whose Pod
		// it still sees unbound, calling a healthy node unhealthy.
		if ev := workloadEvictions(ctx, ns); len(ev) > 0 {
			t.Errorf("Kueue evicted the replicas of racked: %v", ev)
		}
	})
}

// workloadEvictions are the events by which Kueue told of evicting a Workload of the namespace,
// as "Workload: reason: message".
func workloadEvictions(ctx context.Context, namespace string) []string {
	evs := &corev1.EventList{}
	if err := stack.Client.List(ctx, evs, client.InNamespace(namespace)); err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, e := range evs.Items {
		if e.InvolvedObject.Kind == "Workload" && strings.HasPrefix(e.Reason, "Evicted") {
			out = append(out, e.InvolvedObject.Name+": "+e.Reason+": "+e.Message)
		}
	}
	return out
}
