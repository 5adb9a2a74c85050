package engine

import (
	"encoding/json"
	"strconv"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// How the engines read their command lines. vLLM and SGLang both parse with Python's argparse, which
// reads --flag value and --flag=value, lets a later occurrence win, and accepts an unambiguous prefix
// of a long option (allow_abbrev): --por is --port, while a prefix two options share (vLLM's --p,
// SGLang's --ssl-key) is refused by the engine and so names nothing. vLLM's parser also reads a
// long flag's underscores as dashes (--ssl_certfile is --ssl-certfile) and a dotted member
// (--engram-config.cpu_offload) as part of the flag's document; SGLang's reads neither, so
// --ssl_certfile is an error there, not TLS. A single-dash flag (-tp) is read only as spelled.

// knownOptions are, per engine, the options mdplane reads or owns and the engine's other options
// that share their leading characters. A prefix is read as a flag only when it abbreviates exactly
// one of them: a prefix that also abbreviates an option missing here is refused by the engine at
// startup, so reading it moves no listener of a running engine.
var knownOptions = map[workerv1.Engine][]string{
	workerv1.EngineVLLM: {
		"--host", "--headless", "--hf-token", "--hf-overrides", "--hf-config-path",
		"--port", "--pipeline-parallel-size", "--prefill-context-parallel-size",
		"--served-model-name", "--seed",
		"--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs", "--ssl-cert-reqs", "--enable-ssl-refresh",
		"--tensor-parallel-size", "--data-parallel-size", "--data-parallel-size-local", "--data-parallel-rank",
		"--data-parallel-external-lb", "--data-parallel-address", "--data-parallel-start-rank",
		"--data-parallel-hybrid-lb", "--data-parallel-multi-port-external-lb", "--data-parallel-rpc-port", "--data-parallel-backend",
		"--nnodes", "--node-rank", "--decode-context-parallel-size",
		"--enable-expert-parallel", "--engram-config",
		"--kv-transfer-config", "--kv-events-config", "--kv-cache-dtype",
		// The hub flags an artifact owns, and the options sharing their leading characters.
		"--model", "--model-impl", "--model-loader-extra-config", "--revision", "--tokenizer",
		"--tokenizer-mode", "--tokenizer-revision", "--download-dir",
	},
	workerv1.EngineSGLang: {
		"--host", "--hicache-ratio", "--hicache-size",
		"--port", "--pp-size", "--pipeline-parallel-size",
		"--served-model-name",
		"--ssl-keyfile", "--ssl-keyfile-password", "--ssl-certfile", "--ssl-ca-certs", "--enable-ssl-refresh",
		"--tp-size", "--tensor-parallel-size", "--tp", "--dp-size", "--data-parallel-size", "--dp",
		"--nnodes", "--node-rank", "--enable-dp-attention", "--enable-dp-lm-head",
		"--ep-size", "--expert-parallel-size", "--ep", "--moe-dp-size",
		"--enable-hierarchical-cache", "--disaggregation-decode-retraction-backup",
		"--hicache-storage-backend", "--hicache-storage-backend-extra-config", "--disaggregation-mode",
		"--disaggregation-transfer-backend", "--disaggregation-bootstrap-port", "--kv-cache-dtype",
		"--model-path", "--model", "--model-impl", "--model-loader-extra-config", "--revision", "--download-dir",
	},
}

// OptionName is the option an argument names on an engine, as the engine's parser resolves it: the
// option's registered spelling, followed on vLLM by a dotted member (--engram-config.cpu-offload).
// A value, a bare -- and a prefix of several options name nothing.
func OptionName(e workerv1.Engine, arg string) (string, bool) {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
		return "", false
	}
	name, _, _ := strings.Cut(arg, "=")
	if !strings.HasPrefix(name, "--") {
		return name, true // a single-dash flag is read only as spelled
	}
	member := ""
	if e == workerv1.EngineVLLM {
		name = strings.ReplaceAll(name, "_", "-")
		name, member, _ = strings.Cut(name, ".")
	}
	option, ok := resolvePrefix(knownOptions[e], name)
	if !ok {
		return "", false
	}
	if member != "" {
		option += "." + member
	}
	return option, true
}

// resolvePrefix is argparse's rule: an exact spelling wins, else the one option name abbreviates.
// A name no option starts with is kept as spelled: it is some option mdplane does not read.
func resolvePrefix(options []string, name string) (string, bool) {
	var matches []string
	for _, o := range options {
		if o == name {
			return o, true
		}
		if strings.HasPrefix(o, name) {
			matches = append(matches, o)
		}
	}
	switch len(matches) {
	case 0:
		return name, true
	case 1:
		return matches[0], true
	}
	return "", false // ambiguous: the engine refuses it
}

// FlagValue returns the value of the last occurrence of any of names, in any spelling the engine
// accepts, in --flag value or --flag=value form; the engines' parsers let a later occurrence win.
func FlagValue(e workerv1.Engine, args []string, names ...string) (string, bool) {
	value, found := "", false
	for i, arg := range args {
		name, ok := OptionName(e, arg)
		if !ok || !contains(names, name) {
			continue
		}
		found = true
		if _, v, hasValue := strings.Cut(arg, "="); hasValue {
			value = v
		} else if i+1 < len(args) {
			value = args[i+1]
		} else {
			value = ""
		}
	}
	return value, found
}

// HasFlag reports whether any of names is passed, in any spelling and form the engine accepts,
// including a dotted member (--engram-config.cpu_offload) of one of them on vLLM.
func HasFlag(e workerv1.Engine, args []string, names ...string) bool {
	for _, arg := range args {
		name, ok := OptionName(e, arg)
		if !ok {
			continue
		}
		for _, n := range names {
			if name == n || strings.HasPrefix(name, n+".") {
				return true
			}
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

// Degrees are the parallel degrees of one member as its command line declares them; an undeclared
// or unreadable degree is 1. Admission refuses an unreadable one; the render only needs a value.
type Degrees struct {
	TP, PP, DP, EP, PCP, DCP int
}

// degreeFlags are the spellings each engine reads a degree from.
var degreeFlags = map[workerv1.Engine]struct{ tp, pp, dp, ep, pcp, dcp []string }{
	workerv1.EngineVLLM: {
		tp:  []string{"--tensor-parallel-size", "-tp"},
		pp:  []string{"--pipeline-parallel-size", "-pp"},
		dp:  []string{"--data-parallel-size", "-dp"},
		pcp: []string{"--prefill-context-parallel-size", "-pcp"},
		dcp: []string{"--decode-context-parallel-size", "-dcp"},
	},
	workerv1.EngineSGLang: {
		tp: []string{"--tp-size", "--tensor-parallel-size", "--tp"},
		pp: []string{"--pp-size", "--pipeline-parallel-size"},
		dp: []string{"--dp-size", "--data-parallel-size", "--dp"},
		ep: []string{"--ep-size", "--expert-parallel-size", "--ep"},
	},
}

// ReadDegrees reads the parallel degrees from an engine command line.
func ReadDegrees(engine workerv1.Engine, args []string) Degrees {
	flags := degreeFlags[engine]
	read := func(names []string) int {
		v, ok := FlagValue(engine, args, names...)
		if n, err := strconv.Atoi(v); ok && err == nil && n >= 1 {
			return n
		}
		return 1
	}
	d := Degrees{TP: read(flags.tp), PP: read(flags.pp), DP: read(flags.dp), EP: read(flags.ep),
		PCP: read(flags.pcp), DCP: read(flags.dcp)}
	// vLLM has no expert degree of its own: expert parallelism spans the tensor and data ranks.
	if engine == workerv1.EngineVLLM && HasFlag(engine, args, "--enable-expert-parallel") {
		d.EP = d.TP * d.DP
	}
	return d
}

// EngramEnabled reports whether a role turns Engram host-memory offload on: vLLM through an
// --engram-config (or a dotted member) that leaves cpu_offload at its default true, SGLang through
// SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1.
func EngramEnabled(engine workerv1.Engine, args []string, env []workerv1.ModelDeploymentEnvVar) bool {
	switch engine {
	case workerv1.EngineSGLang:
		for _, e := range env {
			if e.Name == "SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE" {
				return e.Value == "1"
			}
		}
		return false
	case workerv1.EngineVLLM:
		if !HasFlag(engine, args, "--engram-config") {
			return false
		}
		if v, ok := FlagValue(engine, args, "--engram-config.cpu-offload"); ok {
			return v != "false" && v != "False" && v != "0"
		}
		if v, ok := FlagValue(engine, args, "--engram-config"); ok {
			var cfg struct {
				CPUOffload *bool `json:"cpu_offload"`
			}
			if json.Unmarshal([]byte(v), &cfg) == nil && cfg.CPUOffload != nil {
				return *cfg.CPUOffload
			}
		}
		return true
	}
	return false
}

// DegreeFlags lists every spelling of a parallel-degree flag the engine reads.
func DegreeFlags(e workerv1.Engine) []string {
	f := degreeFlags[e]
	var out []string
	for _, names := range [][]string{f.tp, f.pp, f.dp, f.ep, f.pcp, f.dcp} {
		out = append(out, names...)
	}
	return out
}
