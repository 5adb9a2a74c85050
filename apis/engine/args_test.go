package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestFlagSpellings: a flag mdplane reads counts in any spelling the engine accepts (spec, Operating
// notes), and only in those.
func TestFlagSpellings(t *testing.T) {
	vllm, sglang := workerv1.EngineVLLM, workerv1.EngineSGLang
	cases := []struct {
		rule   string
		engine workerv1.Engine
		args   []string
		flag   string
		value  string
		read   bool
	}{
		{"vLLM: the full spelling", vllm, []string{"--port", "9200"}, "--port", "9200", true},
		{"vLLM: an abbreviation argparse accepts", vllm, []string{"--por", "9200"}, "--port", "9200", true},
		{"vLLM: an abbreviation with its value attached", vllm, []string{"--por=9200"}, "--port", "9200", true},
		{"vLLM: underscores are dashes", vllm, []string{"--ssl_certfile", "/tls.crt"}, "--ssl-certfile", "/tls.crt", true},
		{"vLLM: an abbreviation with underscores", vllm, []string{"--served_model", "m"}, "--served-model-name", "m", true},
		{"vLLM: a later occurrence in another spelling wins", vllm, []string{"--port=1", "--por", "2"}, "--port", "2", true},
		{"SGLang: the full spelling", sglang, []string{"--host", "127.0.0.1"}, "--host", "127.0.0.1", true},
		{"SGLang: an abbreviation argparse accepts", sglang, []string{"--ho", "127.0.0.1"}, "--host", "127.0.0.1", true},
		{"SGLang: --por is --port", sglang, []string{"--por=9200"}, "--port", "9200", true},
		{"SGLang: --ssl-cert is --ssl-certfile", sglang, []string{"--ssl-cert", "/tls.crt"}, "--ssl-certfile", "/tls.crt", true},
		{"SGLang: the exact --ssl-keyfile beside --ssl-keyfile-password", sglang, []string{"--ssl-keyfile", "/tls.key"}, "--ssl-keyfile", "/tls.key", true},

		{"near miss: SGLang reads no underscores", sglang, []string{"--ssl_certfile", "/tls.crt"}, "--ssl-certfile", "", false},
		{"near miss: vLLM's ambiguous --p (--port, --pipeline-parallel-size)", vllm, []string{"--p", "9200"}, "--port", "", false},
		{"near miss: vLLM's ambiguous --ssl-c (--ssl-certfile, --ssl-cert-reqs, --ssl-ca-certs)", vllm, []string{"--ssl-c", "/tls.crt"}, "--ssl-certfile", "", false},
		{"near miss: SGLang's ambiguous --h (--host, --hicache-*)", sglang, []string{"--h", "127.0.0.1"}, "--host", "", false},
		{"near miss: SGLang's ambiguous --ssl-key (--ssl-keyfile, --ssl-keyfile-password)", sglang, []string{"--ssl-key", "/tls.key"}, "--ssl-keyfile", "", false},
		{"near miss: a longer flag is another flag", vllm, []string{"--ports", "9200"}, "--port", "", false},
		{"near miss: a single-dash flag is read only as spelled", vllm, []string{"-port", "9200"}, "--port", "", false},
		{"near miss: the bare separator", vllm, []string{"--", "9200"}, "--port", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			value, read := engine.FlagValue(tc.engine, tc.args, tc.flag)
			assert.Equal(t, tc.read, read)
			assert.Equal(t, tc.value, value)
			assert.Equal(t, tc.read, engine.HasFlag(tc.engine, tc.args, tc.flag))
		})
	}
}

// TestEveryReadFlagIsKnown: a flag mdplane reads is judged against the engine's options, so each
// resolves to itself, and no abbreviation of it can be taken for another read flag.
func TestEveryReadFlagIsKnown(t *testing.T) {
	read := map[workerv1.Engine][]string{
		workerv1.EngineVLLM: append([]string{"--host", "--port", "--served-model-name", "--ssl-certfile", "--ssl-keyfile",
			"--ssl-cert-reqs", "--enable-expert-parallel", "--engram-config", "--data-parallel-size-local", "--data-parallel-rank",
			"--data-parallel-external-lb", "--nnodes"}, engine.DegreeFlags(workerv1.EngineVLLM)...),
		workerv1.EngineSGLang: append([]string{"--host", "--port", "--served-model-name", "--ssl-certfile", "--ssl-keyfile",
			"--enable-hierarchical-cache", "--disaggregation-decode-retraction-backup", "--nnodes", "--enable-dp-attention"},
			engine.DegreeFlags(workerv1.EngineSGLang)...),
	}
	for e, flags := range read {
		for _, f := range flags {
			name, ok := engine.OptionName(e, f)
			assert.True(t, ok, "%s on %s", f, e)
			assert.Equal(t, f, name, "%s on %s", f, e)
		}
	}
}
