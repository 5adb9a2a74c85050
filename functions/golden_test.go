package functions_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/functions"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current render")

// render renders manifest files, with testdata/cluster.yaml, the way mdplane render does.
func render(t *testing.T, files ...string) ([]byte, []string) {
	t.Helper()
	return renderFiles(t, append(files, "testdata/cluster.yaml")...)
}

// renderFiles renders exactly the given manifest files.
func renderFiles(t *testing.T, files ...string) ([]byte, []string) {
	t.Helper()
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	engine, err := functions.Engine()
	require.NoError(t, err)
	var docs []schemacheck.Document
	for _, f := range files {
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
// `go test ./functions -run TestGolden -update` to accept a deliberate change, then read
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

// TestPoolEndpointMovesConfigAndHash: the pool's published endpoint is part of a cached role's
// client configuration and of its configuration digest, so moving it rolls the replicas.
func TestPoolEndpointMovesConfigAndHash(t *testing.T) {
	before, msgs := render(t, "testdata/cases/vllm-store-server.yaml")
	require.Empty(t, msgs)
	cluster, err := os.ReadFile("testdata/cluster.yaml")
	require.NoError(t, err)
	moved := filepath.Join(t.TempDir(), "cluster.yaml")
	require.NoError(t, os.WriteFile(moved, []byte(strings.Replace(string(cluster),
		"mooncake-master.gpustack-system.svc:50051", "mooncake-master-2.gpustack-system.svc:50051", 1)), 0o600))
	after, msgs := renderFiles(t, "testdata/cases/vllm-store-server.yaml", moved)
	require.Empty(t, msgs)

	pod := func(out []byte) map[string]string {
		for _, doc := range strings.Split(string(out), "\n---\n") {
			if strings.Contains(doc, "\nkind: Pod\n") {
				m := struct {
					Metadata struct{ Annotations map[string]string }
				}{}
				require.NoError(t, yaml.Unmarshal([]byte(doc), &m))
				return m.Metadata.Annotations
			}
		}
		t.Fatal("no Pod rendered")
		return nil
	}
	b, a := pod(before), pod(after)
	assert.Contains(t, b["kvcache.gpustack.ai/client-config"], "mooncake-master.gpustack-system.svc:50051")
	assert.Contains(t, a["kvcache.gpustack.ai/client-config"], "mooncake-master-2.gpustack-system.svc:50051")
	assert.NotEqual(t, b["modeldeployment.gpustack.ai/pod-spec-hash"], a["modeldeployment.gpustack.ai/pod-spec-hash"])
}

// TestAMissingBindingIsReportedNotARenderFailure: a poolRef naming no Binding renders the roles
// without a cache client and says why on DomainRegistered (docs/decisions/0022-missing-binding.md);
// beside it, a Binding naming a missing pool still fails the render.
func TestAMissingBindingIsReportedNotARenderFailure(t *testing.T) {
	const deployment = `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: store, namespace: team-a}
spec:
  model: {name: Qwen/Qwen2.5-7B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  kvCache: {poolRef: {name: nobody}}
  roles:
    - {name: server, instanceType: a10g}
`
	write := func(t *testing.T, content string) string {
		f := filepath.Join(t.TempDir(), "md.yaml")
		require.NoError(t, os.WriteFile(f, []byte(content), 0o600))
		return f
	}
	t.Run("a missing Binding renders Pods without a client and reports BindingNotFound", func(t *testing.T) {
		out, msgs := render(t, write(t, deployment))
		require.Empty(t, msgs)
		assert.Contains(t, string(out), "reason: BindingNotFound")
		assert.Contains(t, string(out), "kind: Pod")
		assert.NotContains(t, string(out), "kvcache.gpustack.ai/client-config")
	})
	t.Run("a Binding naming a missing pool is still a render failure", func(t *testing.T) {
		_, msgs := render(t, write(t, deployment+`---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: nobody, namespace: team-a}
spec:
  poolRef: {name: no-pool}
  domain: {name: chat, blockSize: 16, dtype: bfloat16}
  quota: {ceiling: 128Gi}
`))
		require.Len(t, msgs, 1)
		assert.Contains(t, msgs[0], "KVCachePoolBinding team-a/nobody names KVCachePool no-pool, which does not exist")
	})
}
