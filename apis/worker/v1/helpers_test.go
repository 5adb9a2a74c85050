package v1_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestRoleKindLabelUsesTheRouterSpelling(t *testing.T) {
	for kind, label := range map[v1.RoleKind]string{
		"":                 "server", // the API field unset
		v1.RoleKindServer:  "server",
		v1.RoleKindPrefill: "prefill",
		v1.RoleKindDecode:  "decode",
		v1.RoleKindEncode:  "encode",
	} {
		assert.Equal(t, label, kind.RouterSpelling(), "kind %q", kind)
	}
}

func TestInstanceTypeOfferedModes(t *testing.T) {
	converging := &v1.InstanceType{}
	assert.False(t, converging.AcceleratorReady(), "no manufacturer yet: the type has not converged")
	assert.False(t, converging.OffersSlicing())
	assert.Nil(t, converging.PartitionProfiles())

	mig := &v1.InstanceType{Status: v1.InstanceTypeStatus{Detail: &v1.InstanceTypeDetail{
		Manufacturer: "nvidia",
		SlicedDetail: &v1.SlicedDetail{
			Logical:  &v1.LogicalSlicing{Count: 0},
			Physical: &v1.PhysicalPartitioning{Count: 7, Profiles: []v1.ProfileCount{{Name: "1g.10gb", Count: 7}}},
		},
	}}}
	assert.True(t, mig.AcceleratorReady())
	assert.False(t, mig.OffersSlicing(), "a zero logical count offers no slicing")
	assert.Equal(t, []v1.ProfileCount{{Name: "1g.10gb", Count: 7}}, mig.PartitionProfiles())

	sliced := &v1.InstanceType{Status: v1.InstanceTypeStatus{Detail: &v1.InstanceTypeDetail{
		Manufacturer: "nvidia",
		SlicedDetail: &v1.SlicedDetail{Logical: &v1.LogicalSlicing{Count: 10}, Physical: &v1.PhysicalPartitioning{Count: 0}},
	}}}
	assert.True(t, sliced.OffersSlicing())
	assert.Nil(t, sliced.PartitionProfiles(), "a zero physical count cannot partition")
}
