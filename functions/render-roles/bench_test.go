package renderroles_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/api/resource"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// grpcLimit is the largest response Crossplane accepts from a function: gRPC's default 4 MiB.
const grpcLimit = 4 << 20

func mustStruct(tb testing.TB, v any) *structpb.Struct {
	tb.Helper()
	b, err := json.Marshal(v)
	require.NoError(tb, err)
	m := map[string]any{}
	require.NoError(tb, json.Unmarshal(b, &m))
	s, err := structpb.NewStruct(m)
	require.NoError(tb, err)
	return s
}

// largeRole is a role at the schema's ceilings, with a realistic command line.
func largeRole(replicas, size int32) workerv1.ModelDeploymentRole {
	eight := resource.MustParse("8")
	one := resource.MustParse("1")
	return workerv1.ModelDeploymentRole{
		Name: "decode", Kind: workerv1.RoleKindDecode, Replicas: replicas, Size: size, InstanceType: "h100",
		Resources: &workerv1.ModelDeploymentRoleResources{Accelerator: &eight, Interface: &one},
		ExtraArgs: []string{"--tensor-parallel-size", "8", "--pipeline-parallel-size", "2", "--max-model-len", "131072",
			"--gpu-memory-utilization", "0.92", "--enable-prefix-caching", "--trust-remote-code"},
		Env:      []workerv1.ModelDeploymentEnvVar{{Name: "NCCL_DEBUG", Value: "WARN"}, {Name: "HF_HUB_OFFLINE", Value: "1"}},
		Topology: &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "topology.gpustack.ai/rack"},
	}
}

func deploymentRequest(tb testing.TB, roles int, replicas, size int32) *fnv1.RunFunctionRequest {
	md := &workerv1.ModelDeployment{
		TypeMeta: typeMeta(workerv1.SchemeGroupVersion.String(), workerv1.ModelDeploymentKind),
		Spec:     *spec(),
	}
	md.Name, md.Namespace = "qwen", "team-a"
	for i := range roles {
		r := largeRole(replicas, size)
		r.Name = fmt.Sprintf("role-%d", i)
		r.Kind = workerv1.RoleKindServer
		md.Spec.Roles = append(md.Spec.Roles, r)
	}
	return &fnv1.RunFunctionRequest{
		Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: mustStruct(tb, md)}},
		RequiredResources: map[string]*fnv1.Resources{
			"instancetype/h100":   {Items: []*fnv1.Resource{{Resource: mustStruct(tb, withTypeMeta(h100()))}}},
			"runtimeclass/nvidia": {},
			"settings":            {},
		},
	}
}

func withTypeMeta(it *workerv1.InstanceType) *workerv1.InstanceType {
	it.TypeMeta = typeMeta(workerv1.SchemeGroupVersion.String(), workerv1.InstanceTypeKind)
	return it
}

// TestMessagesStayUnderTheGRPCLimit renders the largest deployment the schema admits
// and checks the request and the response fit gRPC's default 4 MiB with room to spare (under half
// of it).
func TestMessagesStayUnderTheGRPCLimit(t *testing.T) {
	for name, req := range map[string]*fnv1.RunFunctionRequest{
		"deployment of 10 roles": deploymentRequest(t, 10, workerv1.MaxReplicas, workerv1.MaxSize),
	} {
		rsp, err := (&renderroles.Function{}).RunFunction(context.Background(), req)
		require.NoError(t, err)
		msg, _ := fatalMessage(rsp)
		require.Empty(t, msg, name)
		require.NotEmpty(t, rsp.GetDesired().GetResources(), name)
		for what, size := range map[string]int{"request": proto.Size(req), "response": proto.Size(rsp)} {
			t.Logf("%s: %s of %d bytes (%.1f%% of 4 MiB)", name, what, size, 100*float64(size)/grpcLimit)
			require.Less(t, size, grpcLimit/2, name+": "+what)
		}
	}
}

func benchmarkStep(b *testing.B, req *fnv1.RunFunctionRequest) {
	f := &renderroles.Function{}
	var size int
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rsp, err := f.RunFunction(context.Background(), req)
		if err != nil {
			b.Fatal(err)
		}
		size = proto.Size(rsp)
	}
	b.ReportMetric(float64(size), "response-bytes")
}

func BenchmarkDeploymentStep_Role1024x1(b *testing.B) {
	benchmarkStep(b, deploymentRequest(b, 1, 1024, 1))
}
