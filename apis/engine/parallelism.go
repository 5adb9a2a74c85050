package engine

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// balanceFlags are vLLM's flags that decide how data-parallel ranks take traffic.
var balanceFlags = struct {
	externalLB, rank, hybridLB, multiPort, startRank, local, size, nnodes, headless []string
}{
	externalLB: []string{"--data-parallel-external-lb", "-dpe"},
	rank:       []string{"--data-parallel-rank", "-dpn"},
	hybridLB:   []string{"--data-parallel-hybrid-lb", "-dph"},
	multiPort:  []string{"--data-parallel-multi-port-external-lb", "-dpm"},
	startRank:  []string{"--data-parallel-start-rank", "-dpr"},
	local:      []string{"--data-parallel-size-local", "-dpl"},
	size:       []string{"--data-parallel-size", "-dp"},
	nnodes:     []string{"--nnodes", "-n"},
	headless:   []string{"--headless"},
}

// declaredDegreeFlags are, per engine, the spellings of each degree status.roles[].parallelism.declared
// reports; a degree the engine has no flag for stays undeclared.
var declaredDegreeFlags = map[workerv1.Engine][]struct {
	names []string
	into  func(*workerv1.ParallelDegrees) **int32
}{
	workerv1.EngineVLLM: {
		{degreeFlags[workerv1.EngineVLLM].tp, func(d *workerv1.ParallelDegrees) **int32 { return &d.TensorParallel }},
		{degreeFlags[workerv1.EngineVLLM].pp, func(d *workerv1.ParallelDegrees) **int32 { return &d.PipelineParallel }},
		{balanceFlags.local, func(d *workerv1.ParallelDegrees) **int32 { return &d.DataParallelLocal }},
		{degreeFlags[workerv1.EngineVLLM].pcp, func(d *workerv1.ParallelDegrees) **int32 { return &d.PrefillContextParallel }},
		{degreeFlags[workerv1.EngineVLLM].dcp, func(d *workerv1.ParallelDegrees) **int32 { return &d.DecodeContextParallel }},
	},
	workerv1.EngineSGLang: {
		{degreeFlags[workerv1.EngineSGLang].tp, func(d *workerv1.ParallelDegrees) **int32 { return &d.TensorParallel }},
		{degreeFlags[workerv1.EngineSGLang].pp, func(d *workerv1.ParallelDegrees) **int32 { return &d.PipelineParallel }},
		{degreeFlags[workerv1.EngineSGLang].dp, func(d *workerv1.ParallelDegrees) **int32 { return &d.DataParallel }},
		{degreeFlags[workerv1.EngineSGLang].ep, func(d *workerv1.ParallelDegrees) **int32 { return &d.ExpertParallel }},
		{[]string{"--moe-dp-size"}, func(d *workerv1.ParallelDegrees) **int32 { return &d.MoeDpSize }},
	},
}

// modeFlags name, per engine, the modes status.roles[].parallelism.modes reports and the flags that
// turn each on.
var modeFlags = map[workerv1.Engine][]struct {
	mode  string
	names []string
}{
	workerv1.EngineVLLM: {
		{"expertParallel", []string{"--enable-expert-parallel", "-ep"}},
	},
	workerv1.EngineSGLang: {
		{"dpAttention", []string{"--enable-dp-attention"}},
		{"enable-dp-lm-head", []string{"--enable-dp-lm-head"}},
	},
}

// commandLineDrivesDataParallel reports whether the degrees a vLLM command line declares drive data
// parallelism: a --data-parallel-size above 1, or a headless front end's local count of 0.
func commandLineDrivesDataParallel(d workerv1.ParallelDegrees) bool {
	return ptrValue(d.DataParallel) > 1 || d.DataParallelLocal != nil && *d.DataParallelLocal == 0
}

// ShadowsDPSizeEnv reports whether a vLLM role's command line drives data parallelism, so that the
// engine, and mdplane reading its degrees, ignore VLLM_DP_SIZE.
func ShadowsDPSizeEnv(e workerv1.Engine, role workerv1.ModelDeploymentRole) bool {
	if e != workerv1.EngineVLLM {
		return false
	}
	role.Env = slices.DeleteFunc(slices.Clone(role.Env), func(env workerv1.ModelDeploymentEnvVar) bool { return env.Name == "VLLM_DP_SIZE" })
	return commandLineDrivesDataParallel(ReadParallelism(e, role).Declared)
}

// ReadParallelism is the parallel layout a role's own command line and environment declare, as
// status.roles[].parallelism reports it. A managed role is read
// from its extraArgs; a take-over role from its command, because a take-over's degrees travel
// through roles[].command alone and admission reads them there.
func ReadParallelism(e workerv1.Engine, role workerv1.ModelDeploymentRole) workerv1.RoleParallelism {
	source := workerv1.ParallelismSource{Kind: workerv1.ParallelismFromExtraArgs, Complete: true}
	if role.TakesOver() {
		source.Kind = workerv1.ParallelismFromUnmanagedCommand
	}
	if _, known := degreeFlags[e]; !known {
		return workerv1.RoleParallelism{LoadBalance: workerv1.LoadBalanceUnknown,
			Source: &workerv1.ParallelismSource{Kind: workerv1.ParallelismFromUnknown, UnreadableReason: fmt.Sprintf("engine %q is not read", e)}}
	}
	args := role.EngineArgs()
	args = args[:argsEnd(args)]
	p := workerv1.RoleParallelism{Source: &source}
	var unreadable []string
	declare := func(names []string, into **int32, least int64) {
		v, ok := FlagValue(e, args, names...)
		if !ok {
			return
		}
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < least {
			unreadable = append(unreadable, fmt.Sprintf("%s %q", lastSpelling(e, args, names), v))
			return
		}
		*into = ptrInt32(int32(n))
	}
	for _, d := range declaredDegreeFlags[e] {
		least := int64(1)
		if slices.Equal(d.names, balanceFlags.local) {
			least = 0 // a headless front end runs no local rank
		}
		declare(d.names, d.into(&p.Declared), least)
	}
	if e == workerv1.EngineVLLM {
		declare(degreeFlags[e].dp, &p.Declared.DataParallel, 1)
		// VLLM_DP_SIZE supplies the degree only where the command line does not drive data parallelism;
		// one past the status's 32 bits is unreadable, as a flag's is, not wrapped.
		if dp, ok := envDegree(role.Env, "VLLM_DP_SIZE"); ok && !commandLineDrivesDataParallel(p.Declared) {
			if dp > math.MaxInt32 {
				unreadable = append(unreadable, fmt.Sprintf("VLLM_DP_SIZE %d", dp))
			} else {
				p.Declared.DataParallel = ptrInt32(int32(dp))
			}
		}
	}
	for _, m := range modeFlags[e] {
		if HasFlag(e, args, m.names...) {
			if p.Modes == nil {
				p.Modes = map[string]bool{}
			}
			p.Modes[m.mode] = true
		}
	}
	if len(unreadable) > 0 {
		source.Complete = false
		source.UnreadableReason = "unreadable " + strings.Join(unreadable, ", ")
	}
	p.LoadBalance, source.UnreadableReason = loadBalance(e, args, p.Declared, source.UnreadableReason)
	if p.LoadBalance == workerv1.LoadBalanceUnknown {
		source.Complete = false
	}
	return p
}

// loadBalance classifies how a role's data-parallel ranks take traffic, by the votes of vLLM's
// balance flags; reason gains why a shape is Unknown. SGLang ranks are
// always balanced inside the engine.
func loadBalance(e workerv1.Engine, args []string, d workerv1.ParallelDegrees, reason string) (string, string) {
	if e != workerv1.EngineVLLM {
		return workerv1.LoadBalanceInternal, reason
	}
	unknown := func(why string) (string, string) {
		if reason != "" {
			why = reason + "; " + why
		}
		return workerv1.LoadBalanceUnknown, why
	}
	votes := explicitVotes(e, args)
	shape, flag, why := implicitShape(e, args, d)
	if why != "" {
		return unknown(why)
	}
	if shape != "" {
		if _, seen := votes[shape]; !seen {
			votes[shape] = flag
		}
	}
	if len(votes) > 1 {
		var flags []string
		for _, flag := range votes {
			flags = append(flags, flag)
		}
		slices.Sort(flags)
		return unknown(fmt.Sprintf("the balance flags %s derive to different shapes", strings.Join(flags, ", ")))
	}
	shape = workerv1.LoadBalanceInternal
	for s := range votes {
		shape = s
	}
	switch {
	case HasFlag(e, args, balanceFlags.headless...):
		// A headless process serves no HTTP: its ranks are reached through the group's front end.
		return workerv1.LoadBalanceInternal, reason
	case shape == workerv1.LoadBalanceHybrid && d.DataParallelLocal != nil && *d.DataParallelLocal >= ptrValue(d.DataParallel):
		// Every rank on one host: nothing is balanced outside the engine.
		return workerv1.LoadBalanceInternal, reason
	}
	return shape, reason
}

// explicitVotes are the shapes vLLM's balance flags name, each with the flag voting for it.
func explicitVotes(e workerv1.Engine, args []string) map[string]string {
	f := balanceFlags
	votes := map[string]string{}
	vote := func(shape string, names []string, how string) {
		if _, seen := votes[shape]; !seen && HasFlag(e, args, names...) {
			votes[shape] = lastSpelling(e, args, names) + how
		}
	}
	vote(workerv1.LoadBalanceExternal, f.externalLB, "")
	if HasFlag(e, args, f.startRank...) { // a rank beside a start rank is one rank of a hybrid group
		vote(workerv1.LoadBalanceHybrid, f.rank, " with "+lastSpelling(e, args, f.startRank))
	} else {
		vote(workerv1.LoadBalanceExternal, f.rank, "")
	}
	vote(workerv1.LoadBalanceHybrid, f.hybridLB, "")
	vote(workerv1.LoadBalanceMultiPort, f.multiPort, "")
	return votes
}

// implicitShape is the shape a start rank implies: this host's local ranks inside a larger group,
// one local rank External, several Hybrid; why says when the layout cannot be read.
func implicitShape(e workerv1.Engine, args []string, d workerv1.ParallelDegrees) (shape, flag, why string) {
	f := balanceFlags
	if !HasFlag(e, args, f.startRank...) {
		return "", "", ""
	}
	start, size := lastSpelling(e, args, f.startRank), ptrValue(d.DataParallel)
	if d.DataParallelLocal != nil {
		local := *d.DataParallelLocal
		if local <= 0 || local >= size {
			return "", "", ""
		}
		shape = workerv1.LoadBalanceExternal
		if local > 1 {
			shape = workerv1.LoadBalanceHybrid
		}
		return shape, fmt.Sprintf("%s with %s %d of %d", start, lastSpelling(e, args, f.local), local, size), ""
	}
	nnodes, set := FlagValue(e, args, f.nnodes...)
	n, err := strconv.Atoi(nnodes)
	switch {
	case set && (err != nil || n < 1), !set && size > 1:
		return "", "", fmt.Sprintf("nnodes must be a readable positive integer beside %s, got %q", start, nnodes)
	case n > 1:
		return "", "", fmt.Sprintf("%s over %d nodes requires an explicit data-parallel-size-local", start, n)
	}
	return "", "", ""
}

// ServesEveryMember reports whether every member of a role's replica serves HTTP on the serving
// port: a Server role whose data-parallel ranks are balanced outside the engine (External DP, or
// another non-Internal shape). Prefill and Decode roles stay leader-served (External DP inside them
// is not supported yet), and so do a take-over role (its replicas keep their legacy Service
// membership) and an Unknown shape.
func ServesEveryMember(e workerv1.Engine, role workerv1.ModelDeploymentRole) bool {
	if role.Kind != workerv1.RoleKindServer || role.TakesOver() {
		return false
	}
	switch ReadParallelism(e, role).LoadBalance {
	case workerv1.LoadBalanceExternal, workerv1.LoadBalanceHybrid, workerv1.LoadBalanceMultiPort:
		return true
	}
	return false
}

// argsEnd is where an engine stops reading options: a bare -- ends them.
func argsEnd(args []string) int {
	if i := slices.Index(args, "--"); i >= 0 {
		return i
	}
	return len(args)
}

func ptrInt32(n int32) *int32 { return &n }

func ptrValue(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}
