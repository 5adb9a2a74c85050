package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// pod is a Running Pod bound to node, asking for cards of nvidia.com/gpu and cpu CPUs.
func pod(name, node, cards, cpu string, edits ...func(*corev1.Pod)) corev1.Pod {
	c := corev1.Container{Name: "engine", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}}}
	if cards != "" {
		c.Resources.Requests["nvidia.com/gpu"] = resource.MustParse(cards)
	}
	if cpu != "" {
		c.Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{c}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, e := range edits {
		e(&p)
	}
	return p
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }

func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func h20(n *corev1.Node) {
	n.Labels[labelNVIDIAProduct], n.Labels[labelNVIDIAMemory] = "NVIDIA-H20", "98304"
}

func cpus(q string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse(q)
		n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse(q)
	}
}

func withStatus(it *workerv1.InstanceType, edit func(*workerv1.InstanceTypeStatus)) *workerv1.InstanceType {
	edit(&it.Status)
	return it
}

func a10gDetail() *workerv1.InstanceTypeDetail {
	return &workerv1.InstanceTypeDetail{Manufacturer: "nvidia", Product: "NVIDIA-A10G", Family: "ampere", ComputeCapability: "8.6", Memory: quantityPtr("24Gi")}
}

func TestComputeStatus(t *testing.T) {
	type want struct {
		capacity, remaining, onceMax int64
		phase                        string
		reasons                      map[string]string // every condition's type → its reason
		messages                     map[string]string // a condition's type → a part of its message
		phaseMessage                 string            // a part of the phase message; empty: none
		detail                       *workerv1.InstanceTypeDetail
	}
	active := func(nodes, free, detail string) map[string]string {
		return map[string]string{workerv1.InstanceTypeNodesAvailable: nodes, workerv1.InstanceTypeCapacityFree: free, workerv1.InstanceTypeDetailObserved: detail}
	}
	cpuReasons := func(nodes, free string) map[string]string {
		return map[string]string{workerv1.InstanceTypeNodesAvailable: nodes, workerv1.InstanceTypeCapacityFree: free}
	}
	const (
		schedulable = workerv1.ReasonSchedulableNodes
		free        = workerv1.ReasonFree
		labels      = workerv1.ReasonNodeLabels
	)
	deleting := func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }
	cases := []struct {
		rule  string
		it    *workerv1.InstanceType
		nodes []corev1.Node
		pods  []corev1.Pod
		want  want
	}{
		{rule: "capacity is the schedulable nodes' cards, remaining what bound Pods leave, onceMaxRequest the most one node has free",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("n1", "8")},
			pods: []corev1.Pod{pod("a", "n0", "3", ""), pod("b", "n1", "4", ""), pod("c", "n1", "2", "")},
			want: want{capacity: 16, remaining: 7, onceMax: 5, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail(),
				messages: map[string]string{
					workerv1.InstanceTypeNodesAvailable: "schedulable: 2 of 2 nodes of accelerator group nvidia-a10g on linux/amd64, with 16 nvidia.com/gpu",
					workerv1.InstanceTypeCapacityFree:   "7 of 16 nvidia.com/gpu free; one node can give at most 5",
					workerv1.InstanceTypeDetailObserved: "manufacturer nvidia, product NVIDIA-A10G, memory 24Gi, read from node n0's labels nvidia.com/gpu.product, nvidia.com/gpu.memory (2 nodes in the group, agreeing)",
				}}},
		{rule: "nodes of another group, os or arch are not the type's",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("h20", "8", h20), gpuNode("arm", "8", labelled(corev1.LabelArchStable, "arm64"))},
			pods: []corev1.Pod{pod("a", "h20", "8", "")},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "the device plugin's allocatable cards count, not the node's capacity",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8", func(n *corev1.Node) { n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("6") })},
			want: want{capacity: 6, remaining: 6, onceMax: 6, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "a cordoned node counts nowhere, and is named",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("n1", "8", cordoned)}, pods: []corev1.Pod{pod("a", "n1", "2", "")},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail(),
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "schedulable: 1 of 2 nodes of accelerator group nvidia-a10g on linux/amd64, with 8 nvidia.com/gpu (n1 cordoned)"}}},
		{rule: "a NotReady node counts nowhere",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("n1", "8", notReady)},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail(),
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "(n1 NotReady)"}}},
		{rule: "a node being deleted counts nowhere",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("n1", "8", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} })},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail(),
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "(n1 deleting)"}}},
		{rule: "a terminating Pod still holds its cards until its containers stop",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8")}, pods: []corev1.Pod{pod("a", "n0", "4", "", deleting)},
			want: want{capacity: 8, remaining: 4, onceMax: 4, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "a Pod that has stopped holds nothing",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8")},
			pods: []corev1.Pod{pod("a", "n0", "4", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				pod("b", "n0", "4", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed })},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "a Pod not bound to a node is Kueue's to count, not a node's",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8")}, pods: []corev1.Pod{pod("a", "", "4", "")},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "a Pending Pod bound to a node holds its cards",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8")}, pods: []corev1.Pod{pod("a", "n0", "4", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })},
			want: want{capacity: 8, remaining: 4, onceMax: 4, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "a node asked for more than it allocates has none free, not less than none; all in use is still Active",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8")}, pods: []corev1.Pod{pod("a", "n0", "6", ""), pod("b", "n0", "4", "")},
			want: want{capacity: 8, remaining: 0, onceMax: 0, phase: workerv1.InstanceTypePhaseActive,
				reasons: active(schedulable, workerv1.ReasonAllInUse, labels), detail: a10gDetail(), phaseMessage: "bound Pods request all 8 nvidia.com/gpu",
				messages: map[string]string{workerv1.InstanceTypeCapacityFree: "bound Pods request all 8 nvidia.com/gpu"}}},
		{rule: "no node offers the group: Preparing, saying what the nodes there offer and how to label them",
			it: a10gType(), nodes: []corev1.Node{gpuNode("h0", "8", h20), gpuNode("h1", "8", h20)},
			want: want{phase: workerv1.InstanceTypePhasePreparing,
				reasons:      active(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity, workerv1.ReasonGroupName),
				detail:       &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"},
				phaseMessage: "no node offers accelerator group nvidia-a10g on linux/amd64; the nodes there offer nvidia-h20 (2); label the type's nodes worker.gpustack.ai/accelerator-group=nvidia-a10g",
				messages: map[string]string{
					workerv1.InstanceTypeCapacityFree:   "no capacity",
					workerv1.InstanceTypeDetailObserved: "manufacturer nvidia from the accelerator group's name nvidia-a10g",
				}}},
		{rule: "no node of the type's os and arch at all",
			it: a10gType(), nodes: []corev1.Node{gpuNode("arm", "8", labelled(corev1.LabelArchStable, "arm64"))},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity, workerv1.ReasonGroupName),
				detail:   &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"},
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "no node is labelled kubernetes.io/os=linux and kubernetes.io/arch=amd64"}}},
		{rule: "nodes without feature-discovery labels: the way out is the override label",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8", labelled(labelNVIDIAProduct, "")), gpuNode("n1", "8", labelled(labelNVIDIAProduct, ""))},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity, workerv1.ReasonGroupName),
				detail: &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"},
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "of the 2 nodes labelled kubernetes.io/os=linux and kubernetes.io/arch=amd64, none has feature-discovery labels naming a group " +
					"(GPUStack's, NVIDIA GPU feature discovery's or AMD's node labeller's); label the type's nodes worker.gpustack.ai/accelerator-group=nvidia-a10g"}}},
		{rule: "nodes match but none is schedulable: Preparing, naming each and why",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8", cordoned), gpuNode("n1", "8", notReady)},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoSchedulableNodes, workerv1.ReasonNoCapacity, labels), detail: a10gDetail(),
				phaseMessage: "2 nodes of accelerator group nvidia-a10g on linux/amd64, none schedulable: n0 cordoned, n1 NotReady"}},
		{rule: "schedulable nodes without the device resource: is the device plugin running",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "0")},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoDeviceCapacity, workerv1.ReasonNoCapacity, labels), detail: a10gDetail(),
				phaseMessage: "schedulable: 1 node of accelerator group nvidia-a10g on linux/amd64 (n0), but no nvidia.com/gpu allocatable there: is the device plugin running?"}},
		{rule: "a group whose name and nodes name no known manufacturer counts nothing",
			it: func() *workerv1.InstanceType {
				it := a10gType()
				it.Spec.AcceleratorGroup = "big-cards"
				return it
			}(), nodes: []corev1.Node{gpuNode("n0", "0", labelled(labelNVIDIAProduct, "", workerv1.LabelAcceleratorGroup, "big-cards"))},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonUnknownManufacturer, workerv1.ReasonNoCapacity, labels),
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "accelerator group big-cards names no manufacturer mdplane knows, and its nodes (n0) have none"}}},
		{rule: "the manufacturer comes from the device resource the nodes have when the group's name does not say",
			it: func() *workerv1.InstanceType {
				it := a10gType()
				it.Spec.AcceleratorGroup = "big-cards"
				return it
			}(), nodes: []corev1.Node{gpuNode("n0", "8", labelled(workerv1.LabelAcceleratorGroup, "big-cards"))},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels), detail: a10gDetail()}},
		{rule: "GPUStack's device manager labels make the group, with their product and memory",
			it: func() *workerv1.InstanceType {
				it := a10gType()
				it.Spec.AcceleratorGroup, it.Spec.Arch = "ascend-910b", "arm64"
				return it
			}(), nodes: []corev1.Node{gpuNode("npu0", "0", labelled(labelNVIDIAProduct, "", corev1.LabelArchStable, "arm64",
				"acceleratable.feature.gpustack.ai/ascend-910b", "true", "acceleratable.feature.gpustack.ai/ascend-910b.product", "Ascend-910B",
				"acceleratable.feature.gpustack.ai/ascend-910b.memory", "64Gi"), func(n *corev1.Node) {
				n.Status.Capacity["huawei.com/npu"], n.Status.Allocatable["huawei.com/npu"] = resource.MustParse("8"), resource.MustParse("8")
			})},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, labels),
				detail:   &workerv1.InstanceTypeDetail{Manufacturer: "ascend", Product: "Ascend-910B", Memory: quantityPtr("64Gi")},
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "with 8 huawei.com/npu"}}},
		{rule: "an inactive type is Inactive, its views still counted",
			it: func() *workerv1.InstanceType {
				it := a10gType()
				it.Spec.Inactive = true
				return it
			}(), nodes: []corev1.Node{gpuNode("n0", "8")},
			want: want{capacity: 8, remaining: 8, onceMax: 8, phase: workerv1.InstanceTypePhaseInactive, reasons: active(schedulable, free, labels), detail: a10gDetail(),
				phaseMessage: "spec.inactive is set"}},
		{rule: "with no node now, the last observed detail stays",
			it: withStatus(a10gType(), func(s *workerv1.InstanceTypeStatus) { s.Detail = a10gDetail() }), nodes: nil,
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity, workerv1.ReasonLastObserved),
				detail:   a10gDetail(),
				messages: map[string]string{workerv1.InstanceTypeDetailObserved: "no node offers accelerator group nvidia-a10g now; manufacturer nvidia, product NVIDIA-A10G, memory 24Gi are the last observed"}}},
		{rule: "with no node and a group naming no manufacturer, the last observed manufacturer stays too",
			it: withStatus(func() *workerv1.InstanceType {
				it := a10gType()
				it.Spec.AcceleratorGroup = "big-cards"
				return it
			}(), func(s *workerv1.InstanceTypeStatus) { s.Detail = a10gDetail() }),
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity, workerv1.ReasonLastObserved),
				detail: a10gDetail()}},
		{rule: "nothing observed and a group naming no manufacturer: no detail",
			it: func() *workerv1.InstanceType {
				it := a10gType()
				it.Spec.AcceleratorGroup = "big-cards"
				return it
			}(),
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: active(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity, workerv1.ReasonNotObserved)}},
		{rule: "nodes that disagree: the first node's product, the smallest memory, and the condition says so",
			it: a10gType(), nodes: []corev1.Node{gpuNode("n0", "8"),
				gpuNode("n1", "8", labelled(labelNVIDIAProduct, "NVIDIA-A10G-22GB", labelNVIDIAMemory, "22528", workerv1.LabelAcceleratorGroup, "nvidia-a10g"))},
			want: want{capacity: 16, remaining: 16, onceMax: 8, phase: workerv1.InstanceTypePhaseActive, reasons: active(schedulable, free, workerv1.ReasonMixedNodes),
				detail:   func() *workerv1.InstanceTypeDetail { d := a10gDetail(); d.Memory = quantityPtr("22Gi"); return d }(),
				messages: map[string]string{workerv1.InstanceTypeDetailObserved: "disagree (n0 NVIDIA-A10G 24Gi, n1 NVIDIA-A10G-22GB 22Gi): the product is node n0's, the memory the smallest, 22Gi"}}},
		{rule: "a CPU-only type counts units of its CPU, each node's allocatable CPU rounded down, accelerated nodes too",
			it: cpuType(), nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("c1", "0", labelled(labelNVIDIAProduct, ""), cpus("30"))},
			pods: []corev1.Pod{pod("a", "n0", "", "10"), pod("b", "n0", "", "500m")},
			want: want{capacity: 23, remaining: 20, onceMax: 13, phase: workerv1.InstanceTypePhaseActive, reasons: cpuReasons(schedulable, free),
				messages: map[string]string{workerv1.InstanceTypeNodesAvailable: "schedulable: 2 of 2 nodes on linux/amd64, with 23 units of 4 cpu",
					workerv1.InstanceTypeCapacityFree: "20 of 23 units of 4 cpu free; one node can give at most 13"}}},
		{rule: "a CPU-only type on nodes allocating less than one unit",
			it: withUnit(cpuType(), "128"), nodes: []corev1.Node{gpuNode("n0", "8")},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: cpuReasons(workerv1.ReasonNoUnitCapacity, workerv1.ReasonNoCapacity),
				phaseMessage: "schedulable: 1 node on linux/amd64 (n0), but none allocates one unit, 128 cpu"}},
		{rule: "a CPU-only type whose unit is no quantity counts nothing, and says the field",
			it: withUnit(cpuType(), "lots"), nodes: []corev1.Node{gpuNode("n0", "8")},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: cpuReasons(workerv1.ReasonNoUnitCapacity, workerv1.ReasonNoCapacity),
				phaseMessage: `spec.unitResources.cpu "lots" is not a positive quantity`}},
		{rule: "a CPU-only type with no node of its os and arch",
			it: cpuType(), nodes: []corev1.Node{gpuNode("arm", "8", labelled(corev1.LabelArchStable, "arm64"))},
			want: want{phase: workerv1.InstanceTypePhasePreparing, reasons: cpuReasons(workerv1.ReasonNoMatchingNodes, workerv1.ReasonNoCapacity),
				phaseMessage: "no node is labelled kubernetes.io/os=linux and kubernetes.io/arch=amd64"}},
		{rule: "a CPU-only type of a CPU group takes only the nodes labelled with it",
			it:    func() *workerv1.InstanceType { it := cpuType(); it.Spec.GeneralGroup = "amd-epyc-7763"; return it }(),
			nodes: []corev1.Node{gpuNode("n0", "8"), gpuNode("n1", "8", labelled("general.feature.gpustack.ai/amd-epyc-7763", "true"))},
			want:  want{capacity: 16, remaining: 16, onceMax: 16, phase: workerv1.InstanceTypePhaseActive, reasons: cpuReasons(schedulable, free)}},
	}
	now := metav1.NewTime(time.Unix(100, 0))
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			s := ComputeStatus(tc.it, tc.nodes, tc.pods, now)
			view := s.Accelerator
			if tc.it.Spec.Acceleratable {
				assert.Nil(t, s.CPU, "an acceleratable type's cpu view is not the inventory's")
			} else {
				view = s.CPU
				assert.Nil(t, s.Accelerator, "a CPU-only type has no accelerator view")
				assert.Nil(t, s.Detail, "a CPU-only type's detail is not the inventory's")
			}
			require.NotNil(t, view)
			assert.Equal(t, tc.want.capacity, view.Capacity.Value(), "capacity")
			assert.Equal(t, tc.want.remaining, view.Remaining.Value(), "remaining")
			assert.Equal(t, tc.want.onceMax, view.OnceMaxRequest.Value(), "onceMaxRequest")
			assert.Equal(t, tc.want.phase, s.Phase)
			assert.Contains(t, s.PhaseMessage, tc.want.phaseMessage)
			if tc.it.Spec.Inactive {
				assert.Contains(t, s.PhaseMessage, "spec.inactive")
			} else {
				assert.Equal(t, firstNotTrue(s.Conditions), s.PhaseMessage, "the phase message is the first of NodesAvailable and CapacityFree not True")
			}
			reasons := map[string]string{}
			for _, c := range s.Conditions {
				reasons[c.Type] = c.Reason
				assert.Equal(t, tc.it.Generation, c.ObservedGeneration, c.Type)
				assert.Equal(t, now, c.LastTransitionTime, c.Type)
				if part, ok := tc.want.messages[c.Type]; ok {
					assert.Contains(t, c.Message, part, c.Type)
				}
			}
			assert.Equal(t, tc.want.reasons, reasons)
			assertDetail(t, tc.want.detail, s.Detail)
			assert.True(t, Changed(tc.it, s), "a type without the inventory's conditions is written")
		})
	}
}

func firstNotTrue(conditions []metav1.Condition) string {
	for _, c := range conditions {
		if c.Type != workerv1.InstanceTypeDetailObserved && c.Status != metav1.ConditionTrue {
			return c.Message
		}
	}
	return ""
}

func withUnit(it *workerv1.InstanceType, cpu string) *workerv1.InstanceType {
	it.Spec.UnitResources.CPU = cpu
	return it
}

func assertDetail(t *testing.T, want, got *workerv1.InstanceTypeDetail) {
	t.Helper()
	if want == nil {
		assert.Nil(t, got, "detail")
		return
	}
	require.NotNil(t, got, "detail")
	assert.True(t, sameQuantity(want.Memory, got.Memory), "memory %v, want %v", got.Memory, want.Memory)
	w, g := *want, *got
	w.Memory, g.Memory = nil, nil
	assert.Equal(t, w, g)
}

func TestStatusIsWrittenOnlyOnChange(t *testing.T) {
	then, now := metav1.NewTime(time.Unix(1, 0)), metav1.NewTime(time.Unix(100, 0))
	nodes := []corev1.Node{gpuNode("n0", "8"), gpuNode("n1", "8")}
	published := func(it *workerv1.InstanceType, nodes []corev1.Node, pods []corev1.Pod) *workerv1.InstanceType {
		s := ComputeStatus(it, nodes, pods, then)
		it.Status.Detail, it.Status.Accelerator, it.Status.CPU = s.Detail, s.Accelerator, s.CPU
		it.Status.Phase, it.Status.PhaseMessage, it.Status.Conditions = s.Phase, s.PhaseMessage, s.Conditions
		it.Status.Entrance = workerv1.EntranceName(it.Name) // another owner's field
		return it
	}
	cases := []struct {
		rule       string
		it         *workerv1.InstanceType
		nodes      []corev1.Node
		pods       []corev1.Pod
		changed    bool
		transition map[string]metav1.Time
	}{
		{rule: "a type that already says it is not written", it: published(a10gType(), nodes, nil), nodes: nodes},
		{rule: "a CPU-only type that already says it is not written", it: published(cpuType(), nodes, nil), nodes: nodes},
		{rule: "a type whose other views and detail fields are another writer's is not written for them", it: func() *workerv1.InstanceType {
			it := published(a10gType(), nodes, nil)
			it.Status.CPU = &workerv1.CapacityView{Capacity: quantityPtr("3")}
			it.Status.Detail.SlicedDetail = &workerv1.SlicedDetail{Logical: &workerv1.LogicalSlicing{Count: 4}}
			return it
		}(), nodes: nodes},
		{rule: "a Pod taking cards is written, the conditions keeping their transition times",
			it: published(a10gType(), nodes, nil), nodes: nodes, pods: []corev1.Pod{pod("a", "n0", "1", "")}, changed: true},
		{rule: "all cards taken is written, CapacityFree's transition stamped now",
			it: published(a10gType(), nodes, nil), nodes: nodes, pods: []corev1.Pod{pod("a", "n0", "8", ""), pod("b", "n1", "8", "")}, changed: true,
			transition: map[string]metav1.Time{workerv1.InstanceTypeCapacityFree: now}},
		{rule: "a new generation is written", it: func() *workerv1.InstanceType {
			it := published(a10gType(), nodes, nil)
			it.Generation++
			return it
		}(), nodes: nodes, changed: true},
		{rule: "a detail field another writer moved is taken back", it: func() *workerv1.InstanceType {
			it := published(a10gType(), nodes, nil)
			it.Status.Detail.Product = "NVIDIA-A10"
			return it
		}(), nodes: nodes, changed: true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			s := ComputeStatus(tc.it, tc.nodes, tc.pods, now)
			assert.Equal(t, tc.changed, Changed(tc.it, s))
			for _, c := range s.Conditions {
				want, ok := tc.transition[c.Type]
				if !ok {
					want = then
				}
				assert.Equal(t, want, c.LastTransitionTime, c.Type)
			}
		})
	}
}
