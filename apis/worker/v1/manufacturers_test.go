package v1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func typeOf(manufacturer string, acceleratable bool) *v1.InstanceType {
	it := &v1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "t"}, Spec: v1.InstanceTypeSpec{Acceleratable: acceleratable}}
	if manufacturer != "" {
		it.Status.Detail = &v1.InstanceTypeDetail{Manufacturer: manufacturer}
	}
	return it
}

// TestManufacturerTable has one row per manufacturer mdplane knows.
func TestManufacturerTable(t *testing.T) {
	for _, row := range []struct {
		manufacturer  string
		base          corev1.ResourceName
		runtimeClass  string
		partitionKind string
	}{
		{v1.ManufacturerAMD, "amd.com/gpu", "amd", ""},
		{v1.ManufacturerAscend, "huawei.com/npu", "ascend", ""},
		{v1.ManufacturerCambricon, "cambricon.com/mlu", "cambricon", ""},
		{v1.ManufacturerHygon, "hygon.com/dcu", "hygon", "mig"},
		{v1.ManufacturerIluvatar, "iluvatar.com/gpu", "iluvatar", ""},
		{v1.ManufacturerMetaX, "metax-tech.com/gpu", "metax", ""},
		{v1.ManufacturerMThreads, "mthreads.com/gpu", "mthreads", ""},
		{v1.ManufacturerNVIDIA, "nvidia.com/gpu", "nvidia", "mig"},
		{v1.ManufacturerTHead, "alibabacloud.com/ppu", "", "mig"},
	} {
		t.Run(row.manufacturer, func(t *testing.T) {
			it := typeOf(row.manufacturer, true)
			key, err := it.AcceleratorResource()
			require.NoError(t, err)
			assert.Equal(t, row.base, key)
			assert.Equal(t, row.runtimeClass, it.RuntimeClassName())
			v, err := it.AcceleratorVendor()
			require.NoError(t, err)
			assert.Equal(t, row.partitionKind, v.PartitionKind)
			assert.Equal(t, row.base+".sliced", v.SlicedResource())
			assert.Equal(t, row.base+".sliced.memory-percentage", v.SlicedMemoryPercentageResource())
			assert.Equal(t, row.base+".sliced.cores-percentage", v.SlicedCoresPercentageResource())
			assert.Equal(t, row.base+".partitioned", v.PartitionedResource())
			profile, ok := v.PartitionProfileResource("2g.15gb")
			assert.Equal(t, row.partitionKind != "", ok)
			if ok {
				assert.Equal(t, row.base+".partitioned."+corev1.ResourceName(row.partitionKind)+"-2g.15gb", profile)
			}
		})
	}
	assert.Len(t, v1.KnownManufacturers(), 9, "a row added to the table is a row added above")
	assert.Equal(t, []string{"hygon", "nvidia", "thead"}, v1.PartitioningManufacturers())
}

// TestManufacturerRules has one row per rule of reading a type's manufacturer.
func TestManufacturerRules(t *testing.T) {
	t.Run("an unknown manufacturer names the type, the manufacturer and the way out", func(t *testing.T) {
		_, err := typeOf("acme", true).AcceleratorResource()
		require.Error(t, err)
		for _, part := range []string{`InstanceType "t"`, `status.detail.manufacturer "acme"`, "amd, ascend", "name an InstanceType of a listed manufacturer"} {
			assert.Contains(t, err.Error(), part)
		}
	})
	t.Run("a type that has not converged waits", func(t *testing.T) {
		_, err := typeOf("", true).AcceleratorResource()
		assert.ErrorContains(t, err, "has not reported its accelerator manufacturer")
	})
	t.Run("a type without accelerators runs with no RuntimeClass", func(t *testing.T) {
		assert.Empty(t, typeOf(v1.ManufacturerNVIDIA, false).RuntimeClassName())
	})
	t.Run("an unknown or unconverged manufacturer runs with no RuntimeClass", func(t *testing.T) {
		assert.Empty(t, typeOf("acme", true).RuntimeClassName())
		assert.Empty(t, typeOf("", true).RuntimeClassName())
	})
	t.Run("T-Head profiles keep the dot they are published with", func(t *testing.T) {
		v, _ := v1.LookupAcceleratorVendor(v1.ManufacturerTHead)
		key, _ := v.PartitionProfileResource("4g.48gb")
		assert.Equal(t, corev1.ResourceName("alibabacloud.com/ppu.partitioned.mig-4g.48gb"), key)
	})
}
