package renderroles

import (
	"fmt"
	"testing"

	"github.com/mdplane/mdplane/internal/fuzzing"
)

// TestSeedCorpus keeps the fuzz targets' seed corpora (testdata/fuzz) to the sources they are made
// from: every ModelDeployment document of the examples and golden cases.
func TestSeedCorpus(t *testing.T) {
	w := loadWorld(t)
	c := fuzzing.Corpus{}
	for _, s := range w.Seeds {
		c[s.Name] = fuzzing.CorpusFile(s.YAML)
	}
	c.Check(t, "FuzzDeploymentFromYAML")

	values := map[editScope][]string{
		scopeRole:         {"--max-model-len=4096", "2", "60", "32Gi", "kubernetes.io/hostname", "vllm serve /models/x"},
		scopeDeployment:   {"registry.example.com/vllm/vllm-openai:v0.26.0", "Qwen/Qwen3-8B"},
		scopeNone:         {"3", "0", "7"},
		scopeInstanceType: {"gpustack-fnv64-0123456789abcdef", "ascend", "amd"},
	}
	hash := fuzzing.Corpus{}
	for i, e := range hashEdits {
		for k, v := range values[e.scope] {
			hash[fmt.Sprintf("edit-%02d-%d", i, k)] = fuzzing.CorpusFile(byte(i*7+k*11), byte(k), byte(i), v)
		}
	}
	hash.Check(t, "FuzzPodSpecHash")
}
