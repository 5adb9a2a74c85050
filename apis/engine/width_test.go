package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestMemberWidth(t *testing.T) {
	vllm, sglang := workerv1.EngineVLLM, workerv1.EngineSGLang
	dpEnv := []workerv1.ModelDeploymentEnvVar{{Name: "VLLM_DP_SIZE", Value: "4"}}
	cases := []struct {
		rule    string
		engine  workerv1.Engine
		args    []string
		env     []workerv1.ModelDeploymentEnvVar
		cards   string
		degrees string
	}{
		{"nothing declared is one card", vllm, nil, nil, "1", "tensor-parallel 1 × pipeline-parallel 1"},
		{"vLLM: the local data-parallel count wins over the degree", vllm, []string{"-tp", "2", "-dp", "8", "-dpl", "2"}, nil, "4",
			"tensor-parallel 2 × pipeline-parallel 1 × data-parallel local 2 (-dpl)"},
		{"vLLM: a local count of 0 counts as undeclared, so the whole degree is judged", vllm, []string{"-dp", "8", "--data-parallel-size-local=0"}, nil, "8",
			"tensor-parallel 1 × pipeline-parallel 1 × data-parallel 8 (-dp, --data-parallel-size-local 0 placing none of it)"},
		{"vLLM: a local count of 0 does not reduce the tensor ranks", vllm, []string{"-tp", "4", "-dpl", "0"}, nil, "4",
			"tensor-parallel 4 × pipeline-parallel 1"},
		{"vLLM: beside a local count of 0, VLLM_DP_SIZE is not read", vllm, []string{"-dpl", "0"}, dpEnv, "1",
			"tensor-parallel 1 × pipeline-parallel 1"},
		{"vLLM: a local count of 1 is one rank", vllm, []string{"-tp", "2", "-dp", "8", "-dpl", "1"}, nil, "2",
			"tensor-parallel 2 × pipeline-parallel 1 × data-parallel local 1 (-dpl)"},
		{"vLLM: VLLM_DP_SIZE only where the flag does not drive data parallelism", vllm, []string{"-dp", "2"}, dpEnv, "2",
			"tensor-parallel 1 × pipeline-parallel 1 × data-parallel 2 (-dp)"},
		{"vLLM: VLLM_DP_SIZE beside -dp 1", vllm, []string{"-dp", "1"}, dpEnv, "4",
			"tensor-parallel 1 × pipeline-parallel 1 × data-parallel 4 (VLLM_DP_SIZE)"},
		{"vLLM: --nnodes spreads the world", vllm, []string{"-tp", "8", "-pp", "2", "-n", "2"}, nil, "8",
			"tensor-parallel 8 × pipeline-parallel 2 ÷ 2 hosts (-n)"},
		{"SGLang: the host carrying the remainder must fit", sglang, []string{"--tp", "16", "--nnodes", "3"}, nil, "6",
			"tensor-parallel 16 × pipeline-parallel 1 ÷ 3 hosts (--nnodes)"},
		{"SGLang: data-parallel attention adds no rank", sglang, []string{"--tp", "8", "--dp", "8", "--enable-dp-attention"}, nil, "8",
			"tensor-parallel 8 × pipeline-parallel 1"},
		{"SGLang: an MoE data-parallel degree narrows the tensor ranks instead of adding any", sglang, []string{"--tp", "4", "--dp", "2", "--moe-dp-size", "2"}, nil, "4",
			"tensor-parallel 4 × pipeline-parallel 1"},
		{"SGLang: an MoE data-parallel degree of 1 narrows nothing", sglang, []string{"--tp", "4", "--dp", "2", "--moe-dp-size", "1"}, nil, "8",
			"tensor-parallel 4 × pipeline-parallel 1 × data-parallel 2 (--dp)"},
		{"an unreadable degree counts as 1", vllm, []string{"-tp", "four"}, nil, "1", "tensor-parallel 1 × pipeline-parallel 1"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			w := engine.MemberWidth(tc.engine, tc.args, tc.env)
			assert.Equal(t, tc.cards, w.Cards.String())
			assert.Equal(t, tc.degrees, w.Degrees)
		})
	}
}
