package validation_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// FuzzValidateAndRender drives random deployments through validation and the role render: neither
// may panic, and every refusal names a field. `go test -fuzz FuzzValidateAndRender ./apis/validation`
// explores; plain `go test` runs the seeds.
func FuzzValidateAndRender(f *testing.F) {
	f.Add("qwen", "server", "Server", int32(2), int32(1), "-tp 4 --max-model-len 8192", "NCCL_DEBUG", "2", false, "")
	f.Add("a", "p", "Prefill", int32(1), int32(8), "--kv_transfer_config {} --port=5557", "GPUSTACK_MEMBER_INDEX", "x", true, "kubernetes.io/hostname")
	f.Add(strings.Repeat("d", 60), "x-r0", "Decode", int32(1024), int32(64), "-pp", "VLLM_DP_SIZE", "-1", true, "rack level")
	f.Fuzz(func(t *testing.T, name, roleName, kind string, replicas, size int32, args, envName, envValue string, cache bool, level string) {
		eight := resource.MustParse("8")
		role := workerv1.ModelDeploymentRole{
			Name: roleName, Kind: workerv1.RoleKind(kind), Replicas: replicas, Size: size, InstanceType: "h100",
			ExtraArgs: strings.Fields(args), Env: []workerv1.ModelDeploymentEnvVar{{Name: envName, Value: envValue}},
			Resources: &workerv1.ModelDeploymentRoleResources{Accelerator: &eight},
			Topology:  &workerv1.ModelDeploymentRoleTopology{RequiredLevel: level},
		}
		md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
			Spec: workerv1.ModelDeploymentSpec{
				Model:  workerv1.ModelDeploymentModel{Name: "m"},
				Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM, Image: "i"},
				Roles:  []workerv1.ModelDeploymentRole{role, {Name: "other", InstanceType: "h100"}},
			}}
		if cache {
			md.Spec.KVCache = &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "b"}}
		}
		types := h100(func(it *workerv1.InstanceType) { it.Status.Entrance = "q" })
		for _, e := range validation.ValidateCreate(md, validation.Cluster{InstanceTypes: types}) {
			if e.Field == "" {
				t.Fatalf("a refusal without a field path: %v", e)
			}
		}
		_, _ = renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: name, Spec: &md.Spec, Role: role,
			InstanceType: types["h100"], Binding: nil})
	})
}
