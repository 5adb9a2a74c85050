package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// TestStatusRetirement: status.retirement is the operation the rollout controller keeps on the role
// whose replica it retires, and absent when no role holds one.
func TestStatusRetirement(t *testing.T) {
	md := &workerv1.ModelDeployment{Spec: workerv1.ModelDeploymentSpec{Roles: []workerv1.ModelDeploymentRole{{Name: "prefill"}, {Name: "decode"}}}}
	role := func(annotation string) *v1alpha1.ModelRole {
		r := &v1alpha1.ModelRole{}
		if annotation != "" {
			r.Annotations = map[string]string{workerv1.AnnotationRetirement: annotation}
		}
		return r
	}
	assert.Nil(t, renderroles.ObservedRetirement(md, map[string]*v1alpha1.ModelRole{"prefill": role(""), "decode": role("")}), "no operation: absent")
	got := renderroles.ObservedRetirement(md, map[string]*v1alpha1.ModelRole{"prefill": role(""),
		"decode": role(`{"roleName":"decode","replicaOrdinal":0,"targetWorkloadUID":"","state":"Draining","reason":"busy","startedAt":"2026-12-01T10:00:00Z","deadline":"2026-12-01T10:05:00Z","phaseStartedAt":"2026-12-01T10:00:30Z"}`)})
	if assert.NotNil(t, got) {
		assert.Equal(t, workerv1.RetirementDraining, got.State)
		assert.Equal(t, "decode", got.RoleName)
		assert.Equal(t, int32(0), got.ReplicaOrdinal)
		assert.Equal(t, metav1.Date(2026, 12, 1, 10, 5, 0, 0, got.Deadline.Location()), got.Deadline)
	}
}
