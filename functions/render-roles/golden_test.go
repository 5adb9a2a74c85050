package renderroles_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/require"

	renderroles "github.com/mdplane/mdplane/functions/render-roles"
	"github.com/mdplane/mdplane/internal/pipeline"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current render")

// render renders manifest files, with testdata/cluster.yaml, the way mdplane render does.
func render(t *testing.T, files ...string) ([]byte, []string) {
	t.Helper()
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	engine, err := pipeline.NewEngine(manifests.FS, map[string]fnv1.FunctionRunnerServiceServer{
		renderroles.FunctionName: &renderroles.Function{},
	})
	require.NoError(t, err)
	var docs []schemacheck.Document
	for _, f := range append(files, "testdata/cluster.yaml") {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		more, err := schemacheck.SplitDocuments(f, data)
		require.NoError(t, err)
		docs = append(docs, more...)
	}
	out, msgs, err := engine.RenderDocuments(context.Background(), checker, docs)
	require.NoError(t, err)
	return out, msgs
}

// TestGolden renders every case under testdata/cases and compares it with testdata/golden. Run
// `go test ./functions/render-roles -run TestGolden -update` to accept a deliberate change, then read
// the diff.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/cases/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		name := strings.TrimSuffix(filepath.Base(c), ".yaml")
		t.Run(name, func(t *testing.T) {
			got, msgs := render(t, c)
			require.Empty(t, msgs)
			golden := filepath.Join("testdata", "golden", name+".yaml")
			if *update {
				require.NoError(t, os.WriteFile(golden, got, 0o644))
				return
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err, "no golden file; run with -update")
			require.Equal(t, string(want), string(got), "render differs from %s; run with -update and review the diff", golden)
		})
	}
}
