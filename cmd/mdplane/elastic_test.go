package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestOnARoleCarryingElasticEpSizeInstanceTypeResourcesAndCommandAreFrozen: offline, as on the
// cluster, an identical update and a width increase of an Elastic EP role are admitted and a size
// edit is refused with the rule's message. Manifests are read with whole numbers as integers, as the
// API server reads them: read as floats, every update failed the rule with a CEL evaluation error.
func TestOnARoleCarryingElasticEpSizeInstanceTypeResourcesAndCommandAreFrozen(t *testing.T) {
	stored, err := os.ReadFile("../../examples/elastic-ep.yaml")
	assert.NoError(t, err)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "stored.yaml"), string(stored))
	cases := []struct {
		rule, edited, refusal string
	}{
		{"an identical update is admitted", string(stored), ""},
		{"a width increase is admitted", strings.Replace(string(stored), "width: 3", "width: 4", 1), ""},
		{"the count written as a string is no edit of resources", strings.Replace(string(stored), "accelerator: 2", `accelerator: "2"`, 1), ""},
		{"a size edit is refused with the rule's message", strings.Replace(string(stored), "      instanceType:", "      size: 2\n      instanceType:", 1),
			"on a role carrying elasticEp, size, instanceType, resources and command are frozen"},
		{"an instanceType edit is refused with the rule's message", strings.Replace(string(stored), "gpustack-nvidia-h20-linux-amd64", "gpustack-nvidia-a10g-linux-amd64", 1),
			"on a role carrying elasticEp, size, instanceType, resources and command are frozen"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			edited := filepath.Join(dir, "edited.yaml")
			writeFile(t, edited, c.edited)
			for _, cmd := range []string{"schema-check", "validate"} {
				args := []string{cmd, "-f", edited, "--old", filepath.Join(dir, "stored.yaml")}
				if cmd == "validate" {
					args = append(args, "-f", "../../examples/cluster.yaml")
				}
				code, out, errOut := runCLI(args...)
				assert.NotContains(t, out+errOut, "evaluating rule", cmd)
				if c.refusal == "" {
					assert.Equal(t, 0, code, "%s: %s", cmd, out+errOut)
					continue
				}
				assert.Equal(t, 1, code, cmd)
				assert.Contains(t, out+errOut, c.refusal, cmd)
			}
		})
	}
}

// TestAnElasticRoleWithoutACardCountIsJudgedAsTheClusterStoresIt: offline, as on the cluster, an
// Elastic EP role that names no card count is given one card per tensor-parallel rank before the
// rules read it, on a create and on the stored version of an update, and renders as if it had
// named them; a count that differs from the tensor-parallel size is still refused.
func TestAnElasticRoleWithoutACardCountIsJudgedAsTheClusterStoresIt(t *testing.T) {
	example, err := os.ReadFile("../../examples/elastic-ep.yaml")
	assert.NoError(t, err)
	omitted := strings.Replace(string(example), "      resources:\n        accelerator: 2\n", "", 1)
	assert.NotEqual(t, string(example), omitted)
	dir := t.TempDir()
	for name, text := range map[string]string{
		"omitted.yaml": omitted,
		"one.yaml":     strings.Replace(string(example), "accelerator: 2", "accelerator: 1", 1),
		"grown.yaml":   strings.Replace(omitted, "width: 3", "width: 4", 1),
	} {
		writeFile(t, filepath.Join(dir, name), text)
	}
	const cluster = "../../examples/cluster.yaml"
	cases := []struct {
		rule    string
		args    []string
		refusal string
	}{
		{"a create that names no count is admitted", []string{"validate", "-f", filepath.Join(dir, "omitted.yaml")}, ""},
		{"an update of a stored version that named none is admitted", []string{"validate", "-f", filepath.Join(dir, "grown.yaml"), "--old", filepath.Join(dir, "omitted.yaml")}, ""},
		{"a count other than the tensor-parallel size is refused", []string{"validate", "-f", filepath.Join(dir, "one.yaml")}, "its tensor-parallel size is 2, so request accelerator: 2"},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			code, out, errOut := runCLI(append(c.args, "-f", cluster)...)
			if c.refusal == "" {
				assert.Equal(t, 0, code, out+errOut)
				return
			}
			assert.Equal(t, 1, code)
			assert.Contains(t, errOut, c.refusal)
		})
	}
	t.Run("it renders as the role that names its cards", func(t *testing.T) {
		code, defaulted, errOut := runCLI("render", "-f", filepath.Join(dir, "omitted.yaml"), "-f", cluster)
		assert.Equal(t, 0, code, errOut)
		_, named, _ := runCLI("render", "-f", "../../examples/elastic-ep.yaml", "-f", cluster)
		assert.Equal(t, named, defaulted)
	})
}
