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
