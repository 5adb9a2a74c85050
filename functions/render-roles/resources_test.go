package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// TestAcceleratorKeysFollowTheManufacturer has one row per rule of the accelerator resource keys:
// every family's keys derive from the manufacturer's <base>, and a partition profile's key carries
// the manufacturer's partition kind.
func TestAcceleratorKeysFollowTheManufacturer(t *testing.T) {
	whole := &workerv1.ModelDeploymentRoleResources{Accelerator: ptr.To(resource.MustParse("2"))}
	slice := &workerv1.ModelDeploymentRoleResources{AcceleratorSlicedMemoryPercentage: ptr.To(int32(50))}
	partition := func(profile string) *workerv1.ModelDeploymentRoleResources {
		return &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: profile}
	}
	for _, row := range []struct {
		rule         string
		manufacturer string
		resources    *workerv1.ModelDeploymentRoleResources
		want         map[corev1.ResourceName]string
		err          []string
	}{
		{"whole accelerators request <base>: Ascend NPUs", workerv1.ManufacturerAscend, whole,
			map[corev1.ResourceName]string{"huawei.com/npu": "2"}, nil},
		{"whole accelerators request <base>: Cambricon MLUs", workerv1.ManufacturerCambricon, whole,
			map[corev1.ResourceName]string{"cambricon.com/mlu": "2"}, nil},
		{"a slice requests <base>.sliced and its shares: AMD", workerv1.ManufacturerAMD, slice,
			map[corev1.ResourceName]string{"amd.com/gpu.sliced": "1", "amd.com/gpu.sliced.memory-percentage": "50", "amd.com/gpu.sliced.cores-percentage": "50"}, nil},
		{"a partition requests <base>.partitioned and <base>.partitioned.mig-<profile>: NVIDIA", workerv1.ManufacturerNVIDIA, partition("3g.40gb"),
			map[corev1.ResourceName]string{"nvidia.com/gpu.partitioned": "1", "nvidia.com/gpu.partitioned.mig-3g.40gb": "1"}, nil},
		{"Hygon partitions are mig ones", workerv1.ManufacturerHygon, partition("2g.15gb"),
			map[corev1.ResourceName]string{"hygon.com/dcu.partitioned": "1", "hygon.com/dcu.partitioned.mig-2g.15gb": "1"}, nil},
		{"T-Head partitions are mig ones", workerv1.ManufacturerTHead, partition("4g.48gb"),
			map[corev1.ResourceName]string{"alibabacloud.com/ppu.partitioned": "1", "alibabacloud.com/ppu.partitioned.mig-4g.48gb": "1"}, nil},
		{"a partition on a manufacturer without a partition kind is a render failure naming the way out", workerv1.ManufacturerAscend, partition("2g.15gb"), nil,
			[]string{`resources.acceleratorPartitionedProfile "2g.15gb"`, `manufacturer "ascend", which has no partition kind`, "request whole accelerators or a slice", "(hygon, nvidia, thead)"}},
		{"an unknown manufacturer is a render failure naming it", "acme", whole, nil,
			[]string{`status.detail.manufacturer "acme"`, "name an InstanceType of a listed manufacturer"}},
	} {
		t.Run(row.rule, func(t *testing.T) {
			it := h100()
			it.Status.Detail.Manufacturer = row.manufacturer
			it.Status.Detail.Memory = ptr.To(resource.MustParse("80Gi"))
			role := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Resources: row.resources}
			rendered, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: spec(role), Role: role, InstanceType: it})
			if row.err != nil {
				require.Error(t, err)
				for _, part := range row.err {
					assert.Contains(t, err.Error(), part)
				}
				return
			}
			require.NoError(t, err)
			limits := rendered.Template.Spec.Containers[0].Resources.Limits
			got := map[corev1.ResourceName]string{}
			for name, q := range limits {
				if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
					got[name] = q.String()
				}
			}
			assert.Equal(t, row.want, got)
		})
	}
}

// TestRuntimeClassName has one row per rule of the RuntimeClass choice that the render
// decides; whether the class exists is the deployment step's reading.
func TestRuntimeClassName(t *testing.T) {
	role := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100"}
	render := func(t *testing.T, class string) *renderroles.RenderedRole {
		r, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: spec(role), Role: role, InstanceType: h100(), RuntimeClassName: class})
		require.NoError(t, err)
		return r
	}
	t.Run("an existing class is the Pod template's runtimeClassName", func(t *testing.T) {
		assert.Equal(t, ptr.To("nvidia"), render(t, "nvidia").Template.Spec.RuntimeClassName)
	})
	t.Run("no class leaves runtimeClassName unset", func(t *testing.T) {
		assert.Nil(t, render(t, "").Template.Spec.RuntimeClassName)
	})
	t.Run("the class is a resolved binding: it moves the digest and the revision", func(t *testing.T) {
		with, without := render(t, "nvidia"), render(t, "")
		assert.NotEqual(t, without.ConfigDigest, with.ConfigDigest)
		assert.NotEqual(t, without.Revision, with.Revision)
	})
}
