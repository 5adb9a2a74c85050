package generate_test

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
	"github.com/mdplane/mdplane/internal/generate"
)

const root = "../.."

// TestCommittedOutputMatchesAFreshGeneration fails when a type changed without `make generate`, or a
// generated file was edited by hand.
func TestCommittedOutputMatchesAFreshGeneration(t *testing.T) {
	files, err := generate.Generate(root)
	require.NoError(t, err)

	for _, path := range files.Paths() {
		committed, err := os.ReadFile(filepath.Join(root, path))
		if !assert.NoError(t, err, "%s is generated but not committed; run make generate", path) {
			continue
		}
		if line, want, got := firstDifference(files[path], committed); line > 0 {
			t.Errorf("%s differs from a fresh generation at line %d (generated %q, committed %q); run make generate", path, line, want, got)
		}
	}

	var onDisk []string
	for _, dir := range []string{generate.CRDDir, generate.XRDDir, generate.CompositionDir, "apis"} {
		require.NoError(t, filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			rel = filepath.ToSlash(rel)
			if !strings.HasPrefix(rel, "apis/") || d.Name() == generate.DeepCopyFile {
				onDisk = append(onDisk, rel)
			}
			return nil
		}))
	}
	for _, path := range onDisk {
		assert.Contains(t, files, path, "%s is no longer generated; run make generate to remove it", path)
	}
}

func TestEveryCompositeHasAnXRDAndAComposition(t *testing.T) {
	files, err := generate.Generate(root)
	require.NoError(t, err)
	for _, name := range []string{
		"worker.gpustack.ai_modeldeployments.yaml",
	} {
		assert.Contains(t, files, generate.XRDDir+"/"+name)
		assert.Contains(t, files, generate.CompositionDir+"/"+name)
		assert.NotContains(t, files, generate.CRDDir+"/"+name, "a composite is served through its XRD, never a CRD of its own")
	}
	for _, plain := range []string{"internal.mdplane.io_modelroles.yaml", "internal.mdplane.io_modelreplicas.yaml"} {
		assert.Contains(t, files, generate.CRDDir+"/"+plain, "ModelRoles and ModelReplicas are plain CRDs: mdplane's controllers reconcile them, nothing composes through them")
		assert.NotContains(t, files, generate.XRDDir+"/"+plain)
		assert.NotContains(t, files, generate.CompositionDir+"/"+plain)
	}
	md := string(files[generate.CompositionDir+"/worker.gpustack.ai_modeldeployments.yaml"])
	assert.Less(t, strings.Index(md, "step: render-roles"), strings.Index(md, "step: kv-cache"),
		"a ModelDeployment renders its roles before the kv-cache step amends them")
}

// TestReferencePageFollowsTheSchemas: the page lists ModelDeployment first, the other user-facing
// kinds alphabetically, then the internal kinds without their fields, and a field's row states its
// type, whether it is required and the validation its schema declares.
func TestReferencePageFollowsTheSchemas(t *testing.T) {
	files, err := generate.Generate(root)
	require.NoError(t, err)
	page := string(files[generate.ReferencePage])
	require.NotEmpty(t, page)

	at := -1
	for _, heading := range []string{
		"## ModelDeployment\n", "## InstanceType\n", "## KVCacheBackend\n", "## KVCachePool\n",
		"## KVCachePoolBinding\n", "## ModelArtifact\n", "## Internal kinds\n", "### ModelReplica\n", "### ModelRole\n",
	} {
		i := strings.Index(page, "\n"+heading)
		if assert.Greater(t, i, at, "%q is missing or out of order", heading) {
			at = i
		}
	}
	_, internal, _ := strings.Cut(page, "\n## Internal kinds\n")
	assert.NotContains(t, internal, "| `", "the internal kinds are listed without their fields")

	rows := map[string]string{}
	for _, line := range strings.Split(page, "\n") {
		if cells := strings.Split(line, " | "); len(cells) == 4 && strings.HasPrefix(line, "| `") {
			rows[strings.Trim(cells[0], "| `")] = line
		}
	}
	replicas := rows["spec.roles[].replicas"]
	assert.True(t, strings.HasPrefix(replicas, "| `spec.roles[].replicas` | integer |  | "), replicas)
	assert.True(t, strings.HasSuffix(replicas, " (default `1`; 1–1024) |"), replicas)
	assert.True(t, strings.HasPrefix(rows["spec.engine.name"], "| `spec.engine.name` | string | yes | "), rows["spec.engine.name"])
	assert.Contains(t, rows["status.domains[].hitRate"], `pattern `+"`"+`^(0(\.[0-9]{1,4})?\|1(\.0{1,4})?)$`+"`", "a | in a cell is escaped")
	assert.NotContains(t, rows, "status.conditions[].type", "conditions are the standard type, not walked")
	assert.NotContains(t, rows, "metadata")
}

// TestEveryFieldIsDocumented: descriptions are what kubectl explain prints, so a field without one is
// a field users cannot look up.
func TestEveryFieldIsDocumented(t *testing.T) {
	files, err := generate.Generate(root)
	require.NoError(t, err)
	for _, path := range files.Paths() {
		if !strings.HasPrefix(path, generate.CRDDir) && !strings.HasPrefix(path, generate.XRDDir) {
			continue
		}
		var doc struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema schemaNode `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		require.NoError(t, yaml.Unmarshal(files[path], &doc), path)
		for _, v := range doc.Spec.Versions {
			for _, field := range undocumented("", v.Schema.OpenAPIV3Schema) {
				t.Errorf("%s: %s has no description", path, field)
			}
		}
	}
}

type schemaNode struct {
	Description string                `json:"description"`
	Properties  map[string]schemaNode `json:"properties"`
	Items       *schemaNode           `json:"items"`
}

func undocumented(path string, n schemaNode) []string {
	var out []string
	for name, p := range n.Properties {
		child := path + "." + name
		metadata := path == "" && (name == "apiVersion" || name == "kind" || name == "metadata")
		if p.Description == "" && !metadata {
			out = append(out, child)
		}
		out = append(out, undocumented(child, p)...)
	}
	if n.Items != nil {
		out = append(out, undocumented(path+"[]", *n.Items)...)
	}
	return out
}

// firstDifference returns the first line, counted from 1, where two files differ, and that line of
// each; 0 when they are equal.
func firstDifference(want, got []byte) (int, string, string) {
	if bytes.Equal(want, got) {
		return 0, "", ""
	}
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; ; i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl || i >= len(w) || i >= len(g) {
			return i + 1, wl, gl
		}
	}
}

// TestCompositionsCallTheFunctionsByTheirNames: the generator spells the Function names out (it must
// build before the API packages do), so this holds them to the functions' own.
func TestCompositionsCallTheFunctionsByTheirNames(t *testing.T) {
	assert.Equal(t, renderroles.FunctionName, generate.FunctionRenderRoles)
	assert.Equal(t, kvcache.FunctionName, generate.FunctionKVCache)
}
