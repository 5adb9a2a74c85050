package cluster

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mdplane/mdplane/controllers/inventory"
)

// TestFakeNodesOfferTheExampleGroups: the stack's default nodes are one of each acceleratable
// InstanceType of examples/cluster.yaml as mdplane's inventory reads them, and a node a test adds is
// of the group its product forms, with the product's memory.
func TestFakeNodesOfferTheExampleGroups(t *testing.T) {
	s := &Stack{opts: Options{GPUsPerNode: 8, PodsPerNode: 110, Products: DefaultProducts}}
	for i, want := range []struct {
		group, memory, family, computeCapability string
	}{
		{"nvidia-a10g", "24Gi", "ampere", "8.6"},
		{"nvidia-h20", "96Gi", "hopper", "9.0"},
		{"nvidia-a10g", "24Gi", "ampere", "8.6"}, // products cycle over the nodes
	} {
		n := s.fakeNode(i)
		offered := inventory.NodeAccelerators(n.Labels, n.Status.Capacity)
		if len(offered) != 1 {
			t.Fatalf("node %s offers %+v", n.Name, offered)
		}
		a := offered[0]
		if a.Group != want.group || a.Manufacturer != "nvidia" || a.Memory == nil || a.Memory.Cmp(resource.MustParse(want.memory)) != 0 ||
			a.Family != want.family || a.ComputeCapability != want.computeCapability {
			t.Errorf("node %s offers %+v (memory %v), want group %s, nvidia, %s, %s, %s", n.Name, a, a.Memory, want.group, want.memory, want.family, want.computeCapability)
		}
		if got := n.Labels[RackLabel]; got != []string{"rack-0", "rack-0", "rack-1"}[i] {
			t.Errorf("node %s is in rack %q", n.Name, got)
		}
		if got := n.Status.Allocatable[GPUResource]; got.Value() != 8 {
			t.Errorf("node %s allocates %s GPUs", n.Name, got.String())
		}
	}

	for _, tc := range []struct {
		product, group string
		memory         string
	}{
		{"NVIDIA-L4", "nvidia-l4", "23034Mi"},
		{"NVIDIA-Bench", "nvidia-bench", "80Gi"}, // an unknown product gets the default hardware
	} {
		n := s.kwokNode(NodeOptions{Name: "added", Product: tc.product, GPUs: 4})
		offered := inventory.NodeAccelerators(n.Labels, n.Status.Capacity)
		if len(offered) != 1 || offered[0].Group != tc.group || offered[0].Memory.Cmp(resource.MustParse(tc.memory)) != 0 {
			t.Errorf("a %s node offers %+v, want group %s with %s", tc.product, offered, tc.group, tc.memory)
		}
		if n.Labels[LabelGPUCount] != "4" || n.Labels[LabelNVIDIAPCI] != "true" || n.Labels[corev1.LabelArchStable] != "amd64" {
			t.Errorf("a %s node is labelled %v", tc.product, n.Labels)
		}
		if _, ok := n.Labels[RackLabel]; ok {
			t.Errorf("an added node is in a rack: %v", n.Labels)
		}
	}

	npu := s.kwokNode(NodeOptions{Name: "npu", GPUs: 8, Resource: "huawei.com/npu", Arch: "arm64", Labels: map[string]string{
		"acceleratable.feature.gpustack.ai/ascend-910b": "true", "acceleratable.feature.gpustack.ai/ascend-910b.memory": "64Gi",
	}})
	offered := inventory.NodeAccelerators(npu.Labels, npu.Status.Capacity)
	if len(offered) != 1 || offered[0].Group != "ascend-910b" || offered[0].Manufacturer != "ascend" {
		t.Errorf("an NPU node offers %+v", offered)
	}
	if _, ok := npu.Status.Capacity[GPUResource]; ok || npu.Labels[LabelGPUProduct] != "" {
		t.Errorf("a node without a product carries NVIDIA's resource or labels: %v %v", npu.Status.Capacity, npu.Labels)
	}
}

// TestEachStackNodeHasItsOwnKWOKAndPodRange: each of the stack's own nodes is kept by a KWOK of its
// own and gives its Pods addresses from a range of its own, apart from every other node's and from
// the range the shared KWOK of the nodes a test adds hands out; a node a test adds is the shared
// KWOK's and has no range of its own, and only such a node's heartbeat can be stopped.
func TestEachStackNodeHasItsOwnKWOKAndPodRange(t *testing.T) {
	s := &Stack{opts: Options{GPUsPerNode: 8, PodsPerNode: 110, Products: DefaultProducts}}
	_, fake, _ := net.ParseCIDR(FakePodCIDR)
	_, added, _ := net.ParseCIDR(addedNodesPodCIDR)
	overlap := func(a, b *net.IPNet) bool { return a.Contains(b.IP) || b.Contains(a.IP) }
	var ranges []*net.IPNet
	for i := range maxStackNodes {
		n := s.fakeNode(i)
		if n.Labels[kwokNodeLabel] != kwokOwnNode || n.Spec.PodCIDR != stackNodePodCIDR(i) || !slices.Equal(n.Spec.PodCIDRs, []string{n.Spec.PodCIDR}) {
			t.Fatalf("node %d: label %q, Pod range %q %v", i, n.Labels[kwokNodeLabel], n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		_, r, err := net.ParseCIDR(n.Spec.PodCIDR)
		if err != nil {
			t.Fatal(err)
		}
		if ones, bits := r.Mask.Size(); 1<<(bits-ones)-2 < maxPodsPerStackNode {
			t.Errorf("node %d's range %s holds fewer than %d Pods", i, r, maxPodsPerStackNode)
		}
		if !fake.Contains(r.IP) || overlap(r, added) {
			t.Errorf("node %d's range %s is outside %s or inside the added nodes' %s", i, r, FakePodCIDR, addedNodesPodCIDR)
		}
		for j, other := range ranges {
			if overlap(r, other) {
				t.Errorf("nodes %d and %d share addresses: %s, %s", j, i, other, r)
			}
		}
		ranges = append(ranges, r)
	}
	// Near miss: one node more than the lower half holds would take the added nodes' range.
	if _, r, _ := net.ParseCIDR(stackNodePodCIDR(maxStackNodes)); !overlap(r, added) {
		t.Errorf("node %d's range %s is free; maxStackNodes could grow", maxStackNodes, r)
	}
	n := s.kwokNode(NodeOptions{Name: "added"})
	if n.Labels[kwokNodeLabel] != kwokSharedNode || n.Spec.PodCIDR != "" {
		t.Errorf("an added node: label %q, Pod range %q", n.Labels[kwokNodeLabel], n.Spec.PodCIDR)
	}
	// A heartbeat is stopped by the shared KWOK's label, so only on a node a test added.
	s.opts.Nodes = 2
	if err := s.StopHeartbeat(context.Background(), fakeNodeName(1)); err == nil || !strings.Contains(err.Error(), "one of the stack's own nodes") {
		t.Errorf("stopping the heartbeat of the stack's own node: %v", err)
	}
	if s.ownNode("added") || s.ownNode(fakeNodeName(2)) {
		t.Error("a node a test added, or one past the stack's nodes, counts as the stack's own")
	}
}
