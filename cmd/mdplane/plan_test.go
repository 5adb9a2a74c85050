package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/internal/plan"
)

const (
	planStored  = "testdata/plan/stored.yaml"
	planEdited  = "testdata/plan/edited.yaml"
	planRefused = "testdata/plan/refused.yaml"
	planCluster = "../../examples/cluster.yaml"
)

func TestPlanOfflineTellsTheRollout(t *testing.T) {
	code, out, errOut := runCLI("plan", "-f", planEdited, "--old", planStored, "--old", planCluster)
	require.Equal(t, 0, code, out+errOut)
	for _, line := range []string{
		"ModelDeployment team-a/qwen-chat: admitted; cadence admission (offline: every stored replica taken as admitted and Ready)",
		"role server (Server): rolls",
		"  why:       spec.engine.image: vllm/vllm-openai:v0.25.1 → vllm/vllm-openai:v0.26.0",
		`  why:       spec.roles[0].extraArgs: (none) → ["--max-model-len","32768"]`,
		"  replicas:  4 → 4",
		"  order:     r3, r2, r1, r0",
		"  quota:     one replica needs cpu=16, ephemeral-storage=15Gi, memory=64Gi, nvidia.com/gpu=2; free: unknown offline",
		"  step 1:    replace r3; serving ≥ 3 (3 if every earlier replacement is Ready)",
		"  step 4:    replace r0; serving ≥ 0 (3 if every earlier replacement is Ready); first waits: replica r1's replacement waits for admission before the next replica leaves",
		"  pod:       image vllm/vllm-openai:v0.25.1 → vllm/vllm-openai:v0.26.0",
		"  pod:       arg + --max-model-len 32768",
		"  pod:       env + VLLM_LOGGING_LEVEL=DEBUG",
		"warning: role server: each of the 4 departing replicas costs its siblings the cache blocks it held (leased for the 30s kv_lease_duration window, then lost)",
	} {
		assert.Contains(t, out, line+"\n")
	}
}

func TestPlanOfflineJSON(t *testing.T) {
	code, out, errOut := runCLI("plan", "-f", planEdited, "-f", planCluster, "--old", planStored, "-o", "json")
	require.Equal(t, 0, code, out+errOut)
	var p plan.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.True(t, p.Admitted)
	assert.True(t, p.Offline)
	require.Len(t, p.Roles, 1)
	assert.Equal(t, plan.ActionRolls, p.Roles[0].Action)
	assert.Equal(t, []int32{3, 2, 1, 0}, p.Roles[0].Order)
	assert.Nil(t, p.Roles[0].Quota.WaitsForCapacity, "quota is unknown offline")
	assert.Contains(t, out, `"leaving": [],`, "empty lists are lists, not null")
	assert.Equal(t, &plan.Change{From: "vllm/vllm-openai:v0.25.1", To: "vllm/vllm-openai:v0.26.0"}, p.Roles[0].PodChanges.Image)
}

func TestPlanRefusedEditExits1(t *testing.T) {
	code, out, errOut := runCLI("plan", "-f", planRefused, "--old", planStored, "--old", planCluster)
	assert.Equal(t, 1, code, out+errOut)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "error: spec.engine: Invalid value: spec.engine.name is frozen")

	code, out, _ = runCLI("plan", "-f", planRefused, "--old", planStored, "--old", planCluster, "-o", "json")
	assert.Equal(t, 1, code)
	var p plan.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	assert.False(t, p.Admitted)
	assert.NotEmpty(t, p.Refusals)
}

func TestPlanUsageErrors(t *testing.T) {
	code, _, errOut := runCLI("plan")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--filename")
	code, _, _ = runCLI("plan", "-f", planEdited, "--old", planStored, "-o", "yaml")
	assert.Equal(t, 2, code)
}
