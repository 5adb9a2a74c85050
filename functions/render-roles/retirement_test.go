package renderroles_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// TestStatusRetirement: status.retirement is the operation the role whose replica it retires
// reports, and absent when no role reports one.
func TestStatusRetirement(t *testing.T) {
	md := &workerv1.ModelDeployment{Spec: workerv1.ModelDeploymentSpec{Roles: []workerv1.ModelDeploymentRole{{Name: "prefill"}, {Name: "decode"}}}}
	role := func(op *workerv1.Retirement) *v1alpha1.ModelRole {
		return &v1alpha1.ModelRole{Status: v1alpha1.ModelRoleStatus{Retirement: op}}
	}
	assert.Nil(t, renderroles.ObservedRetirement(md, map[string]*v1alpha1.ModelRole{"prefill": role(nil), "decode": role(nil)}), "no operation: absent")
	got := renderroles.ObservedRetirement(md, map[string]*v1alpha1.ModelRole{"prefill": role(nil),
		"decode": role(&workerv1.Retirement{RoleName: "decode", ReplicaOrdinal: 0, State: workerv1.RetirementDraining, Reason: "busy",
			Deadline: metav1.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC)})})
	if assert.NotNil(t, got) {
		assert.Equal(t, workerv1.RetirementDraining, got.State)
		assert.Equal(t, "decode", got.RoleName)
		assert.Equal(t, int32(0), got.ReplicaOrdinal)
		assert.Equal(t, metav1.Date(2026, 12, 1, 10, 5, 0, 0, got.Deadline.Location()), got.Deadline)
	}
}
