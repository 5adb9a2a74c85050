package admission_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

const privilegedDeployment = `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen, namespace: team-a}
spec:
  model: {name: m}
  engine: {name: SGLang, image: i}
  roles:
    - {name: server, instanceType: cpu, privileged: true}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: cpu}
spec: {acceleratable: false, os: linux, arch: amd64, unitResources: {cpu: "8", ram: 32Gi}}
`

// The offline judge reads the Settings from the mdplane-settings EnvironmentConfig among the
// documents, as the webhook reads them from the API server: absent is the defaults, a bad value is a
// refusal of that document, and a second one is refused.
func TestJudgeReadsTheSettingsFromTheDocuments(t *testing.T) {
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	judge := func(extra string) []admission.Refusal {
		docs, err := schemacheck.SplitDocuments("md.yaml", []byte(privilegedDeployment+extra))
		require.NoError(t, err)
		_, refusals, err := admission.Judge(checker, docs, nil)
		require.NoError(t, err)
		return refusals
	}
	settings := func(data string) string {
		return "---\napiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata: {name: mdplane-settings}\ndata: " + data + "\n"
	}

	refusals := judge("")
	require.Len(t, refusals, 1)
	assert.Equal(t, "spec.roles[0].privileged", refusals[0].Path)
	assert.Contains(t, refusals[0].Reason, "instance-privileged-allowed is false")

	assert.Empty(t, judge(settings(`{instance-privileged-allowed: "true"}`)))
	assert.Empty(t, judge(settings(`{instance-privileged-allowed: true}`)), "a JSON boolean")

	refusals = judge(settings(`{instance-privileged-allowed: "true", model-artifact-revalidate-interval: 30s}`))
	require.Len(t, refusals, 1)
	assert.Equal(t, "data[model-artifact-revalidate-interval]", refusals[0].Path)
	assert.Contains(t, refusals[0].String(), "out of range; write a duration between 1m and 365d")
	assert.Contains(t, refusals[0].String(), "EnvironmentConfig mdplane-settings, md.yaml#3")

	refusals = judge(settings(`{}`) + settings(`{}`))
	require.Len(t, refusals, 1)
	assert.Contains(t, refusals[0].Reason, "a second EnvironmentConfig mdplane-settings")

	// Near miss: another EnvironmentConfig is not mdplane's.
	refusals = judge("---\napiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata: {name: other}\ndata: {instance-privileged-allowed: \"true\"}\n")
	require.Len(t, refusals, 1)
	assert.Equal(t, "spec.roles[0].privileged", refusals[0].Path)
}

// A key mdplane does not read is a warning with its source, never a refusal.
func TestSettingsWarningsNameTheUnknownKey(t *testing.T) {
	docs, err := schemacheck.SplitDocuments("s.yaml", []byte(
		"apiVersion: apiextensions.crossplane.io/v1beta1\nkind: EnvironmentConfig\nmetadata: {name: mdplane-settings}\ndata: {container-registri: r.local}\n"))
	require.NoError(t, err)
	w := admission.SettingsWarnings(docs)
	require.Len(t, w, 1)
	assert.Contains(t, w[0], `"container-registri" is not a Setting mdplane reads`)
	assert.Contains(t, w[0], "(EnvironmentConfig mdplane-settings, s.yaml#1)")
}
