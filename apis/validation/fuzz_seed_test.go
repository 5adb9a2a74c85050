package validation_test

import (
	"fmt"
	"testing"

	"github.com/mdplane/mdplane/internal/fuzzing"
)

// TestSeedCorpus keeps FuzzUpdateRules' seed corpus (testdata/fuzz) to the examples and golden
// cases: every stored seed updated by each of a few edits of the fields the update rules read.
func TestSeedCorpus(t *testing.T) {
	edits := []struct{ path, value string }{
		{"spec.roles[0].replicas", "3"},
		{"spec.roles[0].extraArgs[0]", "--max-model-len=4096"},
		{"spec.roles[0].extraArgs", "[--port, '9000']"},
		{"spec.roles[0].name", "renamed"},
		{"spec.roles[0].instanceType", "h100"},
		{"spec.roles[0].command", "[vllm, serve, m]"},
		{"spec.roles[0].resources", "{accelerator: 2, interface: 1}"},
		{"spec.roles[1]", "{name: extra, instanceType: a10g}"},
		{"spec.engine.image", "vllm/vllm-openai:v0.26.0"},
		{"spec.kvCache", "{poolRef: {name: team-dram}}"},
		{"spec.kvTransfer", "{protocol: RDMA}"},
		{"spec.router", "{name: llm-d-router}"},
		{"metadata.finalizers", "[example.com/hold]"},
	}
	c := fuzzing.Corpus{}
	for i := range updateBases() {
		c[fmt.Sprintf("base-%02d-same", i)] = fuzzing.CorpusFile(byte(i), "", []byte(nil), "metadata.name", []byte("same"))
		e := edits[i%len(edits)]
		c[fmt.Sprintf("base-%02d-edit", i)] = fuzzing.CorpusFile(byte(i), "", []byte(nil), e.path, []byte(e.value))
		e2 := edits[(i+5)%len(edits)]
		c[fmt.Sprintf("base-%02d-stored-edit", i)] = fuzzing.CorpusFile(byte(i), e2.path, []byte(e2.value), e.path, []byte(e.value))
	}
	c.Check(t, "FuzzUpdateRules")
}
