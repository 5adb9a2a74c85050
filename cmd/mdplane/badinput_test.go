package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// badInputs are manifests a careless or hostile hand gives the CLI, and the words its one error
// must carry.
var badInputs = []struct {
	rule, file string
	content    func() []byte
	says       string
}{
	{"truncated YAML names the line", "truncated.yaml", func() []byte {
		return []byte("apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\nmetadata: {name: a\n  namespace: [b")
	}, "truncated.yaml#1: yaml: line 3"},
	{"a 10 MiB manifest is judged, the oversized field named", "big.yaml", func() []byte {
		return []byte("apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\nmetadata: {name: a, namespace: b}\nspec:\n  model: {name: m}\n" +
			"  engine: {name: vLLM, image: i}\n  roles:\n  - {name: s, instanceType: t, extraArgs: [\"" + strings.Repeat("a", 10<<20) + "\"]}\n")
	}, "spec.roles[0].extraArgs[0]: Too long"},
	{"deeply nested JSON stops at the decoder's depth", "nested.json", func() []byte {
		return []byte(strings.Repeat("[", 200000) + strings.Repeat("]", 200000))
	}, "nested.json#1: yaml: exceeded max depth"},
	{"deeply nested YAML likewise", "nested.yaml", func() []byte { return []byte(strings.Repeat("- ", 50000) + "x") }, "exceeded max depth"},
	{"non-UTF-8 bytes are refused by the decoder", "binary.yaml", func() []byte {
		return append([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: \""), append(bytes.Repeat([]byte{0xff, 0xfe}, 4), []byte("\"}\n")...)...)
	}, "binary.yaml#1: yaml: invalid leading UTF-8 octet"},
}

// TestBadInputAnswersWithOneClearError: validate, render and schema-check each fail on a bad
// manifest with an error naming the file, the document and what is wrong with it, never a panic.
func TestBadInputAnswersWithOneClearError(t *testing.T) {
	dir := t.TempDir()
	for _, in := range badInputs {
		t.Run(in.rule, func(t *testing.T) {
			name := filepath.Join(dir, in.file)
			if err := os.WriteFile(name, in.content(), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, command := range []string{"validate", "render", "schema-check"} {
				code, out, errOut := runCLI(command, "-f", name)
				assert.NotEqual(t, 0, code, command)
				assert.Contains(t, out+errOut, in.says, command)
				assert.NotContains(t, errOut, "panic", command)
			}
		})
	}
	t.Run("an unknown kind is refused by validate, not admitted in silence", func(t *testing.T) {
		name := filepath.Join(dir, "unknown.yaml")
		if err := os.WriteFile(name, []byte("apiVersion: example.com/v9\nkind: Nope\nmetadata: {name: a}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI("validate", "-f", name)
		assert.Equal(t, 1, code)
		assert.Equal(t, "error: kind: Nope of example.com/v9 is neither a kind of mdplane's nor one of Kubernetes' own: validate cannot judge it, and a cluster without that kind refuses it (Nope a, "+name+"#1)\n", errOut)
		code, _, errOut = runCLI("render", "-f", name)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no ModelDeployment in the given manifests")
	})
	t.Run("a document without a kind is no object", func(t *testing.T) {
		name := filepath.Join(dir, "kindless.yaml")
		if err := os.WriteFile(name, []byte("metadata: {name: a}\nspec: {}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := runCLI("validate", "-f", name)
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "not a Kubernetes object: it names no apiVersion and kind")
	})
}

// BenchmarkBadInput reports the time (ns/op) and memory (B/op, allocs/op) validate spends on each
// bad manifest: bounded, where a parser without limits would run away on the nested ones.
func BenchmarkBadInput(b *testing.B) {
	dir := b.TempDir()
	for _, in := range badInputs {
		name := filepath.Join(dir, in.file)
		if err := os.WriteFile(name, in.content(), 0o600); err != nil {
			b.Fatal(err)
		}
		b.Run(in.file, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if code, _, _ := runCLI("validate", "-f", name); code == 0 {
					b.Fatal("admitted")
				}
			}
		})
	}
}
