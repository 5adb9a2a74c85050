package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runCLI(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestVersion(t *testing.T) {
	code, out, _ := runCLI("version")
	assert.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "mdplane "), out)
}

func TestSchemaCheckPassesTheExamples(t *testing.T) {
	code, out, errOut := runCLI("schema-check", "-f", "../../examples")
	assert.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "ok   ../../examples/qwen-chat.yaml#1 ModelDeployment team-a/qwen-chat")
	assert.Contains(t, out, "skip ../../examples/cluster.yaml#1 Namespace team-a: not an mdplane kind")
	assert.Contains(t, out, "21 objects checked, 0 violations")
}

func TestSchemaCheckPrintsEveryViolationAndExits1(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	writeFile(t, bad, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen-chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: ""}
  roles:
    - {name: server, instanceType: a10g, replicas: 1025, template: {}}
`)
	code, out, errOut := runCLI("schema-check", "-f", bad)
	assert.Equal(t, 1, code)
	assert.Empty(t, errOut, "violations go to stdout, once")
	assert.Contains(t, out, "FAIL "+bad+"#1 ModelDeployment team-a/qwen-chat: spec.roles[0].template: unknown field \"spec.roles[0].template\"")
	assert.Contains(t, out, "spec.engine.image: Invalid value: \"\": spec.engine.image in body should be at least 1 chars long")
	assert.Contains(t, out, "spec.roles[0].replicas: Invalid value: 1025")
	assert.Contains(t, out, "1 objects checked, 3 violations")
}

func TestSchemaCheckJudgesAnUpdateAgainstTheStoredObject(t *testing.T) {
	dir := t.TempDir()
	stored := `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen-chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: a10g}
`
	writeFile(t, filepath.Join(dir, "stored.yaml"), stored)
	writeFile(t, filepath.Join(dir, "edited.yaml"), strings.Replace(stored, "name: vLLM", "name: SGLang", 1))
	code, out, _ := runCLI("schema-check", "-f", filepath.Join(dir, "edited.yaml"), "--old", filepath.Join(dir, "stored.yaml"))
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "spec.engine: Invalid value: spec.engine.name is frozen: a different engine describes a different deployment, which is created rather than edited")
}

func TestSchemaCheckErrors(t *testing.T) {
	code, _, errOut := runCLI("schema-check", "-f", "does-not-exist.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "does-not-exist.yaml")

	code, _, errOut = runCLI("schema-check")
	assert.Equal(t, 2, code, "a missing -f is a usage error")
	assert.Contains(t, errOut, "--filename")
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRenderTheExamples(t *testing.T) {
	code, out, errOut := runCLI("render", "-f", "../../examples")
	assert.Equal(t, 0, code, errOut)
	for _, want := range []string{
		"kind: ModelRole",
		"kind: ModelReplica",
		"kind: ControllerRevision",
		"name: deepseek-server-r1-m1", // a member of a size-2 replica
		"generateName: qwen-chat-server-",
		"endpoint: http://qwen-chat.team-a.svc:8000",
	} {
		assert.Contains(t, out, want)
	}
	again, out2, _ := runCLI("render", "-f", "../../examples")
	assert.Equal(t, 0, again)
	assert.Equal(t, out, out2, "the output order is stable")
}

// TestRenderPrintsThePriorityClass: the Kueue priority class a deployment is labelled with is on
// every Pod and Pod template render prints, as its queue name is; without the label, on none.
func TestRenderPrintsThePriorityClass(t *testing.T) {
	dir := t.TempDir()
	cluster, err := os.ReadFile("../../examples/cluster.yaml")
	require.NoError(t, err)
	md, err := os.ReadFile("../../examples/qwen-chat.yaml")
	require.NoError(t, err)
	labelled := strings.Replace(string(md), "  namespace: team-a\n", "  namespace: team-a\n  labels: {kueue.x-k8s.io/priority-class: serving-high}\n", 1)
	require.NotEqual(t, string(md), labelled)
	writeFile(t, filepath.Join(dir, "cluster.yaml"), string(cluster))
	writeFile(t, filepath.Join(dir, "md.yaml"), labelled)
	code, out, errOut := runCLI("render", "-f", dir)
	require.Equal(t, 0, code, errOut)
	queued := strings.Count(out, "kueue.x-k8s.io/queue-name:")
	assert.Positive(t, queued)
	assert.Equal(t, queued, strings.Count(out, "kueue.x-k8s.io/priority-class: serving-high"), "every queued Pod and template carries the priority class")

	writeFile(t, filepath.Join(dir, "md.yaml"), string(md))
	code, out, errOut = runCLI("render", "-f", dir)
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "kueue.x-k8s.io/priority-class", "near miss: without the label")
}

func TestRenderRefusals(t *testing.T) {
	dir := t.TempDir()
	md := `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen-chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: missing-type}
`
	writeFile(t, filepath.Join(dir, "md.yaml"), md)
	code, out, errOut := runCLI("render", "-f", filepath.Join(dir, "md.yaml"))
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, `error: spec.roles[0].instanceType: Invalid value: "missing-type": InstanceType "missing-type" does not exist`)

	writeFile(t, filepath.Join(dir, "md.yaml"), strings.Replace(md, "instanceType: missing-type}", "instanceType: missing-type, template: {}}", 1))
	code, _, errOut = runCLI("render", "-f", filepath.Join(dir, "md.yaml"))
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, `error: spec.roles[0].template: unknown field "spec.roles[0].template" (ModelDeployment team-a/qwen-chat, `+filepath.Join(dir, "md.yaml")+`#1)`)
}

func TestValidate(t *testing.T) {
	code, out, errOut := runCLI("validate", "-f", "../../examples")
	assert.Equal(t, 0, code, errOut)
	assert.Empty(t, out+errOut, "silent when admitted")

	dir := t.TempDir()
	md := `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen-chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 64}, env: [{name: GPUSTACK_REPLICA_SIZE, value: "2"}]}
`
	writeFile(t, filepath.Join(dir, "md.yaml"), md)
	code, out, errOut = runCLI("validate", "-f", filepath.Join(dir, "md.yaml"), "-f", "../../examples/cluster.yaml")
	assert.Equal(t, 1, code)
	assert.Empty(t, out)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	assert.Len(t, lines, 2, errOut)
	assert.Contains(t, errOut, `error: spec.roles[0].env[0].name: Invalid value: "GPUSTACK_REPLICA_SIZE": GPUSTACK_REPLICA_SIZE is owned by mdplane on vLLM`)
	assert.Contains(t, errOut, `error: spec.roles[0].resources.accelerator: Invalid value: 64: InstanceType "gpustack-nvidia-a10g-linux-amd64" has 8 whole accelerators in all`)

	code, _, errOut = runCLI("render", "-f", filepath.Join(dir, "md.yaml"), "-f", "../../examples/cluster.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "GPUSTACK_REPLICA_SIZE is owned by mdplane on vLLM", "render refuses with the same messages")

	stored := strings.Replace(md, "accelerator: 64}, env: [{name: GPUSTACK_REPLICA_SIZE, value: \"2\"}]", "accelerator: 2}", 1)
	writeFile(t, filepath.Join(dir, "stored.yaml"), stored)
	writeFile(t, filepath.Join(dir, "edited.yaml"), strings.Replace(stored, "vLLM", "SGLang", 1))
	code, _, errOut = runCLI("validate", "-f", filepath.Join(dir, "edited.yaml"), "--old", filepath.Join(dir, "stored.yaml"), "-f", "../../examples/cluster.yaml")
	assert.Equal(t, 1, code)
	assert.Contains(t, errOut, "spec.engine.name is frozen", "--old judges an update")
}
