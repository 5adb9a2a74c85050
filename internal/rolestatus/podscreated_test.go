package rolestatus_test

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/rolestatus"
)

const refusal = `pods "md-decode-r1-m0" is forbidden: violates PodSecurity "baseline:latest": hostPath volumes (volume "gpustack-compile-cache")`

func replicaWith(ordinal int32, conditions ...xpv2.Condition) *v1alpha1.ModelReplica {
	r := &v1alpha1.ModelReplica{Spec: v1alpha1.ModelReplicaSpec{Ordinal: ordinal}}
	r.Status.SetConditions(conditions...)
	return r
}

func roleWith(conditions ...xpv2.Condition) *v1alpha1.ModelRole {
	r := &v1alpha1.ModelRole{}
	r.Status.SetConditions(conditions...)
	return r
}

func TestRolePodsCreated(t *testing.T) {
	accepted, refused := replicas.ReplicaPodsCreated(""), replicas.ReplicaPodsCreated(refusal)
	for _, tc := range []struct {
		name     string
		replicas []*v1alpha1.ModelReplica
		carried  bool
		want     rolestatus.Condition
		known    bool
	}{
		{name: "a refused replica makes the role False, naming the replica and the API server's message",
			replicas: []*v1alpha1.ModelReplica{replicaWith(0, accepted), replicaWith(1, refused)}, known: true,
			want: rolestatus.Condition{Status: "False", Reason: "PodRefused", Message: "replica 1: " + refusal}},
		{name: "several refused replicas name the first and count the others",
			replicas: []*v1alpha1.ModelReplica{replicaWith(0, refused), nil, replicaWith(2, refused), replicaWith(3, refused)}, known: true,
			want: rolestatus.Condition{Status: "False", Reason: "PodRefused", Message: "replica 0: " + refusal + "; and 2 more replicas refused"}},
		{name: "near miss: every replica accepted is True",
			replicas: []*v1alpha1.ModelReplica{replicaWith(0, accepted), replicaWith(1, accepted)}, known: true,
			want: rolestatus.Condition{Status: "True", Reason: "Created", Message: "the API server accepted the Pods of every replica"}},
		{name: "a role that carries the condition keeps writing it once its replicas carry none",
			replicas: []*v1alpha1.ModelReplica{replicaWith(0)}, carried: true, known: true,
			want: rolestatus.Condition{Status: "True", Reason: "Created", Message: "the API server accepted the Pods of every replica"}},
		{name: "near miss: nothing written before any replica reports",
			replicas: []*v1alpha1.ModelReplica{replicaWith(0), nil},
			want:     rolestatus.Condition{Status: "True", Reason: "Created", Message: "the API server accepted the Pods of every replica"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := rolestatus.RolePodsCreated(tc.replicas, tc.carried)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.known, known)
		})
	}
}

func TestDeploymentPodsCreated(t *testing.T) {
	refusedRole := roleWith(xpv2.Condition{Type: v1alpha1.PodsCreatedConditionType, Status: "False", Reason: v1alpha1.PodRefusedReason,
		Message: "replica 1: " + refusal})
	acceptedRole := roleWith(xpv2.Condition{Type: v1alpha1.PodsCreatedConditionType, Status: "True", Reason: v1alpha1.PodsCreatedReason})
	for _, tc := range []struct {
		name    string
		roles   []*v1alpha1.ModelRole
		carried bool
		want    rolestatus.Condition
		known   bool
	}{
		{name: "a refused role makes the deployment False, naming the role, the replica and the API server's message",
			roles: []*v1alpha1.ModelRole{acceptedRole, refusedRole}, known: true,
			want: rolestatus.Condition{Status: "False", Reason: "PodRefused", Message: "role decode replica 1: " + refusal}},
		{name: "near miss: every role accepted is True",
			roles: []*v1alpha1.ModelRole{acceptedRole, acceptedRole}, known: true,
			want: rolestatus.Condition{Status: "True", Reason: "Created", Message: "the API server accepted the Pods of every role"}},
		{name: "near miss: nothing written before any role reports",
			roles: []*v1alpha1.ModelRole{nil, roleWith()},
			want:  rolestatus.Condition{Status: "True", Reason: "Created", Message: "the API server accepted the Pods of every role"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, known := rolestatus.DeploymentPodsCreated([]string{"prefill", "decode"}, tc.roles, tc.carried)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.known, known)
		})
	}
}
