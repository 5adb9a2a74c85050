package admission_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

const cacheChain = `apiVersion: worker.gpustack.ai/v1
kind: KVCacheBackend
metadata: {name: mooncake}
spec:
  transport: {protocol: TCP}
  connection:
    managed:
      leader: {}
      members:
        - {nodeSelector: {a: b}, medium: DRAM, capacityPerMember: 8Gi}
        - {nodeSelector: {a: c}, medium: DRAM, capacityPerMember: 8Gi, transport: {protocol: SECOND}}
---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePool
metadata: {name: dram}
spec: {backends: [mooncake], quota: {total: 1Ti}}
---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: team, namespace: team-a}
spec:
  poolRef: {name: dram}
  domain: {blockSize: 16, dtype: bfloat16}
  quota: {ceiling: 1Gi}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen, namespace: team-a}
spec:
  model: {name: m}
  engine: {name: SGLang, image: i}
  kvCache: {poolRef: {name: team}}
  roles:
    - {name: server, instanceType: cpu}
---
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: cpu}
spec: {acceleratable: false, os: linux, arch: amd64, unitResources: {cpu: "8", ram: 32Gi}}
`

// judgeText judges the documents of one file as creates and returns the refusals.
func judgeText(t *testing.T, source, text string) []admission.Refusal {
	t.Helper()
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	docs, err := schemacheck.SplitDocuments(source, []byte(text))
	require.NoError(t, err)
	_, refusals, err := admission.Judge(checker, docs, nil)
	require.NoError(t, err)
	return refusals
}

// The offline judge reads the cache chain from the documents, as the webhook reads it from the API
// server: a binding to mixed group transports is refused, one transport is admitted.
func TestJudgeReadsTheCacheChainFromTheDocuments(t *testing.T) {
	judge := func(second string) []admission.Refusal {
		return judgeText(t, "chain.yaml", strings.Replace(cacheChain, "SECOND", second, 1))
	}
	refusals := judge("RDMA")
	require.Len(t, refusals, 1)
	assert.Equal(t, "spec.kvCache.poolRef.name", refusals[0].Path)
	assert.Contains(t, refusals[0].Reason, "TransportUnsupported")
	assert.Empty(t, judge("TCP"), "near miss: one transport")
}

// The offline judge runs the Binding webhook's rule: a second namespace's Binding declaring the same
// (default) domain on the pool's master is refused, as the documents would be admitted in order; one
// naming its own domain is admitted.
func TestJudgeRefusesASecondBindingOfOneDomain(t *testing.T) {
	judge := func(domain string) []admission.Refusal {
		second := "---\napiVersion: worker.gpustack.ai/v1\nkind: KVCachePoolBinding\nmetadata: {name: team, namespace: team-b}\n" +
			"spec: {poolRef: {name: dram}, domain: {" + domain + "blockSize: 16, dtype: bfloat16}, quota: {ceiling: 1Gi}}\n"
		return judgeText(t, "bindings.yaml", strings.Replace(cacheChain, "SECOND", "TCP", 1)+second)
	}
	refusals := judge("")
	require.Len(t, refusals, 1)
	assert.Equal(t, "spec.domain.name", refusals[0].Path)
	assert.Contains(t, refusals[0].Reason, `KVCachePoolBinding team-a/team (pool "dram") already declares domain "default"`)
	assert.Empty(t, judge("name: team-b, "), "near miss: a domain of its own")
}

// The offline judge runs the backend webhook's rules too: a group moved to another index is refused
// as an update of the stored backend, and an append is admitted.
func TestJudgeRunsTheBackendRules(t *testing.T) {
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	const backend = `apiVersion: worker.gpustack.ai/v1
kind: KVCacheBackend
metadata: {name: mooncake}
spec:
  connection:
    managed:
      leader: {}
      members:
GROUPS`
	docs := func(groups ...string) []schemacheck.Document {
		var lines []string
		for _, g := range groups {
			lines = append(lines, "        - {nodeSelector: {kv: "+g+"}, medium: DRAM, capacityPerMember: 8Gi}")
		}
		d, err := schemacheck.SplitDocuments("backend.yaml", []byte(strings.Replace(backend, "GROUPS", strings.Join(lines, "\n"), 1)))
		require.NoError(t, err)
		return d
	}
	_, refusals, err := admission.Judge(checker, docs("b", "a"), docs("a", "b"))
	require.NoError(t, err)
	require.NotEmpty(t, refusals)
	assert.Equal(t, "spec.connection.managed.members[0]", refusals[0].Path)
	assert.Contains(t, refusals[0].Reason, "was stored at index 1")
	_, refusals, err = admission.Judge(checker, docs("a", "b", "c"), docs("a", "b"))
	require.NoError(t, err)
	assert.Empty(t, refusals, "near miss: a group appended")
}

// The offline judge runs the artifact webhooks too: the revision is defaulted in the object as
// stored, and a claim path climbing out of its volume is refused.
func TestJudgeRunsTheArtifactWebhooks(t *testing.T) {
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	const artifacts = `apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: qwen, namespace: team-a}
spec:
  source: {modelScope: {repository: Qwen/Qwen3-8B}}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: local, namespace: team-a}
spec:
  source: {persistentVolumeClaim: {claimName: weights, path: PATH}}
`
	judge := func(path string) ([]admission.Refusal, string) {
		docs, err := schemacheck.SplitDocuments("artifacts.yaml", []byte(strings.Replace(artifacts, "PATH", path, 1)))
		require.NoError(t, err)
		objects, refusals, err := admission.Judge(checker, docs, nil)
		require.NoError(t, err)
		rev, _, _ := unstructured.NestedString(objects[0].Object, "spec", "source", "modelScope", "revision")
		return refusals, rev
	}
	refusals, rev := judge("models/../../etc")
	assert.Equal(t, "master", rev)
	require.Len(t, refusals, 1)
	assert.Equal(t, "spec.source.persistentVolumeClaim.path", refusals[0].Path)
	refusals, _ = judge("models/qwen")
	assert.Empty(t, refusals, "near miss: a path inside the volume")
}

// TestJudgeClaimsTheDomainsAsTheController: the offline judge writes on each admitted Binding the
// DomainClaimed condition mdplane-controllers would, since the render uses only a Binding holding
// its claim: True with its pool among the documents, Unknown without it; a condition the document
// carries is kept.
func TestJudgeClaimsTheDomainsAsTheController(t *testing.T) {
	judged := func(t *testing.T, text string) map[string]any {
		t.Helper()
		checker, err := schemacheck.ForPackage(manifests.FS)
		require.NoError(t, err)
		docs, err := schemacheck.SplitDocuments("claims.yaml", []byte(text))
		require.NoError(t, err)
		objects, refusals, err := admission.Judge(checker, docs, nil)
		require.NoError(t, err)
		require.Empty(t, refusals)
		for _, o := range objects {
			if o.GetKind() == "KVCachePoolBinding" {
				conditions, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
				require.Len(t, conditions, 1)
				return conditions[0].(map[string]any)
			}
		}
		t.Fatal("no Binding judged")
		return nil
	}
	binding := strings.SplitN(strings.SplitN(cacheChain, "kind: KVCachePoolBinding", 2)[1], "---", 2)[0]
	binding = "apiVersion: worker.gpustack.ai/v1\nkind: KVCachePoolBinding" + binding

	for _, row := range []struct {
		name, text, status, reason string
	}{
		{"a Binding whose pool is among the documents holds its claim", strings.Replace(cacheChain, "SECOND", "TCP", 1), "True", "Claimed"},
		{"near miss: a Binding without its pool does not know its master", binding, "Unknown", "MasterUnknown"},
		{"a condition the document carries is kept", binding + "status:\n  conditions:\n  - {type: DomainClaimed, status: \"False\", reason: DomainTaken, message: m, lastTransitionTime: \"2026-01-01T00:00:00Z\"}\n",
			"False", "DomainTaken"},
	} {
		t.Run(row.name, func(t *testing.T) {
			c := judged(t, row.text)
			assert.Equal(t, "DomainClaimed", c["type"])
			assert.Equal(t, row.status, c["status"])
			assert.Equal(t, row.reason, c["reason"])
		})
	}
}
