package engine

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// widthFlags are the spellings the member width reads beyond degreeFlags: how many data-parallel
// ranks run on this host, whether a process is one external data-parallel rank, how many hosts one
// engine spans, and SGLang's data-parallel attention (whose ranks split the tensor ranks).
var widthFlags = map[workerv1.Engine]struct{ dpLocal, dpRank, nnodes, dpAttention []string }{
	workerv1.EngineVLLM: {
		dpLocal: []string{"--data-parallel-size-local", "-dpl"},
		dpRank:  []string{"--data-parallel-rank", "-dpn", "--data-parallel-external-lb", "-dpe"},
		nnodes:  []string{"--nnodes", "-n"},
	},
	workerv1.EngineSGLang: {
		nnodes:      []string{"--nnodes"},
		dpAttention: []string{"--enable-dp-attention"},
	},
}

// sglangMoEDataParallel is SGLang's MoE data-parallel degree.
var sglangMoEDataParallel = []string{"--moe-dp-size"}

// narrowsByMoE reports an SGLang MoE data-parallel degree above 1.
func narrowsByMoE(e workerv1.Engine, args []string) bool {
	n, _, ok := readDegree(e, args, sglangMoEDataParallel, 1)
	return e == workerv1.EngineSGLang && ok && n > 1
}

// WidthFlagBounds are the width flags whose value admission reads, each with the least value the
// engine accepts: a host may run no local data-parallel rank (a headless front end), but an engine
// spans at least one host.
func WidthFlagBounds(e workerv1.Engine) map[string]int {
	f := widthFlags[e]
	out := map[string]int{}
	for _, n := range f.dpLocal {
		out[n] = 0
	}
	for _, n := range f.nnodes {
		out[n] = 1
	}
	return out
}

// Width is the number of cards one member's engine occupies, as its command line and environment
// declare it, with the degrees behind it spelled for a refusal to name.
type Width struct {
	Cards   *big.Int
	Degrees string
}

// MemberWidth reads the cards one member (one Pod) of a role occupies from its declared degrees.
// The product is exact (big.Int): degrees large enough to overflow a machine integer are a width
// over any card count, not a wrapped small one. An unreadable value counts as its default; admission
// refuses it separately.
//
// vLLM: one engine's world is tensor × pipeline × prefill-context-parallel ranks (decode context
// parallelism reuses the tensor ranks), times the data-parallel ranks on this host: the declared
// local count, one for an external rank, else the whole data-parallel degree (the flag, or
// VLLM_DP_SIZE when the command line does not drive data parallelism); a local count of 0 counts
// as undeclared. SGLang: tensor × pipeline × data-parallel, where data-parallel attention or an
// MoE data-parallel degree splits the tensor ranks instead of adding any.
// --nnodes spreads the ranks over that many hosts, one host per member.
func MemberWidth(e workerv1.Engine, args []string, env []workerv1.ModelDeploymentEnvVar) Width {
	d := degreeFlags[e]
	product := big.NewInt(1)
	var terms []string
	multiply := func(label string, n int64, how string) {
		product.Mul(product, big.NewInt(n))
		term := fmt.Sprintf("%s %d", label, n)
		if how != "" {
			term += " (" + how + ")"
		}
		terms = append(terms, term)
	}
	tp, _, _ := readDegree(e, args, d.tp, 1)
	pp, _, _ := readDegree(e, args, d.pp, 1)
	multiply("tensor-parallel", tp, "")
	multiply("pipeline-parallel", pp, "")
	if pcp, how, ok := readDegree(e, args, d.pcp, 1); ok {
		multiply("prefill-context-parallel", pcp, how)
	}
	if dp, label, how, ok := dataParallelOnMember(e, args, env); ok {
		multiply(label, dp, how)
	}
	degrees := strings.Join(terms, " × ")
	if nnodes, how, ok := readDegree(e, args, widthFlags[e].nnodes, 1); ok && nnodes > 1 {
		// Ceiling division: the host carrying the remainder is the one that must fit.
		n := big.NewInt(nnodes)
		product.Add(product, new(big.Int).Sub(n, big.NewInt(1)))
		product.Quo(product, n)
		degrees += fmt.Sprintf(" ÷ %d hosts (%s)", nnodes, how)
	}
	return Width{Cards: product, Degrees: degrees}
}

// dataParallelOnMember is how many data-parallel ranks one member runs, when its command line or
// environment declares any, with the term's label and the spelling it came from.
func dataParallelOnMember(e workerv1.Engine, args []string, env []workerv1.ModelDeploymentEnvVar) (n int64, label, how string, ok bool) {
	d, w := degreeFlags[e], widthFlags[e]
	switch e {
	case workerv1.EngineVLLM:
		// A local count of 0 is the engine's sentinel for data parallelism placed from outside, not
		// a member without ranks: it counts as undeclared, so the whole degree is judged.
		local, how, declared := readDegree(e, args, w.dpLocal, 0)
		if declared && local > 0 {
			return local, "data-parallel local", how, true
		}
		if HasFlag(e, args, w.dpRank...) {
			return 1, "data-parallel", "one external rank per member", true
		}
		if dp, dpHow, ok := readDegree(e, args, d.dp, 1); ok && dp > 1 {
			if declared {
				dpHow += fmt.Sprintf(", %s 0 placing none of it", how)
			}
			return dp, "data-parallel", dpHow, true
		}
		// VLLM_DP_SIZE is read only where the command line does not drive data parallelism; a
		// declared local count drives it.
		if dp, ok := envDegree(env, "VLLM_DP_SIZE"); ok && dp > 1 && !declared {
			return dp, "data-parallel", "VLLM_DP_SIZE", true
		}
	case workerv1.EngineSGLang:
		// Data-parallel attention and an MoE data-parallel degree place the data-parallel ranks
		// inside the tensor ranks: they narrow the tensor group instead of adding cards.
		if dp, how, ok := readDegree(e, args, d.dp, 1); ok && !HasFlag(e, args, w.dpAttention...) && !narrowsByMoE(e, args) {
			return dp, "data-parallel", how, true
		}
	}
	return 0, "", "", false
}

// readDegree reads a degree of at least least, with the spelling it was passed in; an unreadable or
// absent one is the default 1.
func readDegree(e workerv1.Engine, args, names []string, least int64) (int64, string, bool) {
	v, ok := FlagValue(e, args, names...)
	n, err := strconv.ParseInt(v, 10, 64)
	if !ok || err != nil || n < least {
		return 1, "", false
	}
	return n, lastSpelling(e, args, names), true
}

// envDegree reads a degree an engine takes from its environment.
func envDegree(env []workerv1.ModelDeploymentEnvVar, name string) (int64, bool) {
	for _, e := range env {
		if e.Name == name {
			n, err := strconv.ParseInt(e.Value, 10, 64)
			return n, err == nil && n >= 1
		}
	}
	return 0, false
}

// lastSpelling is the spelling of the last of names passed, for a message to quote.
func lastSpelling(e workerv1.Engine, args []string, names []string) string {
	spelled := ""
	for _, arg := range args {
		if name, ok := OptionName(e, arg); ok && contains(names, name) {
			spelled, _, _ = strings.Cut(arg, "=")
		}
	}
	return spelled
}
