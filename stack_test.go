// Package mdplane_test holds the repository's own rules: its pins, layering and tracked files.
package mdplane_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/qualification"
)

// TestTheCompatibilityTableIsWhatTheTestsRun: docs/install.md's compatibility table names the
// versions the pins build and run, so a bump of a pin without the table (or the other way round)
// fails here rather than misinforming an installer.
func TestTheCompatibilityTableIsWhatTheTestsRun(t *testing.T) {
	page, err := os.ReadFile("docs/install.md")
	require.NoError(t, err)
	table, engineRows := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) == 5 && strings.HasPrefix(strings.TrimSpace(cells[2]), "v") {
			table[strings.TrimSpace(cells[1])] = strings.Fields(strings.TrimSpace(cells[2]))[0]
			engineRows[strings.TrimSpace(cells[1])] = strings.TrimSpace(cells[2])
		}
	}
	build, err := os.ReadFile("test/cluster/build.sh")
	require.NoError(t, err)
	pinned := func(variable string) string {
		m := regexp.MustCompile(`(?m)^` + variable + `=(\S+)`).FindSubmatch(build)
		require.NotNil(t, m, "build.sh pins no %s", variable)
		return string(m[1])
	}
	required := func(gomod, module string) string {
		data, err := os.ReadFile(gomod)
		require.NoError(t, err)
		mod, err := modfile.Parse(gomod, data, nil)
		require.NoError(t, err)
		for _, r := range mod.Require {
			if r.Mod.Path == module {
				return r.Mod.Version
			}
		}
		t.Fatalf("%s requires no %s", gomod, module)
		return ""
	}
	for _, row := range []struct{ component, pin string }{
		{"Kubernetes", pinned("K8S")},
		{"etcd", pinned("ETCD")},
		{"Kueue", pinned("KUEUE")},
		{"Kueue", required("go.mod", "sigs.k8s.io/kueue")},
		{"Crossplane core", pinned("CROSSPLANE")},
		{"Crossplane core", required("test/go.mod", "github.com/crossplane/crossplane/v2")},
		{"Crossplane CLI", pinned("CROSSPLANE_CLI")},
		{"function-patch-and-transform (team API example)", pinned("PATCH_AND_TRANSFORM")},
		{"containerd (the test stack's real node)", pinned("CONTAINERD")},
		{"runc", pinned("RUNC")},
		{"CNI plugins (bridge, host-local, loopback, portmap)", pinned("CNI_PLUGINS")},
		{"CoreDNS", pinned("COREDNS")},
		{"llm-d-inference-sim (the engine stand-in)", pinned("INFERENCE_SIM")},
		{"Prometheus Operator API (monitors)", required("test/monitoring/go.mod", "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring")},
	} {
		assert.Equal(t, row.pin, table[row.component], "docs/install.md, Compatibility: %s", row.component)
	}
	assert.Equal(t, "v0"+strings.TrimPrefix(pinned("K8S"), "v1"), required("go.mod", "k8s.io/api"), "the Kubernetes libraries are the tested release's")

	// The engines' rows: the examples run them, and the qualification probe reads their answers.
	for _, row := range []struct {
		component, image string
		engine           workerv1.Engine
	}{
		{"vLLM", "vllm/vllm-openai", workerv1.EngineVLLM},
		{"SGLang", "lmsysorg/sglang", workerv1.EngineSGLang},
	} {
		for _, tag := range exampleTags(t, row.image) {
			assert.Contains(t, engineRows[row.component], tag, "docs/install.md, Compatibility: the examples run %s:%s", row.image, tag)
			assert.Contains(t, qualification.ProbedVersions(row.engine), strings.TrimPrefix(tag, "v"), "the qualification probe reads no %s %s", row.component, tag)
		}
	}
}

// exampleTags are the tags of image the examples run, each once.
func exampleTags(t *testing.T, image string) []string {
	t.Helper()
	files, err := filepath.Glob("examples/*.yaml")
	require.NoError(t, err)
	seen := map[string]bool{}
	var tags []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, m := range regexp.MustCompile(regexp.QuoteMeta(image)+`:(v[0-9][^\s"',}]*)`).FindAllSubmatch(data, -1) {
			if tag := string(m[1]); !seen[tag] {
				seen[tag], tags = true, append(tags, tag)
			}
		}
	}
	require.NotEmpty(t, tags, "no example runs %s", image)
	return tags
}

// TestNoReplaceDirectives: go.mod replaces nothing; a replace directive is ignored by modules that
// depend on this one, so what they build would differ from what this repository tests.
func TestNoReplaceDirectives(t *testing.T) {
	data, err := os.ReadFile("go.mod")
	require.NoError(t, err)
	mod, err := modfile.Parse("go.mod", data, nil)
	require.NoError(t, err)
	for _, r := range mod.Replace {
		t.Errorf("go.mod replaces %s: a replace directive is ignored by modules that depend on this one", r.Old.Path)
	}
}
