package admission_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// The offline judge reads the cache chain from the documents, as the webhook reads it from the API
// server: a binding to mixed group transports is refused, one transport is admitted.
func TestJudgeReadsTheCacheChainFromTheDocuments(t *testing.T) {
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	judge := func(second string) []admission.Refusal {
		docs, err := schemacheck.SplitDocuments("chain.yaml", []byte(strings.Replace(cacheChain, "SECOND", second, 1)))
		require.NoError(t, err)
		_, refusals, err := admission.Judge(checker, docs, nil)
		require.NoError(t, err)
		return refusals
	}
	refusals := judge("RDMA")
	require.Len(t, refusals, 1)
	assert.Equal(t, "spec.kvCache.poolRef.name", refusals[0].Path)
	assert.Contains(t, refusals[0].Reason, "TransportUnsupported")
	assert.Empty(t, judge("TCP"), "near miss: one transport")
}
