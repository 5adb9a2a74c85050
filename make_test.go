package mdplane_test

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// TestMakeRenderPrintsOnlyTheObjects holds the README's first command to its promise: `make render >
// out.yaml` is a file of objects, with nothing of make's own on standard output.
func TestMakeRenderPrintsOnlyTheObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("runs make and compiles the CLI: run without -short, as make test does")
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command("make", "--no-print-directory", "render")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), stderr.String())
	docs := strings.Split(strings.TrimPrefix(stdout.String(), "---\n"), "\n---\n")
	require.NotEmpty(t, docs)
	for i, doc := range docs {
		var obj struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &obj), "document %d", i)
		assert.NotEmpty(t, obj.APIVersion, "document %d has no apiVersion:\n%s", i, doc)
		assert.NotEmpty(t, obj.Kind, "document %d has no kind:\n%s", i, doc)
	}
}

// TestMakeHelpListsTheREADMECommands keeps `make help` covering the two commands the README starts
// with.
func TestMakeHelpListsTheREADMECommands(t *testing.T) {
	out, err := exec.Command("make", "--no-print-directory", "help").CombinedOutput()
	require.NoError(t, err, string(out))
	for _, target := range []string{"render:", "test:", "test-unit:", "lint:"} {
		assert.Contains(t, string(out), target)
	}
}
