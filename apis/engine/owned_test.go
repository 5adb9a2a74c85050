package engine_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestOwnedArgSpellings(t *testing.T) {
	vllm, sglang := workerv1.EngineVLLM, workerv1.EngineSGLang
	cases := []struct {
		rule    string
		engine  workerv1.Engine
		kvCache bool
		arg     string
		owned   string // "" when the argument is not an owned key
	}{
		{"vLLM: the flag itself", vllm, false, "--kv-transfer-config", "--kv-transfer-config"},
		{"vLLM: the flag with its value attached", vllm, false, `--kv-transfer-config={"kv_connector":"x"}`, "--kv-transfer-config"},
		{"vLLM: a unique prefix", vllm, false, "--kv-transfer-conf", "--kv-transfer-config"},
		{"vLLM: underscores", vllm, false, "--kv_transfer_config", "--kv-transfer-config"},
		{"vLLM: a dotted member", vllm, false, "--kv-transfer-config.kv_role", "--kv-transfer-config"},
		{"vLLM: a dotted member with a value", vllm, false, "--kv-transfer-config.kv_role=kv_both", "--kv-transfer-config"},
		{"vLLM: the events document", vllm, false, "--kv-events-config", "--kv-events-config"},
		{"vLLM: an events prefix with underscores", vllm, false, "--kv_events_conf", "--kv-events-config"},
		{"vLLM: --kv-cache-dtype while kvCache is set", vllm, true, "--kv-cache-dtype", "--kv-cache-dtype"},
		{"vLLM: --kv_cache_dtype while kvCache is set", vllm, true, "--kv_cache_dtype=fp8", "--kv-cache-dtype"},
		{"SGLang: --kv-cache-dtype while kvCache is set", sglang, true, "--kv-cache-dtype", "--kv-cache-dtype"},
		{"SGLang: the storage backend", sglang, false, "--hicache-storage-backend", "--hicache-storage-backend"},
		{"SGLang: the backend's extra config", sglang, false, "--hicache-storage-backend-extra-config", "--hicache-storage-backend-extra-config"},
		{"SGLang: a unique prefix", sglang, false, "--disaggregation-mo", "--disaggregation-mode"},
		{"SGLang: the transfer backend", sglang, false, "--disaggregation-transfer-backend=mooncake", "--disaggregation-transfer-backend"},
		{"SGLang: the bootstrap port", sglang, false, "--disaggregation-bootstrap-port", "--disaggregation-bootstrap-port"},

		{"near miss: --kv-cache-dtype without kvCache is the user's", vllm, false, "--kv-cache-dtype", ""},
		{"near miss: a longer flag is another flag", vllm, false, "--kv-transfer-configs", ""},
		{"near miss: a value, not a flag", vllm, false, "kv-transfer-config", ""},
		{"near miss: a single-dash flag", vllm, false, "-kv-transfer-config", ""},
		{"near miss: vLLM's keys are ordinary arguments on SGLang", sglang, false, "--kv-transfer-config", ""},
		{"near miss: SGLang's keys are ordinary arguments on vLLM", vllm, false, "--hicache-storage-backend", ""},
		{"near miss: SGLang reads no underscores", sglang, false, "--disaggregation_mode", ""},
		{"near miss: SGLang has no dotted members", sglang, false, "--disaggregation-mode.x", ""},
		{"near miss: another tensor flag", vllm, true, "--tensor-parallel-size", ""},
		{"near miss: the bare separator", vllm, false, "--", ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, owned := engine.OwnedArg(tc.engine, tc.kvCache, tc.arg)
			assert.Equal(t, tc.owned != "", owned)
			assert.Equal(t, tc.owned, got)
		})
	}
}

func TestOwnedEnv(t *testing.T) {
	cases := []struct {
		rule   string
		engine workerv1.Engine
		name   string
		owned  bool
	}{
		{"vLLM owns its config path", workerv1.EngineVLLM, "MOONCAKE_CONFIG_PATH", true},
		{"vLLM owns the bootstrap port", workerv1.EngineVLLM, "VLLM_MOONCAKE_BOOTSTRAP_PORT", true},
		{"SGLang owns the tenant", workerv1.EngineSGLang, "MOONCAKE_TENANT_ID", true},
		{"SGLang owns the master", workerv1.EngineSGLang, "MOONCAKE_MASTER", true},
		{"SGLang owns the local hostname", workerv1.EngineSGLang, "MOONCAKE_LOCAL_HOSTNAME", true},
		{"SGLang owns the config path it must not get", workerv1.EngineSGLang, "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", true},
		{"the instance variables on vLLM", workerv1.EngineVLLM, "GPUSTACK_REPLICA_LEADER_ADDRESS", true},
		{"the instance variables on SGLang", workerv1.EngineSGLang, "GPUSTACK_MEMBER_INDEX", true},
		{"the table, not a prefix: MOONCAKE_MASTER is the user's on vLLM", workerv1.EngineVLLM, "MOONCAKE_MASTER", false},
		{"MOONCAKE_CONFIG_PATH is the user's on SGLang", workerv1.EngineSGLang, "MOONCAKE_CONFIG_PATH", false},
		{"a defaulted key is not owned", workerv1.EngineVLLM, "MC_TE_METRIC", false},
		{"names are case-sensitive", workerv1.EngineSGLang, "mooncake_master", false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.owned, engine.OwnedEnvName(tc.engine, tc.name))
		})
	}
}

func TestReadDegrees(t *testing.T) {
	cases := []struct {
		rule   string
		engine workerv1.Engine
		args   []string
		want   engine.Degrees
	}{
		{"undeclared degrees are 1", workerv1.EngineVLLM, nil, engine.Degrees{TP: 1, PP: 1, DP: 1, EP: 1, PCP: 1, DCP: 1}},
		{"vLLM long and short spellings", workerv1.EngineVLLM, []string{"--tensor-parallel-size", "4", "-pp=2", "--data_parallel_size", "2"},
			engine.Degrees{TP: 4, PP: 2, DP: 2, EP: 1, PCP: 1, DCP: 1}},
		{"vLLM expert parallelism spans tensor and data ranks", workerv1.EngineVLLM, []string{"-tp", "8", "-dp", "2", "--enable-expert-parallel"},
			engine.Degrees{TP: 8, PP: 1, DP: 2, EP: 16, PCP: 1, DCP: 1}},
		{"SGLang spellings", workerv1.EngineSGLang, []string{"--tp-size", "16", "--dp", "2", "--ep-size=8"},
			engine.Degrees{TP: 16, PP: 1, DP: 2, EP: 8, PCP: 1, DCP: 1}},
		{"vLLM: an abbreviation argparse accepts", workerv1.EngineVLLM, []string{"--tensor-parallel", "4", "--pipeline_parallel=2"},
			engine.Degrees{TP: 4, PP: 2, DP: 1, EP: 1, PCP: 1, DCP: 1}},
		{"near miss: SGLang reads no underscores", workerv1.EngineSGLang, []string{"--tp_size", "4"},
			engine.Degrees{TP: 1, PP: 1, DP: 1, EP: 1, PCP: 1, DCP: 1}},
		{"a later occurrence wins", workerv1.EngineVLLM, []string{"-tp", "2", "--tensor-parallel-size=4"},
			engine.Degrees{TP: 4, PP: 1, DP: 1, EP: 1, PCP: 1, DCP: 1}},
		{"an unreadable value renders as 1", workerv1.EngineVLLM, []string{"-tp", "four"},
			engine.Degrees{TP: 1, PP: 1, DP: 1, EP: 1, PCP: 1, DCP: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, engine.ReadDegrees(tc.engine, tc.args))
		})
	}
}

func TestCachePrefix(t *testing.T) {
	cases := []struct {
		rule, digest, uid, want, err string
	}{
		{"the manifest digest's first 32 hex digits", "sha256:" + strings.Repeat("ab", 32), "u", "m-" + strings.Repeat("ab", 16), ""},
		{"no manifest digest (claim, image): SHA-256 of the UID", "", "1f1f2a3b-0000-4000-8000-000000000001", "m-" + sha256Prefix("1f1f2a3b-0000-4000-8000-000000000001"), ""},
		{"a digest that is not sha256 keeps its colon: refused", "sha512:" + strings.Repeat("ab", 64), "u", "", "CachePrefixInvalid"},
		{"an underscore is refused", "sha256:ab_cd", "u", "", "CachePrefixInvalid"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := engine.CachePrefix(tc.digest, tc.uid)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func sha256Prefix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:32]
}
