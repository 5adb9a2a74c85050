package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func a10g() *workerv1.InstanceType {
	return &workerv1.InstanceType{
		ObjectMeta: metav1.ObjectMeta{Name: "gpustack-nvidia-a10g-linux-amd64"},
		Spec:       workerv1.InstanceTypeSpec{Acceleratable: true, UnitResources: workerv1.InstanceTypeUnitResources{CPU: "8", RAM: "32Gi"}, LocalStorage: "50Gi"},
		Status: workerv1.InstanceTypeStatus{Detail: &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"},
			Accelerator: &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("16"))}},
	}
}

func TestEntranceIsTheHashOfTheTypeName(t *testing.T) {
	// The values examples/cluster.yaml publishes, as the upstream reconciler computes them.
	assert.Equal(t, "gpustack-fnv64-7bc37bef52624161", workerv1.EntranceName("gpustack-nvidia-a10g-linux-amd64"))
	assert.Equal(t, "gpustack-fnv64-796ced4e2897a3b4", workerv1.EntranceName("gpustack-nvidia-h20-linux-amd64"))
}

func TestQuotas(t *testing.T) {
	t.Run("an acceleratable type offers its cards and the unit resources scaled by them", func(t *testing.T) {
		q, err := Quotas(a10g())
		require.NoError(t, err)
		assert.Equal(t, "16", ptr.To(q["nvidia.com/gpu"]).String())
		assert.Equal(t, "128", ptr.To(q[corev1.ResourceCPU]).String())
		assert.Equal(t, "512Gi", ptr.To(q[corev1.ResourceMemory]).String())
		assert.Equal(t, "800Gi", ptr.To(q[corev1.ResourceEphemeralStorage]).String())
		assert.Len(t, q, 4, "no slice or partition keys on a type that offers neither")
	})
	t.Run("a type that slices and partitions offers the keys those requests carry", func(t *testing.T) {
		it := a10g()
		it.Status.Detail.SlicedDetail = &workerv1.SlicedDetail{Logical: &workerv1.LogicalSlicing{Count: 4},
			Physical: &workerv1.PhysicalPartitioning{Count: 7, Profiles: []workerv1.ProfileCount{{Name: "1g.10gb", Count: 7}}}}
		it.Status.AcceleratorSliced = &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("64"))}
		it.Status.AcceleratorPartitioned = &workerv1.PartitionedCapacityView{CapacityView: workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("112"))},
			AllocatedProfiles: []workerv1.ProfileCount{{Name: "1g.10gb", Count: 12}}, RemainingProfiles: []workerv1.ProfileCount{{Name: "1g.10gb", Count: 100}}}
		q, err := Quotas(it)
		require.NoError(t, err)
		for key, want := range map[corev1.ResourceName]string{
			"nvidia.com/gpu.sliced": "64", "nvidia.com/gpu.sliced.memory-percentage": "1600", "nvidia.com/gpu.sliced.cores-percentage": "1600",
			"nvidia.com/gpu.partitioned": "112", "nvidia.com/gpu.partitioned.mig-1g.10gb": "112",
		} {
			assert.Equal(t, want, ptr.To(q[key]).String(), key)
		}
	})
	t.Run("a CPU-only type offers its units", func(t *testing.T) {
		it := a10g()
		it.Spec.Acceleratable = false
		it.Spec.UnitResources = workerv1.InstanceTypeUnitResources{CPU: "1", RAM: "2Gi"}
		it.Status.CPU = &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("64"))}
		q, err := Quotas(it)
		require.NoError(t, err)
		assert.Equal(t, "64", ptr.To(q[corev1.ResourceCPU]).String())
		assert.Equal(t, "128Gi", ptr.To(q[corev1.ResourceMemory]).String())
		assert.NotContains(t, q, corev1.ResourceName("nvidia.com/gpu"))
	})
	t.Run("a type that has not reported its manufacturer has no queue yet", func(t *testing.T) {
		it := a10g()
		it.Status.Detail = nil
		_, err := Quotas(it)
		assert.ErrorContains(t, err, "has not reported its accelerator manufacturer")
	})
}

// TestQuotasPerManufacturer sizes every manufacturer's keys through the one manufacturer table: one
// row per vendor for its whole-accelerator key, and partition rows for a mig vendor other than NVIDIA
// and for a vendor without a partition kind.
func TestQuotasPerManufacturer(t *testing.T) {
	partitioning := func(it *workerv1.InstanceType) {
		it.Status.Detail.SlicedDetail = &workerv1.SlicedDetail{Logical: &workerv1.LogicalSlicing{Count: 4},
			Physical: &workerv1.PhysicalPartitioning{Count: 4, Profiles: []workerv1.ProfileCount{{Name: "2g.15gb", Count: 4}}}}
		it.Status.AcceleratorSliced = &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("64"))}
		it.Status.AcceleratorPartitioned = &workerv1.PartitionedCapacityView{CapacityView: workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("64"))},
			RemainingProfiles: []workerv1.ProfileCount{{Name: "2g.15gb", Count: 64}}}
	}
	for _, row := range []struct {
		rule         string
		manufacturer string
		modes        func(*workerv1.InstanceType)
		want         map[corev1.ResourceName]string
		absent       []corev1.ResourceName
	}{
		{"amd sizes amd.com/gpu", "amd", nil, map[corev1.ResourceName]string{"amd.com/gpu": "16"}, nil},
		{"ascend sizes huawei.com/npu", "ascend", nil, map[corev1.ResourceName]string{"huawei.com/npu": "16"}, nil},
		{"cambricon sizes cambricon.com/mlu", "cambricon", nil, map[corev1.ResourceName]string{"cambricon.com/mlu": "16"}, nil},
		{"hygon sizes hygon.com/dcu", "hygon", nil, map[corev1.ResourceName]string{"hygon.com/dcu": "16"}, nil},
		{"iluvatar sizes iluvatar.com/gpu", "iluvatar", nil, map[corev1.ResourceName]string{"iluvatar.com/gpu": "16"}, nil},
		{"metax sizes metax-tech.com/gpu", "metax", nil, map[corev1.ResourceName]string{"metax-tech.com/gpu": "16"}, nil},
		{"mthreads sizes mthreads.com/gpu", "mthreads", nil, map[corev1.ResourceName]string{"mthreads.com/gpu": "16"}, nil},
		{"nvidia sizes nvidia.com/gpu", "nvidia", nil, map[corev1.ResourceName]string{"nvidia.com/gpu": "16"}, nil},
		{"thead sizes alibabacloud.com/ppu", "thead", nil, map[corev1.ResourceName]string{"alibabacloud.com/ppu": "16"}, nil},
		{"a mig vendor other than NVIDIA sizes its slice and mig partition keys on its own base", "hygon", partitioning,
			map[corev1.ResourceName]string{"hygon.com/dcu.sliced": "64", "hygon.com/dcu.partitioned": "64", "hygon.com/dcu.partitioned.mig-2g.15gb": "64"}, nil},
		{"a vendor without a partition kind gets slice keys and no partitioned keys", "metax", partitioning,
			map[corev1.ResourceName]string{"metax-tech.com/gpu.sliced": "64", "metax-tech.com/gpu.sliced.memory-percentage": "1600"},
			[]corev1.ResourceName{"metax-tech.com/gpu.partitioned", "metax-tech.com/gpu.partitioned.mig-2g.15gb"}},
	} {
		t.Run(row.rule, func(t *testing.T) {
			it := a10g()
			it.Status.Detail.Manufacturer = row.manufacturer
			if row.modes != nil {
				row.modes(it)
			}
			q, err := Quotas(it)
			require.NoError(t, err)
			for key, want := range row.want {
				assert.Equal(t, want, ptr.To(q[key]).String(), key)
			}
			for _, key := range row.absent {
				assert.NotContains(t, q, key)
			}
		})
	}
	t.Run("an unknown manufacturer has no queue, and the error names it", func(t *testing.T) {
		it := a10g()
		it.Status.Detail.Manufacturer = "acme"
		_, err := Quotas(it)
		assert.ErrorContains(t, err, `reports status.detail.manufacturer "acme"`)
	})
}

func TestQueueInputsChanged(t *testing.T) {
	for _, row := range []struct {
		rule    string
		edit    func(*workerv1.InstanceType)
		changed bool
	}{
		{"what bound Pods use is no change: the quota is the capacity", func(it *workerv1.InstanceType) {
			it.Status.Accelerator.Remaining = ptr.To(resource.MustParse("3"))
		}, false},
		{"a condition or the phase is none either", func(it *workerv1.InstanceType) {
			it.Status.Phase, it.Status.Conditions = "Active", []metav1.Condition{{Type: "CapacityFree", Status: metav1.ConditionFalse}}
		}, false},
		{"a node more (capacity) is", func(it *workerv1.InstanceType) { it.Status.Accelerator.Capacity = ptr.To(resource.MustParse("24")) }, true},
		{"the manufacturer observed is", func(it *workerv1.InstanceType) { it.Status.Detail.Manufacturer = "" }, true},
		{"the entrance is", func(it *workerv1.InstanceType) { it.Status.Entrance = "gpustack-fnv64-0" }, true},
		{"a label (the selector) is", func(it *workerv1.InstanceType) { it.Labels = map[string]string{"team": "a"} }, true},
		{"an annotation (CheckOnly) is", func(it *workerv1.InstanceType) {
			it.Annotations = map[string]string{AnnotationQueueManagement: QueueManagementCheckOnly}
		}, true},
		{"the spec is", func(it *workerv1.InstanceType) { it.Generation++ }, true},
	} {
		t.Run(row.rule, func(t *testing.T) {
			old := a10g()
			old.Status.Accelerator.Remaining = ptr.To(resource.MustParse("16"))
			edited := old.DeepCopy()
			row.edit(edited)
			assert.Equal(t, row.changed, queueInputsChanged(old, edited))
		})
	}
}
