package engine_test

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// fuzzEngines are the engines the fuzz targets pick from: both known engines and one mdplane does
// not read.
var fuzzEngines = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang, "TGI"}

// splitArgs is a fuzzed command line: one argument a line, so an argument may hold spaces or be
// empty.
func splitArgs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// FuzzOwnedArg judges one argument's spelling against the owned keys (engine.OwnedArg, and on vLLM
// engine.ElasticOwnedArg). Properties:
//
//   - soundness against the engine's own parser: every argument the engine reads as an owned flag
//     (engine.OptionName, argparse's resolution with vLLM's underscores and dotted members) is
//     recognised as that owned flag, so admission refuses every spelling the engine would act on;
//   - what is recognised is an owned flag of that engine (with --kv-cache-dtype only while kvCache);
//   - the verdict depends on the option name alone: the same name with any other value attached
//     (--flag=v) gets the same answer;
//   - closure over spellings: every owned flag is recognised as itself in every spelling the engine
//     reads (the flag, --flag=value with the fuzzed value, and on vLLM underscores for any of its
//     dashes, a dotted member, and a unique prefix).
func FuzzOwnedArg(f *testing.F) {
	f.Fuzz(func(t *testing.T, e byte, kvCache bool, arg, value string) {
		eng := fuzzEngines[int(e)%len(fuzzEngines)]
		owned := engine.OwnedArgs(eng, kvCache)
		flag, ok := engine.OwnedArg(eng, kvCache, arg)
		if ok && !slices.Contains(owned, flag) {
			t.Fatalf("%q is judged the owned flag %q, which %s does not own", arg, flag, eng)
		}
		if name, read := engine.OptionName(eng, arg); read {
			if eng == workerv1.EngineVLLM {
				name, _, _ = strings.Cut(name, ".") // a dotted member is part of the flag's document
			}
			if slices.Contains(owned, name) && (!ok || flag != name) {
				t.Fatalf("%s reads %q as the owned flag %s, but it is judged (%q, %v)", eng, arg, name, flag, ok)
			}
		}
		if name, _, hasValue := strings.Cut(arg, "="); hasValue || strings.HasPrefix(arg, "--") {
			again, okAgain := engine.OwnedArg(eng, kvCache, name+"="+value)
			if strings.HasPrefix(name, "--") && (again != flag || okAgain != ok) {
				t.Fatalf("%q and %q name the same option but are judged (%q, %v) and (%q, %v)", arg, name+"="+value, flag, ok, again, okAgain)
			}
		}
		for _, o := range owned {
			for _, spelling := range spellings(eng, o, value) {
				if got, ok := engine.OwnedArg(eng, kvCache, spelling); !ok || got != o {
					t.Fatalf("%q spells the owned flag %s on %s but is judged (%q, %v)", spelling, o, eng, got, ok)
				}
			}
		}
		if eng == workerv1.EngineVLLM {
			elasticSound(t, arg)
		}
	})
}

// spellings are the ways the engine reads an owned flag, with the fuzzed value where one fits: the
// flag, --flag=value, and on vLLM a dash of the name as an underscore (chosen by the value), a
// dotted member and the longest prefix no other owned flag shares.
func spellings(e workerv1.Engine, flag, value string) []string {
	out := []string{flag, flag + "=" + value}
	if e != workerv1.EngineVLLM {
		return out
	}
	name := flag[2:]
	if i := strings.Index(name, "-"); i >= 0 && len(value)%2 == 1 {
		name = name[:i] + "_" + name[i+1:]
	}
	out = append(out, "--"+strings.ReplaceAll(flag[2:], "-", "_"), "--"+name, flag+"."+strings.ReplaceAll(value, "=", ""))
	if abbreviation := flag[:len(flag)-1]; len(abbreviation) > 2 {
		out = append(out, abbreviation)
	}
	return out
}

// elasticSound: every argument vLLM reads as a flag the Elastic EP renderer owns is judged owned.
func elasticSound(t *testing.T, arg string) {
	t.Helper()
	name, read := engine.OptionName(workerv1.EngineVLLM, arg)
	if !read {
		return
	}
	name, _, _ = strings.Cut(name, ".")
	if !slices.Contains(engine.ElasticOwnedArgs, name) {
		return
	}
	if flag, ok := engine.ElasticOwnedArg(arg); !ok || flag != name {
		t.Fatalf("vLLM reads %q as %s, which the Elastic EP renderer owns, but it is judged (%q, %v)", arg, name, flag, ok)
	}
}

// FuzzParallelDegrees reads the parallel degrees of a fuzzed command line (one argument a line) and
// VLLM_DP_SIZE on every engine: engine.ReadDegrees (the render), engine.ReadParallelism (status and
// admission) and engine.MemberWidth (admission's card count). Properties:
//
//   - a reference reader agrees: after each argument's option name is rewritten to the registered
//     spelling OptionName resolves it to, a straightforward scan (the last --flag value or
//     --flag=value of any spelling wins; a whole number of at least 1, else 1) gives ReadDegrees'
//     tensor, pipeline, data and expert degrees on the original line;
//   - the readers agree with each other: a degree ReadParallelism declares is ReadDegrees' value on
//     the options before a bare --, and an undeclared one is 1 there (for a degree within the 32
//     bits status reports; admission refuses a larger one);
//   - no declared degree is below its least value (1; 0 local data-parallel ranks), whatever the
//     line or VLLM_DP_SIZE holds;
//   - the result is stable under unrelated arguments: a flag and its value put in front change no
//     degree, no declared degree and no width;
//   - a later occurrence wins: appending --tensor-parallel-size N sets the tensor degree to N and
//     leaves the other degrees (vLLM's expert degree is the tensor × data product) alone.
func FuzzParallelDegrees(f *testing.F) {
	f.Fuzz(func(t *testing.T, e byte, line, dpSize string, n uint8) {
		eng := fuzzEngines[int(e)%len(fuzzEngines)]
		args := splitArgs(line)
		env := []workerv1.ModelDeploymentEnvVar{{Name: "VLLM_DP_SIZE", Value: dpSize}}
		d := engine.ReadDegrees(eng, args)
		width := engine.MemberWidth(eng, args, env)
		if width.Cards.Sign() < 0 {
			t.Fatalf("a negative width %s for %q", width.Cards, args)
		}

		if want := referenceDegrees(eng, normalize(eng, args)); want != (engine.Degrees{TP: d.TP, PP: d.PP, DP: d.DP, EP: want.EP}) ||
			(eng == workerv1.EngineSGLang && want.EP != d.EP) {
			t.Fatalf("ReadDegrees(%q) = %+v, the reference reads %+v", args, d, want)
		}

		role := workerv1.ModelDeploymentRole{ExtraArgs: args, Env: env}
		declared := engine.ReadParallelism(eng, role).Declared
		for what, p := range map[string]*int32{"tensor": declared.TensorParallel, "pipeline": declared.PipelineParallel,
			"data": declared.DataParallel, "expert": declared.ExpertParallel, "moe-dp": declared.MoeDpSize,
			"prefill-context": declared.PrefillContextParallel, "decode-context": declared.DecodeContextParallel} {
			if p != nil && *p < 1 {
				t.Fatalf("ReadParallelism declares a %s degree of %d for %q (VLLM_DP_SIZE %q)", what, *p, args, dpSize)
			}
		}
		if p := declared.DataParallelLocal; p != nil && *p < 0 {
			t.Fatalf("ReadParallelism declares %d local data-parallel ranks for %q", *p, args)
		}
		before := engine.ReadDegrees(eng, args[:argsEnd(args)])
		agree := func(what string, p *int32, read int) {
			if read > math.MaxInt32 {
				return // past the status's 32 bits: unreadable there, and admission refuses it
			}
			if p == nil && read != 1 || p != nil && int(*p) != read {
				t.Fatalf("%s: ReadParallelism declares %v, ReadDegrees reads %d, for %q", what, deref(p), read, args)
			}
		}
		agree("tensor", declared.TensorParallel, before.TP)
		agree("pipeline", declared.PipelineParallel, before.PP)
		if eng == workerv1.EngineSGLang {
			agree("data", declared.DataParallel, before.DP)
			agree("expert", declared.ExpertParallel, before.EP)
		}

		prefixed := append([]string{"--max-model-len", "4096"}, args...)
		if engine.ReadDegrees(eng, prefixed) != d {
			t.Fatalf("an unrelated flag in front moves the degrees of %q", args)
		}
		if engine.MemberWidth(eng, prefixed, env).Cards.Cmp(width.Cards) != 0 {
			t.Fatalf("an unrelated flag in front moves the width of %q", args)
		}
		if !sameDegrees(engine.ReadParallelism(eng, workerv1.ModelDeploymentRole{ExtraArgs: prefixed, Env: env}).Declared, declared) {
			t.Fatalf("an unrelated flag in front moves the declared degrees of %q", args)
		}

		if eng == "TGI" {
			return
		}
		tp := int(n%64) + 1
		later := engine.ReadDegrees(eng, append(slices.Clone(args), "--tensor-parallel-size", strconv.Itoa(tp)))
		want := d
		want.TP = tp
		if eng == workerv1.EngineVLLM && engine.HasFlag(eng, args, "--enable-expert-parallel") {
			want.EP = tp * d.DP
		}
		if later != want {
			t.Fatalf("appending --tensor-parallel-size %d to %q reads %+v, want %+v", tp, args, later, want)
		}
	})
}

// normalize rewrites every long option's name to the registered spelling the engine resolves it to
// (an abbreviation to its option, vLLM's underscores to dashes), keeping a dotted member and an
// attached value; every other argument is kept as written.
func normalize(e workerv1.Engine, args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		name, read := engine.OptionName(e, a)
		if !read || !strings.HasPrefix(a, "--") {
			continue
		}
		if _, v, hasValue := strings.Cut(a, "="); hasValue {
			name += "=" + v
		}
		out[i] = name
	}
	return out
}

// referenceDegrees reads degrees from a normalized command line the plain way: for each degree, the
// last argument that is one of its spellings (value in the next argument) or a spelling followed
// by = (value after it).
func referenceDegrees(e workerv1.Engine, args []string) engine.Degrees {
	spellings := map[workerv1.Engine]map[string][]string{
		workerv1.EngineVLLM: {
			"tp": {"--tensor-parallel-size", "-tp"}, "pp": {"--pipeline-parallel-size", "-pp"}, "dp": {"--data-parallel-size", "-dp"},
		},
		workerv1.EngineSGLang: {
			"tp": {"--tp-size", "--tensor-parallel-size", "--tp"}, "pp": {"--pp-size", "--pipeline-parallel-size"},
			"dp": {"--dp-size", "--data-parallel-size", "--dp"}, "ep": {"--ep-size", "--expert-parallel-size", "--ep"},
		},
	}[e]
	read := func(names []string) int {
		value, found := "", false
		for i, a := range args {
			for _, s := range names {
				switch {
				case a == s:
					value, found = "", true
					if i+1 < len(args) {
						value = args[i+1]
					}
				case strings.HasPrefix(a, s+"="):
					value, found = a[len(s)+1:], true
				}
			}
		}
		if n, err := strconv.Atoi(value); found && err == nil && n >= 1 {
			return n
		}
		return 1
	}
	return engine.Degrees{TP: read(spellings["tp"]), PP: read(spellings["pp"]), DP: read(spellings["dp"]), EP: read(spellings["ep"])}
}

// argsEnd is where the engine stops reading options: a bare --.
func argsEnd(args []string) int {
	if i := slices.Index(args, "--"); i >= 0 {
		return i
	}
	return len(args)
}

func deref(p *int32) any {
	if p == nil {
		return nil
	}
	return *p
}

func sameDegrees(a, b workerv1.ParallelDegrees) bool {
	for _, pair := range [][2]*int32{
		{a.TensorParallel, b.TensorParallel}, {a.PipelineParallel, b.PipelineParallel}, {a.DataParallel, b.DataParallel},
		{a.DataParallelLocal, b.DataParallelLocal}, {a.ExpertParallel, b.ExpertParallel}, {a.MoeDpSize, b.MoeDpSize},
		{a.PrefillContextParallel, b.PrefillContextParallel}, {a.DecodeContextParallel, b.DecodeContextParallel},
	} {
		if deref(pair[0]) != deref(pair[1]) {
			return false
		}
	}
	return true
}
