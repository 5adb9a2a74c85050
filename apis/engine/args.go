package engine

import (
	"encoding/json"
	"strconv"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// flagName is the name part of an argument that looks like a flag, in the spelling vLLM and SGLang
// both read it: underscores and dashes are one character, so --kv_cache_dtype is --kv-cache-dtype.
func flagName(arg string) (string, bool) {
	if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
		return "", false
	}
	name, _, _ := strings.Cut(arg, "=")
	return strings.ReplaceAll(name, "_", "-"), true
}

// FlagValue returns the value of the last occurrence of any of names, in --flag value or
// --flag=value form; the engines' parsers let a later occurrence win.
func FlagValue(args []string, names ...string) (string, bool) {
	value, found := "", false
	for i, arg := range args {
		name, ok := flagName(arg)
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

// HasFlag reports whether any of names is passed, in any form, including a dotted member
// (--engram-config.cpu_offload) of one of them.
func HasFlag(args []string, names ...string) bool {
	for _, arg := range args {
		name, ok := flagName(arg)
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
		v, ok := FlagValue(args, names...)
		if n, err := strconv.Atoi(v); ok && err == nil && n >= 1 {
			return n
		}
		return 1
	}
	d := Degrees{TP: read(flags.tp), PP: read(flags.pp), DP: read(flags.dp), EP: read(flags.ep),
		PCP: read(flags.pcp), DCP: read(flags.dcp)}
	// vLLM has no expert degree of its own: expert parallelism spans the tensor and data ranks.
	if engine == workerv1.EngineVLLM && HasFlag(args, "--enable-expert-parallel") {
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
		if !HasFlag(args, "--engram-config") {
			return false
		}
		if v, ok := FlagValue(args, "--engram-config.cpu-offload"); ok {
			return v != "false" && v != "False" && v != "0"
		}
		if v, ok := FlagValue(args, "--engram-config"); ok {
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
