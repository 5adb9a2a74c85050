package renderroles

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The deployment's status.phase, one row per rule, each beside its near miss.
func TestDeploymentPhase(t *testing.T) {
	role := func(name string, desired, ready int32) workerv1.RoleStatus {
		return workerv1.RoleStatus{Name: name, Desired: desired, Ready: ptr.To(ready)}
	}
	deployment := func(was workerv1.Phase, routed, deleted bool) *workerv1.ModelDeployment {
		md := &workerv1.ModelDeployment{}
		md.Status.Phase = was
		if routed {
			md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: "llm-d-router"}
		}
		if deleted {
			md.DeletionTimestamp = &metav1.Time{}
		}
		return md
	}
	for _, tc := range []struct {
		rule        string
		md          *workerv1.ModelDeployment
		routerReady int64
		roles       []workerv1.RoleStatus
		want        workerv1.Phase
		message     string
	}{
		{"every role with every declared replica Ready is Ready", deployment("", false, false), 0,
			[]workerv1.RoleStatus{role("prefill", 2, 2), role("decode", 1, 1)}, workerv1.PhaseReady, "every role has every declared replica Ready"},
		{"a role declaring none is not short", deployment("", false, false), 0,
			[]workerv1.RoleStatus{role("server", 0, 0)}, workerv1.PhaseReady, "every role has every declared replica Ready"},
		{"short before it was first Ready is Starting", deployment("", false, false), 0,
			[]workerv1.RoleStatus{role("prefill", 2, 2), role("decode", 2, 1)}, workerv1.PhaseStarting, "role decode has 1 of 2 replicas Ready"},
		{"short after Starting is still Starting", deployment(workerv1.PhaseStarting, false, false), 0,
			[]workerv1.RoleStatus{role("server", 2, 0)}, workerv1.PhaseStarting, "role server has 0 of 2 replicas Ready"},
		{"short after it was Ready is Degraded", deployment(workerv1.PhaseReady, false, false), 0,
			[]workerv1.RoleStatus{role("server", 3, 2)}, workerv1.PhaseDegraded, "role server has 2 of 3 replicas Ready"},
		{"Degraded stays Degraded while short", deployment(workerv1.PhaseDegraded, false, false), 0,
			[]workerv1.RoleStatus{role("server", 3, 1)}, workerv1.PhaseDegraded, "role server has 1 of 3 replicas Ready"},
		{"Degraded is Ready again once nothing is short", deployment(workerv1.PhaseDegraded, false, false), 0,
			[]workerv1.RoleStatus{role("server", 3, 3)}, workerv1.PhaseReady, "every role has every declared replica Ready"},
		{"every role Ready but the router not is Degraded, with the RouterReady message", deployment("", true, false), 0,
			[]workerv1.RoleStatus{role("server", 1, 1)}, workerv1.PhaseDegraded, `router "llm-d-router" has no ready replicas`},
		{"a short role is named before the router", deployment("", true, false), 0,
			[]workerv1.RoleStatus{role("server", 1, 0)}, workerv1.PhaseStarting, "role server has 0 of 1 replicas Ready"},
		{"a router with a ready replica is not short", deployment("", true, false), 1,
			[]workerv1.RoleStatus{role("server", 1, 1)}, workerv1.PhaseReady, "every role has every declared replica Ready"},
		{"every short role is named", deployment("", false, false), 0,
			[]workerv1.RoleStatus{role("prefill", 2, 0), role("decode", 2, 1)}, workerv1.PhaseStarting,
			"role prefill has 0 of 2 replicas Ready; role decode has 1 of 2 replicas Ready"},
		{"a deployment being deleted is Deleting", deployment(workerv1.PhaseReady, false, true), 0,
			[]workerv1.RoleStatus{role("server", 1, 1)}, workerv1.PhaseDeleting, "the deployment is being deleted"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			phase, message := deploymentPhase(tc.md, tc.routerReady, tc.roles, nil)
			assert.Equal(t, tc.want, phase)
			assert.Equal(t, tc.message, message)
		})
	}
}

// TestDeploymentPhaseNamesALostNode: a short role names the node that stopped reporting under it.
func TestDeploymentPhaseNamesALostNode(t *testing.T) {
	md := &workerv1.ModelDeployment{Status: workerv1.ModelDeploymentStatus{Phase: workerv1.PhaseReady}}
	lost := map[string]string{"decode": "r1: node gpu-7 stopped reporting"}
	_, message := deploymentPhase(md, 0, []workerv1.RoleStatus{
		{Name: "prefill", Desired: 2, Ready: ptr.To[int32](2)}, {Name: "decode", Desired: 2, Ready: ptr.To[int32](1)}}, lost)
	assert.Equal(t, "role decode has 1 of 2 replicas Ready (r1: node gpu-7 stopped reporting)", message)
	_, message = deploymentPhase(md, 0, []workerv1.RoleStatus{{Name: "decode", Desired: 2, Ready: ptr.To[int32](2)}}, lost)
	assert.Equal(t, "every role has every declared replica Ready", message, "near miss: a role not short names no node")
}

// TestRoleNotes: a role's notes name the node that stopped reporting, what its lowest slot waiting
// for an autoscaled pool's nodes is told, and its lowest slot evicted at the PodsReady timeout, with
// when the slot is filled again; near miss: a role with none of them has none.
func TestRoleNotes(t *testing.T) {
	until := metav1.NewTime(time.Date(2026, 12, 5, 16, 40, 5, 0, time.UTC))
	roles := map[string]*v1alpha1.ModelRole{
		"server": {Status: v1alpha1.ModelRoleStatus{LostNode: "r2: node gpu-7 stopped reporting", ReadyTimeouts: map[string]v1alpha1.ReadyTimeout{
			"r3": {Count: 1}, "r1": {Count: 2, Until: until, Message: "Kueue evicted its group: PodsReadyTimeout: Exceeded the PodsReady timeout ns/wl"}}}},
		"decode":  {},
		"prefill": {Status: v1alpha1.ModelRoleStatus{Provisioning: "r0: waiting for its nodes to be provisioned (check mdplane-provisioning-x)"}},
	}
	assert.Equal(t, map[string]string{"prefill": "r0: waiting for its nodes to be provisioned (check mdplane-provisioning-x)", "server": "r2: node gpu-7 stopped reporting; " +
		"r1: Kueue evicted its group at the waitForPodsReady timeout 2 time(s) in a row (Kueue evicted its group: PodsReadyTimeout: Exceeded the PodsReady timeout ns/wl); " +
		"its slot is filled again from 2026-12-05T16:40:05Z: a timeout shorter than the engine's load time evicts it again"}, roleNotes(roles))
}

// TestBorrowingTypes: each borrowing type of the deployment's roles is told once; near miss: a
// lending type is not.
func TestBorrowingTypes(t *testing.T) {
	typed := func(name, reason string) *workerv1.InstanceType {
		return &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: workerv1.InstanceTypeStatus{Conditions: []metav1.Condition{
			{Type: workerv1.InstanceTypeCohort, Status: metav1.ConditionTrue, Reason: reason, Message: "in cohort pool: ..."}}}}
	}
	types := map[string]*workerv1.InstanceType{"h100": typed("h100", workerv1.ReasonBorrowing), "l4": typed("l4", workerv1.ReasonLending)}
	roles := []workerv1.ModelDeploymentRole{{Name: "prefill", InstanceType: "h100"}, {Name: "decode", InstanceType: "h100"}, {Name: "encode", InstanceType: "l4"}}
	assert.Equal(t, "InstanceType h100 in cohort pool: ...", borrowingTypes(roles, types))
}
