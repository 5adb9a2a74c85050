package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestLoadBalanceShape has one row per row of the load-balance classification table.
func TestLoadBalanceShape(t *testing.T) {
	cases := []struct {
		rule   string
		args   []string
		shape  string
		reason string
	}{
		{"no flags: Internal", nil, "Internal", ""},
		{"a rank per member: External", []string{"--data-parallel-rank", "$(GPUSTACK_MEMBER_INDEX)"}, "External", ""},
		{"a start rank alone: Internal", []string{"--data-parallel-start-rank=1"}, "Internal", ""},
		{"one local rank of four from a start rank: implicit External",
			[]string{"--data-parallel-size=4", "--data-parallel-size-local=1", "--data-parallel-start-rank=1"}, "External", ""},
		{"two local ranks of four from a start rank: Hybrid",
			[]string{"--data-parallel-size=4", "--data-parallel-size-local=2", "--data-parallel-start-rank=2"}, "Hybrid", ""},
		{"four local ranks of four: Internal",
			[]string{"--data-parallel-size=4", "--data-parallel-size-local=4", "--data-parallel-start-rank=0"}, "Internal", ""},
		{"implicit External with --headless: Internal",
			[]string{"--data-parallel-size=4", "--data-parallel-size-local=1", "--data-parallel-start-rank=1", "--headless"}, "Internal", ""},
		{"hybrid-lb with the local count unset: Hybrid", []string{"--data-parallel-hybrid-lb"}, "Hybrid", ""},
		{"hybrid-lb with every rank local: normalized Internal",
			[]string{"--data-parallel-hybrid-lb", "--data-parallel-size=4", "--data-parallel-size-local=4"}, "Internal", ""},
		{"multi-port external lb: MultiPort", []string{"--data-parallel-multi-port-external-lb"}, "MultiPort", ""},
		{"a start rank over several nodes without the local count: Unknown",
			[]string{"--data-parallel-start-rank=0", "--nnodes=2"}, "Unknown", "requires an explicit data-parallel-size-local"},
		{"nnodes missing beside a start rank of a data-parallel group: Unknown",
			[]string{"--data-parallel-size=4", "--data-parallel-start-rank=1"}, "Unknown", "nnodes must be a readable positive integer"},
		{"nnodes 0 beside a start rank: Unknown",
			[]string{"--data-parallel-start-rank=1", "--nnodes=0"}, "Unknown", "nnodes must be a readable positive integer"},
		{"nnodes 2:3 beside a start rank: Unknown",
			[]string{"--data-parallel-start-rank=1", "--nnodes", "2:3"}, "Unknown", "nnodes must be a readable positive integer"},
		{"flags voting different shapes: Unknown",
			[]string{"--data-parallel-external-lb", "--data-parallel-hybrid-lb"}, "Unknown", "the balance flags --data-parallel-external-lb, --data-parallel-hybrid-lb derive to different shapes"},
		{"a rank flag beside a start rank votes Hybrid",
			[]string{"--data-parallel-rank", "1", "--data-parallel-start-rank", "0"}, "Hybrid", ""},
		{"spellings count: -dpn, and underscores in a long flag",
			[]string{"-dpn", "0", "--data_parallel_external_lb"}, "External", ""},
		{"nothing after a bare -- is read", []string{"--", "--data-parallel-rank", "0"}, "Internal", ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			p := engine.ReadParallelism(workerv1.EngineVLLM, workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindServer, ExtraArgs: tc.args})
			assert.Equal(t, tc.shape, p.LoadBalance)
			assert.Contains(t, p.Source.UnreadableReason, tc.reason)
			assert.Equal(t, tc.shape != "Unknown", p.Source.Complete)
		})
	}
}

func TestDeclaredParallelism(t *testing.T) {
	dpEnv := []workerv1.ModelDeploymentEnvVar{{Name: "VLLM_DP_SIZE", Value: "4"}}
	cases := []struct {
		rule     string
		engine   workerv1.Engine
		role     workerv1.ModelDeploymentRole
		declared workerv1.ParallelDegrees
		modes    map[string]bool
		source   workerv1.ParallelismSource
	}{
		{"a managed role is read from its extraArgs", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{ExtraArgs: []string{"-tp", "2", "--data-parallel-size", "2", "--enable-expert-parallel"}},
			workerv1.ParallelDegrees{TensorParallel: ptr.To[int32](2), DataParallel: ptr.To[int32](2)},
			map[string]bool{"expertParallel": true}, workerv1.ParallelismSource{Kind: "ExtraArgs", Complete: true}},
		{"VLLM_DP_SIZE supplies the degree where the command line does not drive it", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{ExtraArgs: []string{"-dp", "1"}, Env: dpEnv},
			workerv1.ParallelDegrees{DataParallel: ptr.To[int32](4)}, nil, workerv1.ParallelismSource{Kind: "ExtraArgs", Complete: true}},
		{"VLLM_DP_SIZE is ignored beside a data-parallel degree", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{ExtraArgs: []string{"-dp", "2"}, Env: dpEnv},
			workerv1.ParallelDegrees{DataParallel: ptr.To[int32](2)}, nil, workerv1.ParallelismSource{Kind: "ExtraArgs", Complete: true}},
		{"VLLM_DP_SIZE is ignored beside a declared local 0", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{ExtraArgs: []string{"-dpl", "0"}, Env: dpEnv},
			workerv1.ParallelDegrees{DataParallelLocal: ptr.To[int32](0)}, nil, workerv1.ParallelismSource{Kind: "ExtraArgs", Complete: true}},
		{"VLLM_DP_SIZE past 32 bits is unreadable, not wrapped (found by FuzzParallelDegrees)", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{Env: []workerv1.ModelDeploymentEnvVar{{Name: "VLLM_DP_SIZE", Value: "2147483648"}}},
			workerv1.ParallelDegrees{}, nil, workerv1.ParallelismSource{Kind: "ExtraArgs", UnreadableReason: "unreadable VLLM_DP_SIZE 2147483648"}},
		{"a take-over role is read from its command", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{Command: []string{"vllm", "serve", "m", "-tp", "4"}, ExtraArgs: []string{"-pp", "2"}},
			workerv1.ParallelDegrees{TensorParallel: ptr.To[int32](4)}, nil, workerv1.ParallelismSource{Kind: "UnmanagedCommand", Complete: true}},
		{"an unreadable degree makes the source incomplete", workerv1.EngineVLLM,
			workerv1.ModelDeploymentRole{ExtraArgs: []string{"-tp", "four"}},
			workerv1.ParallelDegrees{}, nil, workerv1.ParallelismSource{Kind: "ExtraArgs", UnreadableReason: `unreadable -tp "four"`}},
		{"SGLang: data-parallel attention is a mode", workerv1.EngineSGLang,
			workerv1.ModelDeploymentRole{ExtraArgs: []string{"--tp", "8", "--dp", "8", "--enable-dp-attention", "--moe-dp-size", "2"}},
			workerv1.ParallelDegrees{TensorParallel: ptr.To[int32](8), DataParallel: ptr.To[int32](8), MoeDpSize: ptr.To[int32](2)},
			map[string]bool{"dpAttention": true}, workerv1.ParallelismSource{Kind: "ExtraArgs", Complete: true}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			p := engine.ReadParallelism(tc.engine, tc.role)
			assert.Equal(t, tc.declared, p.Declared)
			assert.Equal(t, tc.modes, p.Modes)
			assert.Equal(t, tc.source, *p.Source)
		})
	}
}

func TestServesEveryMember(t *testing.T) {
	external := []string{"--data-parallel-rank", "$(GPUSTACK_MEMBER_INDEX)"}
	cases := []struct {
		rule string
		role workerv1.ModelDeploymentRole
		want bool
	}{
		{"an External-DP Server role serves through every rank", workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindServer, ExtraArgs: external}, true},
		{"a Hybrid Server role serves through every member", workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindServer, ExtraArgs: []string{"--data-parallel-hybrid-lb"}}, true},
		{"an Internal Server role is leader-served", workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindServer}, false},
		{"External DP in a Decode role stays leader-served", workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindDecode, ExtraArgs: external}, false},
		{"an Unknown shape stays leader-served", workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindServer, ExtraArgs: []string{"-dpe", "-dph"}}, false},
		{"a take-over role keeps its legacy leader", workerv1.ModelDeploymentRole{Kind: workerv1.RoleKindServer, Command: append([]string{"vllm", "serve"}, external...)}, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, engine.ServesEveryMember(workerv1.EngineVLLM, tc.role))
		})
	}
}
