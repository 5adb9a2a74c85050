// Command mdplane-engine-stand-in is the engine of the test stack's real node: installed as `vllm`
// (and run by the image's `sglang.launch_server` module as `sglang`), it reads the command line
// mdplane renders for vLLM or SGLang and runs llm-d-inference-sim, an OpenAI-compatible server with
// vLLM's endpoints and metrics, with what of it the simulator understands: the model, the names it
// serves, the port and the TLS files. Every other engine flag (parallelism, KV transfer, cache,
// multi-host joins) is dropped: the simulator exits on a flag it does not know.
//
// ENGINE_STAND_IN_FLAGS adds simulator flags of the test's own (a queue of one with a slow first
// token, say), split on spaces.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// simulator is where the image carries llm-d-inference-sim.
const simulator = "/usr/local/bin/llm-d-inference-sim"

// flagsEnv adds simulator flags of the test's own.
const flagsEnv = "ENGINE_STAND_IN_FLAGS"

func main() {
	args, err := simulatorArgs(filepath.Base(os.Args[0]), os.Args[1:], os.Getenv(flagsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "engine stand-in:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "engine stand-in: %s %s\n", simulator, strings.Join(args, " "))
	if err := syscall.Exec(simulator, append([]string{simulator}, args...), os.Environ()); err != nil {
		fmt.Fprintln(os.Stderr, "engine stand-in:", err)
		os.Exit(1)
	}
}

// kept are the engine flags passed on, by name: whether each takes one value or several (the
// served names, as vLLM's nargs+).
var kept = map[string]bool{"--served-model-name": true, "--port": false, "--ssl-certfile": false, "--ssl-keyfile": false, "--max-model-len": false}

// simulatorArgs translates an engine's command line (the arguments after the program name, for
// engine "vllm" or "sglang") into the simulator's.
func simulatorArgs(engine string, engineArgs []string, extra string) ([]string, error) {
	rest := engineArgs
	switch engine {
	case "vllm":
		if len(rest) == 0 || rest[0] != "serve" {
			return nil, fmt.Errorf("vllm: only `vllm serve` is stood in for, got %q", engineArgs)
		}
		rest = rest[1:]
	case "sglang":
	default:
		return nil, fmt.Errorf("run as %q: the stand-in runs as vllm or sglang", engine)
	}
	var model string
	out := []string{}
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		if !strings.HasPrefix(arg, "-") {
			if model == "" && engine == "vllm" {
				model = arg
			}
			continue
		}
		name, value, inline := strings.Cut(arg, "=")
		name = strings.ReplaceAll(name, "_", "-")
		// The values that follow a flag, up to the next flag.
		var values []string
		if inline {
			values = []string{value}
		} else {
			for i+1 < len(rest) && !strings.HasPrefix(rest[i+1], "--") {
				i++
				values = append(values, rest[i])
			}
		}
		switch {
		case name == "--model" || name == "--model-path":
			if len(values) > 0 {
				model = values[0]
			}
		case len(values) > 0:
			if many, ok := kept[name]; ok {
				if !many {
					values = values[:1]
				}
				out = append(out, append([]string{name}, values...)...)
			}
		}
	}
	if model == "" {
		return nil, fmt.Errorf("%s: no model in %q", engine, engineArgs)
	}
	out = append([]string{"--model", model, "--force-dummy-tokenizer", "--mode", "echo"}, out...)
	return append(out, strings.Fields(extra)...), nil
}
