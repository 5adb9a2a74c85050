package xfn_test

import (
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/xfn"
)

func composite(t *testing.T, m map[string]any) *fnv1.Resource {
	t.Helper()
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return &fnv1.Resource{Resource: s}
}

// TestSetDesiredStatus: a typed status is written field by field over what earlier steps wrote; a
// count reported through a pointer is written at zero, an unset field is left alone, and a removed
// field is gone.
func TestSetDesiredStatus(t *testing.T) {
	xr := map[string]any{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": map[string]any{"name": "chat"}}
	earlier := map[string]any{"status": map[string]any{"endpoint": "http://chat.team-a.svc:8000", "roleSummary": "1S"}}
	req := &fnv1.RunFunctionRequest{
		Observed: &fnv1.State{Composite: composite(t, xr)},
		Desired:  &fnv1.State{Composite: composite(t, earlier)},
	}
	observed, err := request.GetObservedCompositeResource(req)
	require.NoError(t, err)

	rsp := &fnv1.RunFunctionResponse{}
	status := &workerv1.ModelDeploymentStatus{
		Roles:  []workerv1.RoleStatus{{Name: "server", Kind: workerv1.RoleKindServer, Desired: 2, Ready: ptr.To[int32](0)}},
		Router: &workerv1.RouterStatus{Name: workerv1.RouterVLLM},
	}
	require.NoError(t, xfn.SetDesiredStatus(req, rsp, observed, status, "endpoint"))

	got := rsp.GetDesired().GetComposite().GetResource().AsMap()
	assert.Equal(t, "ModelDeployment", got["kind"])
	assert.Equal(t, map[string]any{
		"roleSummary": "1S",
		"roles":       []any{map[string]any{"name": "server", "kind": "Server", "desired": 2.0, "ready": 0.0}},
		"router":      map[string]any{"name": "vllm-router"},
	}, got["status"])
}

// TestSetDesiredStatusOfAReplica: the flags and counts of a replica are written even when false or
// zero.
func TestSetDesiredStatusOfAReplica(t *testing.T) {
	xr := map[string]any{"apiVersion": "internal.mdplane.io/v1alpha1", "kind": "ModelReplica", "metadata": map[string]any{"name": "r"}}
	req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: composite(t, xr)}}
	observed, err := request.GetObservedCompositeResource(req)
	require.NoError(t, err)
	rsp := &fnv1.RunFunctionResponse{}
	status := &v1alpha1.ModelReplicaStatus{Members: ptr.To[int32](0), ReadyMembers: ptr.To[int32](0), Workload: "w",
		Quota: "InFlight", QuotaReserved: ptr.To(false), Admitted: ptr.To(false)}
	require.NoError(t, xfn.SetDesiredStatus(req, rsp, observed, status))
	assert.Equal(t, map[string]any{"members": 0.0, "readyMembers": 0.0, "workload": "w", "quota": "InFlight",
		"quotaReserved": false, "admitted": false}, rsp.GetDesired().GetComposite().GetResource().AsMap()["status"])
}

// TestStateReadiness: a step states the composite's readiness from the resources composed so far and
// marks each of them ready, so Crossplane records no not-ready event per reconcile.
func TestStateReadiness(t *testing.T) {
	const yes, no = fnv1.Ready_READY_TRUE, fnv1.Ready_READY_FALSE
	cases := []struct {
		name      string
		composite fnv1.Ready
		resources []fnv1.Ready
		want      fnv1.Ready
	}{
		{"ready when every composed resource is", fnv1.Ready_READY_UNSPECIFIED, []fnv1.Ready{yes, yes}, yes},
		{"not ready while one composed resource is not", fnv1.Ready_READY_UNSPECIFIED, []fnv1.Ready{yes, no}, no},
		{"a resource whose readiness is unspecified is not ready", fnv1.Ready_READY_UNSPECIFIED, []fnv1.Ready{yes, fnv1.Ready_READY_UNSPECIFIED}, no},
		{"not ready when an earlier step stated not ready", no, []fnv1.Ready{yes, yes}, no},
		{"ready when an earlier step stated ready and this step's resources are", yes, []fnv1.Ready{yes}, yes},
		{"not ready with nothing composed", fnv1.Ready_READY_UNSPECIFIED, nil, no},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rsp := &fnv1.RunFunctionResponse{Desired: &fnv1.State{Composite: &fnv1.Resource{Ready: c.composite}, Resources: map[string]*fnv1.Resource{}}}
			for i, r := range c.resources {
				rsp.Desired.Resources[string(rune('a'+i))] = &fnv1.Resource{Ready: r}
			}
			xfn.StateReadiness(rsp)
			assert.Equal(t, c.want, rsp.GetDesired().GetComposite().GetReady())
			for name, r := range rsp.GetDesired().GetResources() {
				assert.Equal(t, yes, r.GetReady(), "%s is marked ready: the composite's stated readiness speaks for it", name)
			}
		})
	}
}

// TestSetDesiredStatusKeepsTheStatedReadiness: writing the status after a step stated the
// composite's readiness keeps that readiness.
func TestSetDesiredStatusKeepsTheStatedReadiness(t *testing.T) {
	xr := map[string]any{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelDeployment", "metadata": map[string]any{"name": "chat"}}
	req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: composite(t, xr)}}
	observed, err := request.GetObservedCompositeResource(req)
	require.NoError(t, err)
	rsp := &fnv1.RunFunctionResponse{}
	xfn.SetDesiredReady(rsp, false)
	require.NoError(t, xfn.SetDesiredStatus(req, rsp, observed, &workerv1.ModelDeploymentStatus{RoleSummary: "1S"}))
	assert.Equal(t, fnv1.Ready_READY_FALSE, rsp.GetDesired().GetComposite().GetReady())
}
