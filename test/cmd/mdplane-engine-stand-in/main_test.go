package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestSimulatorArgs(t *testing.T) {
	base := []string{"--force-dummy-tokenizer", "--mode", "echo"}
	withModel := func(model string, rest ...string) []string {
		return append(append([]string{"--model", model}, base...), rest...)
	}
	cases := []struct {
		name   string
		engine string
		args   string
		extra  string
		want   []string
		err    string
	}{
		{name: "vllm serve takes the model from its positional argument", engine: "vllm",
			args: "serve Qwen/Qwen2.5-0.5B --served-model-name qwen --host 0.0.0.0 --port 8000",
			want: withModel("Qwen/Qwen2.5-0.5B", "--served-model-name", "qwen", "--port", "8000")},
		{name: "engine flags the simulator does not know are dropped with their values", engine: "vllm",
			args: "serve m --revision abc --tensor-parallel-size 2 --kv-transfer-config {\"kv_role\":\"kv_both\"} --enable-expert-parallel --port 8200",
			want: withModel("m", "--port", "8200")},
		{name: "several served names are kept, as vLLM takes them", engine: "vllm",
			args: "serve m --served-model-name a b --port=8000",
			want: withModel("m", "--served-model-name", "a", "b", "--port", "8000")},
		{name: "underscore spellings are vLLM's too", engine: "vllm",
			args: "serve m --served_model_name a",
			want: withModel("m", "--served-model-name", "a")},
		{name: "sglang takes the model from --model-path", engine: "sglang",
			args: "--model-path /var/lib/gpustack/model --enable-metrics --served-model-name s --tp-size 16 --port 8000",
			want: withModel("/var/lib/gpustack/model", "--served-model-name", "s", "--port", "8000")},
		{name: "the test's own simulator flags come last", engine: "vllm", args: "serve m",
			extra: "--max-num-seqs 1 --time-to-first-token 2s",
			want:  withModel("m", "--max-num-seqs", "1", "--time-to-first-token", "2s")},
		{name: "only vllm serve is stood in for", engine: "vllm", args: "bench m", err: "only `vllm serve`"},
		{name: "a command line without a model is refused", engine: "sglang", args: "--port 8000", err: "no model"},
		{name: "another program name is refused", engine: "ray", args: "start", err: "runs as vllm or sglang"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := simulatorArgs(c.engine, strings.Fields(c.args), c.extra)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one containing %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}
