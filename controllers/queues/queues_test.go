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
