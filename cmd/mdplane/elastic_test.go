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
