package inventory

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func quantityPtr(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

// a10gLabels are NVIDIA GPU feature discovery's labels of an A10G node.
func a10gLabels() map[string]string {
	return map[string]string{labelNVIDIAProduct: "NVIDIA-A10G", labelNVIDIAMemory: "24576", labelNVIDIAFamily: "ampere",
		labelNVIDIAComputeMajor: "8", labelNVIDIAComputeMinor: "6", "nvidia.com/gpu.count": "8"}
}

func gpus(n string) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(n)}
}

func merged(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func TestNodeAccelerators(t *testing.T) {
	cases := []struct {
		rule     string
		labels   map[string]string
		capacity corev1.ResourceList
		want     []NodeAccelerator
	}{
		{rule: "NVIDIA GPU feature discovery: the group from the product, memory in MiB, compute capability from major and minor",
			labels: a10gLabels(), capacity: gpus("8"),
			want: []NodeAccelerator{{Group: "nvidia-a10g", Manufacturer: "nvidia", Product: "NVIDIA-A10G", Memory: quantityPtr("24Gi"), Family: "ampere",
				ComputeCapability: "8.6", Source: "nvidia.com/gpu.product, nvidia.com/gpu.memory"}}},
		{rule: "a product without the manufacturer's name gets it as the group's prefix",
			labels: map[string]string{labelNVIDIAProduct: "Tesla-T4"},
			want:   []NodeAccelerator{{Group: "nvidia-tesla-t4", Manufacturer: "nvidia", Product: "Tesla-T4", Source: "nvidia.com/gpu.product, nvidia.com/gpu.memory"}}},
		{rule: "GPU feature discovery's time-slicing -SHARED rename is the same group",
			labels: map[string]string{labelNVIDIAProduct: "NVIDIA-A100-SXM4-80GB-SHARED"}, capacity: gpus("8"),
			want: []NodeAccelerator{{Group: "nvidia-a100-sxm4-80gb", Manufacturer: "nvidia", Product: "NVIDIA-A100-SXM4-80GB-SHARED",
				Source: "nvidia.com/gpu.product, nvidia.com/gpu.memory"}}},
		{rule: "AMD's node labeller: vram in GiB, compute units as cores",
			labels:   map[string]string{labelAMDProduct: "AMD_Instinct_MI300X_OAM", labelAMDMemory: "192G", labelAMDFamily: "AI", labelAMDCores: "304"},
			capacity: corev1.ResourceList{"amd.com/gpu": resource.MustParse("8")},
			want: []NodeAccelerator{{Group: "amd-instinct-mi300x-oam", Manufacturer: "amd", Product: "AMD_Instinct_MI300X_OAM", Memory: quantityPtr("192Gi"),
				Family: "AI", Cores: ptr.To[int32](304), Source: "amd.com/gpu.product-name, amd.com/gpu.vram"}}},
		{rule: "AMD's beta labels are read too",
			labels: map[string]string{"beta.amd.com/gpu.product-name": "AMD_Instinct_MI250X", "beta.amd.com/gpu.vram": "128G"},
			want: []NodeAccelerator{{Group: "amd-instinct-mi250x", Manufacturer: "amd", Product: "AMD_Instinct_MI250X", Memory: quantityPtr("128Gi"),
				Source: "beta.amd.com/gpu.product-name, beta.amd.com/gpu.vram"}}},
		{rule: "GPUStack's device manager: every group it lists, with its detail labels; the bare manufacturer marker is not a group",
			labels: map[string]string{
				"acceleratable.feature.gpustack.ai/ascend":              "true",
				"acceleratable.feature.gpustack.ai/ascend-910b":         "true",
				"acceleratable.feature.gpustack.ai/ascend-910b.product": "Ascend-910B",
				"acceleratable.feature.gpustack.ai/ascend-910b.memory":  "64Gi",
				"acceleratable.feature.gpustack.ai/ascend-910b.cores":   "24",
				"acceleratable.feature.gpustack.ai/ascend-310p":         "true",
				"acceleratable.feature.gpustack.ai/ascend-310p.comcap":  "2.0",
				"acceleratable.feature.gpustack.ai/nvidia-l4":           "false",
				labelNVIDIAProduct: "ignored-once-gpustack-labels-exist",
				"acceleratable.feature.gpustack.ai/ascend-910b.unexpected": "true",
			},
			capacity: corev1.ResourceList{"huawei.com/npu": resource.MustParse("8")},
			want: []NodeAccelerator{
				{Group: "ascend-310p", Manufacturer: "ascend", ComputeCapability: "2.0", Source: "acceleratable.feature.gpustack.ai/ascend-310p{,.product,.memory}"},
				{Group: "ascend-910b", Manufacturer: "ascend", Product: "Ascend-910B", Memory: quantityPtr("64Gi"), Cores: ptr.To[int32](24),
					Source: "acceleratable.feature.gpustack.ai/ascend-910b{,.product,.memory}"},
			}},
		{rule: "the administrator's override names the group; the detail still comes from the labeller",
			labels: merged(a10gLabels(), map[string]string{workerv1.LabelAcceleratorGroup: "a10g-pool"}), capacity: gpus("8"),
			want: []NodeAccelerator{{Group: "a10g-pool", Manufacturer: "nvidia", Product: "NVIDIA-A10G", Memory: quantityPtr("24Gi"), Family: "ampere",
				ComputeCapability: "8.6", Source: "worker.gpustack.ai/accelerator-group (detail from nvidia.com/gpu.product, nvidia.com/gpu.memory)"}}},
		{rule: "the override on hardware no labeller names: the manufacturer from the device resource the node has",
			labels: map[string]string{workerv1.LabelAcceleratorGroup: "ascend-910b"}, capacity: corev1.ResourceList{"huawei.com/npu": resource.MustParse("8")},
			want: []NodeAccelerator{{Group: "ascend-910b", Manufacturer: "ascend", Source: "worker.gpustack.ai/accelerator-group"}}},
		{rule: "the device resource names the manufacturer over the group's prefix",
			labels: map[string]string{workerv1.LabelAcceleratorGroup: "big-cards"}, capacity: gpus("4"),
			want: []NodeAccelerator{{Group: "big-cards", Manufacturer: "nvidia", Source: "worker.gpustack.ai/accelerator-group"}}},
		{rule: "neither the device resources nor the group's prefix name a manufacturer: none",
			labels: map[string]string{workerv1.LabelAcceleratorGroup: "big-cards"},
			want:   []NodeAccelerator{{Group: "big-cards", Source: "worker.gpustack.ai/accelerator-group"}}},
		{rule: "a node GPUStack found no accelerator on offers none, whatever else it is labelled",
			labels: merged(a10gLabels(), map[string]string{labelAcceleratable: "false"})},
		{rule: "a node without feature-discovery labels offers none, even with devices",
			labels: map[string]string{corev1.LabelOSStable: "linux"}, capacity: gpus("8")},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := NodeAccelerators(tc.labels, tc.capacity)
			assert.Equal(t, len(tc.want), len(got), "%+v", got)
			for i := range min(len(got), len(tc.want)) {
				w, g := tc.want[i], got[i]
				assert.True(t, sameQuantity(w.Memory, g.Memory), "memory %v, want %v", g.Memory, w.Memory)
				w.Memory, g.Memory = nil, nil
				assert.Equal(t, w, g)
			}
		})
	}
}

func TestGroupOf(t *testing.T) {
	for _, row := range []struct{ rule, manufacturer, product, want string }{
		{"the manufacturer's own name leads once", "nvidia", "NVIDIA-A10G", "nvidia-a10g"},
		{"lowercase, one dash for every run of other characters", "nvidia", "NVIDIA H100 80GB HBM3", "nvidia-h100-80gb-hbm3"},
		{"a product without the manufacturer's name gets it", "nvidia", "Tesla-T4", "nvidia-tesla-t4"},
		{"the bench's product is the bench's group", "nvidia", "NVIDIA-Bench", "nvidia-bench"},
		{"underscores as dashes", "amd", "AMD_Instinct_MI300X_OAM", "amd-instinct-mi300x-oam"},
		{"no dash left at either end", "nvidia", "--NVIDIA-H20--", "nvidia-h20"},
		{"the manufacturer alone is its name", "nvidia", "NVIDIA", "nvidia"},
		{"within a label value's 63 characters", "nvidia", "NVIDIA-" + strings.Repeat("x", 60), "nvidia-" + strings.Repeat("x", 56)},
		{"cut within 63 characters, ending on no dash", "nvidia", "NVIDIA-" + strings.Repeat("x", 55) + "-yyyy", "nvidia-" + strings.Repeat("x", 55)},
	} {
		t.Run(row.rule, func(t *testing.T) {
			got := GroupOf(row.manufacturer, row.product)
			assert.Equal(t, row.want, got)
			assert.LessOrEqual(t, len(got), 63)
		})
	}
}

func a10gType() *workerv1.InstanceType {
	return &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "gpustack-nvidia-a10g-linux-amd64", Generation: 2},
		Spec: workerv1.InstanceTypeSpec{Acceleratable: true, AcceleratorGroup: "nvidia-a10g", GeneralGroup: "generic", OS: "linux", Arch: "amd64",
			UnitResources: workerv1.InstanceTypeUnitResources{CPU: "8", RAM: "32Gi"}}}
}

func cpuType() *workerv1.InstanceType {
	return &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "gpustack-cpu-linux-amd64", Generation: 1},
		Spec: workerv1.InstanceTypeSpec{GeneralGroup: "generic", OS: "linux", Arch: "amd64",
			UnitResources: workerv1.InstanceTypeUnitResources{CPU: "4", RAM: "16Gi"}}}
}

// gpuNode is a Ready A10G node on linux/amd64 with n cards, 64 CPUs.
func gpuNode(name string, cards string, edits ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels: merged(a10gLabels(), map[string]string{corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64", corev1.LabelHostname: name})},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(cards), corev1.ResourceCPU: resource.MustParse("64")}
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	for _, e := range edits {
		e(&n)
	}
	return n
}

func labelled(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				delete(n.Labels, kv[i])
			} else {
				n.Labels[kv[i]] = kv[i+1]
			}
		}
	}
}

func TestNodeMatches(t *testing.T) {
	withGeneral := func(g string) *workerv1.InstanceType {
		it := a10gType()
		it.Spec.GeneralGroup = g
		return it
	}
	cases := []struct {
		rule string
		it   *workerv1.InstanceType
		node corev1.Node
		want bool
	}{
		{"a node of the type's os, arch and accelerator group", a10gType(), gpuNode("n", "8"), true},
		{"another os is not the type's", a10gType(), gpuNode("n", "8", labelled(corev1.LabelOSStable, "windows")), false},
		{"another arch is not the type's", a10gType(), gpuNode("n", "8", labelled(corev1.LabelArchStable, "arm64")), false},
		{"a node without the os label is not the type's", a10gType(), gpuNode("n", "8", labelled(corev1.LabelOSStable, "")), false},
		{"another accelerator group is not the type's", a10gType(), gpuNode("n", "8", labelled(labelNVIDIAProduct, "NVIDIA-H20")), false},
		{"the administrator's override makes a node the type's", a10gType(),
			gpuNode("n", "8", labelled(labelNVIDIAProduct, "NVIDIA-A10G-24GB-PCIe", workerv1.LabelAcceleratorGroup, "nvidia-a10g")), true},
		{"a CPU group other than generic needs its label", withGeneral("amd-epyc-7763"), gpuNode("n", "8"), false},
		{"a node labelled with the type's CPU group", withGeneral("amd-epyc-7763"), gpuNode("n", "8", labelled("general.feature.gpustack.ai/amd-epyc-7763", "true")), true},
		{"an unset CPU group is generic", withGeneral(""), gpuNode("n", "8"), true},
		{"a CPU-only type takes accelerated nodes of its os and arch too", cpuType(), gpuNode("n", "8"), true},
		{"a CPU-only type takes nodes without accelerators", cpuType(), gpuNode("n", "0", labelled(labelNVIDIAProduct, "")), true},
		{"a CPU-only type takes only its arch", cpuType(), gpuNode("n", "8", labelled(corev1.LabelArchStable, "arm64")), false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, NodeMatches(tc.it, &tc.node))
		})
	}
}

func TestSchedulable(t *testing.T) {
	taint := func(key string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	cases := []struct {
		rule string
		node corev1.Node
		want bool
		why  string
	}{
		{"a Ready node", gpuNode("n", "8"), true, ""},
		{"a cordoned node", gpuNode("n", "8", func(n *corev1.Node) { n.Spec.Unschedulable = true }), false, "cordoned"},
		{"the node lifecycle controller's unschedulable taint is a cordon", gpuNode("n", "8", taint(corev1.TaintNodeUnschedulable)), false, "cordoned"},
		{"a node whose Ready condition is False", gpuNode("n", "8", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }), false, "NotReady"},
		{"a node whose Ready condition is Unknown", gpuNode("n", "8", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }), false, "NotReady"},
		{"a node without a Ready condition", gpuNode("n", "8", func(n *corev1.Node) { n.Status.Conditions = nil }), false, "NotReady"},
		{"the not-ready taint", gpuNode("n", "8", taint(corev1.TaintNodeNotReady)), false, "NotReady"},
		{"the unreachable taint", gpuNode("n", "8", taint(corev1.TaintNodeUnreachable)), false, "NotReady"},
		{"a node being deleted", gpuNode("n", "8", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }), false, "deleting"},
		{"another taint does not exclude: nodes are chosen by their labels", gpuNode("n", "8", taint("nvidia.com/gpu")), true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			ok, why := Schedulable(&tc.node)
			assert.Equal(t, tc.want, ok)
			assert.Equal(t, tc.why, why)
		})
	}
}
