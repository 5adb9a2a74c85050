package validation_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func elastic(width int32) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		r.ElasticEP = &workerv1.ModelDeploymentRoleElasticEP{Width: width, HeadInstanceType: "cpu"}
	}
}

// elasticTypes are the member's GPU type and a CPU-only head type.
func elasticTypes(edit func(head *workerv1.InstanceType)) map[string]*workerv1.InstanceType {
	types := h100(nil)
	head := &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}}
	if edit != nil {
		edit(head)
	}
	types["cpu"] = head
	return types
}

// TestElasticRefusals: one row per Elastic EP refusal, with the near-miss beside it that is
// admitted.
func TestElasticRefusals(t *testing.T) {
	ok := func(edits ...func(*workerv1.ModelDeploymentRole)) *workerv1.ModelDeployment {
		return deployment(nil, role("server", "", append([]func(*workerv1.ModelDeploymentRole){elastic(2)}, edits...)...))
	}
	cases := []struct {
		rule     string
		refused  *workerv1.ModelDeployment
		path     string
		parts    []string
		admitted *workerv1.ModelDeployment
	}{
		{"the engine must be vLLM", deployment(sglang, role("server", "", elastic(2))), "spec.engine.name",
			[]string{"Elastic EP runs on vLLM only"}, ok()},
		{"the elastic role must be the only role", deployment(nil, role("server", "", elastic(2)), role("other", "")), "spec.roles",
			[]string{`role "server" carries elasticEp, which must be the deployment's only role`}, ok()},
		{"headInstanceType is required", ok(func(r *workerv1.ModelDeploymentRole) { r.ElasticEP.HeadInstanceType = "" }),
			"spec.roles[0].elasticEp.headInstanceType", []string{"Required value"}, ok()},
		{"the Ray head's name must be a DNS-1035 label", deployment(func(md *workerv1.ModelDeployment) { md.Name = strings.Repeat("m", 51) }, role("server", "", elastic(2))),
			"metadata.name", []string{"(64 characters)", "shorten the deployment name"},
			deployment(func(md *workerv1.ModelDeployment) { md.Name = strings.Repeat("m", 50) }, role("server", "", elastic(2)))},
		{"a router is not supported", deployment(llmd, role("server", "", elastic(2))), "spec.router",
			[]string{"not supported in this release", "the Ray head and the worker members"}, ok()},
		{"kind must be Server", ok(func(r *workerv1.ModelDeploymentRole) { r.Kind = workerv1.RoleKindDecode }), "spec.roles[0].kind",
			[]string{"kind must be Server"}, ok()},
		{"replicas must be 1", ok(shape(2, 1)), "spec.roles[0].replicas", []string{"replicas must be 1", "elasticEp.width"}, ok(shape(1, 1))},
		{"size must be 1", ok(shape(1, 2)), "spec.roles[0].size", []string{"size must be 1"}, ok(shape(1, 1))},
		{"command is forbidden", ok(func(r *workerv1.ModelDeploymentRole) { r.Command = []string{"vllm", "serve", "x"} }), "spec.roles[0].command",
			[]string{"Forbidden", "remove command"}, ok()},
		{"the accelerator count must be the tensor-parallel size", ok(args("-tp", "2"), cards("1")), "spec.roles[0].resources.accelerator",
			[]string{"tensor-parallel size is 2, so request accelerator: 2"}, ok(args("-tp", "2"), cards("2"))},
		{"a logical slice is forbidden", ok(sliced), "spec.roles[0].resources", []string{"Forbidden", "whole cards"}, ok(cards("1"))},
		{"a partition profile is forbidden", ok(func(r *workerv1.ModelDeploymentRole) {
			r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb"}
		}), "spec.roles[0].resources.acceleratorPartitionedProfile", []string{"Forbidden"}, ok()},
		{"a fabric interface is forbidden", ok(fabric("1")), "spec.roles[0].resources.interface", []string{"Forbidden"}, ok(fabric("0"))},
		{"an owned flag is written by the elastic renderer", ok(args("--data-parallel-size", "4")), "spec.roles[0].extraArgs[0]",
			[]string{"--data-parallel-size is written by the elastic renderer itself"}, ok(args("--max-model-len", "4096"))},
		{"an owned flag's single-dash spelling", ok(args("-dpb", "mp")), "spec.roles[0].extraArgs[0]",
			[]string{"--data-parallel-backend is written by the elastic renderer itself"}, ok(args("-tp", "1"))},
		{"an owned flag's prefix and underscores", ok(args("--enable_elastic=1")), "spec.roles[0].extraArgs[0]",
			[]string{"--enable-elastic-ep is written by the elastic renderer itself"}, ok()},
		{"a pipeline stage count is owned", ok(args("--pipeline-parallel-size=2")), "spec.roles[0].extraArgs[0]",
			[]string{"--pipeline-parallel-size is written by the elastic renderer itself"}, ok()},
		{"an owned variable is written by the elastic renderer", ok(env("RAY_ADDRESS", "x:6379")), "spec.roles[0].env[0].name",
			[]string{"RAY_ADDRESS is written by the elastic renderer itself"}, ok(env("RAY_LOGGER_LEVEL", "debug"))},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			refused(t, validation.ValidateCreate(tc.refused, validation.Cluster{}), tc.path, tc.parts...)
			assert.Empty(t, validation.ValidateCreate(tc.admitted, validation.Cluster{}), "the near-miss is admitted")
		})
	}
}

// TestElasticHeadInstanceType: the Ray head's type exists and runs CPU-only, where admission reads
// the types.
func TestElasticHeadInstanceType(t *testing.T) {
	md := deployment(nil, role("server", "", elastic(2)))
	refused(t, validation.ValidateCreate(md, validation.Cluster{InstanceTypes: h100(nil)}), "spec.roles[0].elasticEp.headInstanceType", "Not found", `"cpu"`)
	refused(t, validation.ValidateCreate(md, validation.Cluster{InstanceTypes: elasticTypes(func(it *workerv1.InstanceType) { it.Spec.Acceleratable = true })}),
		"spec.roles[0].elasticEp.headInstanceType", "runs CPU-only")
	assert.Empty(t, validation.ValidateCreate(md, validation.Cluster{InstanceTypes: elasticTypes(nil)}))
}

// TestElasticEdits: width only grows; size, resources and the effective tensor-parallel size are
// frozen; every other edit (an identical one, env, width growth) is admitted.
func TestElasticEdits(t *testing.T) {
	stored := deployment(nil, role("server", "", elastic(3), args("-tp", "2"), cards("2")))
	edit := func(change func(r *workerv1.ModelDeploymentRole)) *workerv1.ModelDeployment {
		md := stored.DeepCopy()
		change(&md.Spec.Roles[0])
		return md
	}
	refusedRows := []struct {
		rule, path string
		change     func(r *workerv1.ModelDeploymentRole)
		part       string
	}{
		{"a width decrease is not supported", "spec.roles[0].elasticEp.width", func(r *workerv1.ModelDeploymentRole) { r.ElasticEP.Width = 2 },
			validation.ElasticScaleDownMessage},
		{"resources are frozen", "spec.roles[0]", func(r *workerv1.ModelDeploymentRole) {
			r.Resources.Accelerator = ptr.To(resource.MustParse("4"))
			r.ExtraArgs = []string{"-tp", "4"}
		}, validation.ElasticFrozenMessage},
		{"the effective tensor-parallel size is frozen", "spec.roles[0].extraArgs", func(r *workerv1.ModelDeploymentRole) {
			r.ExtraArgs = []string{"--tensor-parallel-size=4"}
		}, "frozen at 2"},
	}
	for _, tc := range refusedRows {
		t.Run(tc.rule, func(t *testing.T) {
			refused(t, validation.ValidateUpdate(edit(tc.change), stored, validation.Cluster{}), tc.path, tc.part)
		})
	}
	admitted := map[string]func(r *workerv1.ModelDeploymentRole){
		"an identical update": func(*workerv1.ModelDeploymentRole) {},
		"a width increase":    func(r *workerv1.ModelDeploymentRole) { r.ElasticEP.Width = 5 },
		"an env edit": func(r *workerv1.ModelDeploymentRole) {
			r.Env = []workerv1.ModelDeploymentEnvVar{{Name: "RAY_DEDUP_LOGS", Value: "0"}}
		},
		"the same count written as another form": func(r *workerv1.ModelDeploymentRole) { r.Resources.Accelerator = ptr.To(resource.MustParse("2000m")) },
		"the same TP in another spelling":        func(r *workerv1.ModelDeploymentRole) { r.ExtraArgs = []string{"--tensor_parallel_size=2"} },
	}
	for rule, change := range admitted {
		t.Run(rule, func(t *testing.T) {
			assert.Empty(t, validation.ValidateUpdate(edit(change), stored, validation.Cluster{}))
		})
	}
}
