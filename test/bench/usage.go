package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// component names a program of the stack by its processes' command lines. Every program of the
// stack, host process or container on the real node, is a process of this machine, so its memory
// and CPU are read from /proc whichever way it runs.
type component struct {
	name    string
	matches func(argv []string) bool
}

// programs are the stack's programs whose CPU a phase prints, each a program a cluster runs (its
// control plane, a node's agents, the add-ons and mdplane's own processes), and the harness. The
// machine's two cores are shared by all of them, so what one phase costs the others is read here.
var programs = []component{
	{"kube-apiserver", named("kube-apiserver")},
	{"etcd", named("etcd")},
	{"kube-controller-manager", named("kube-controller-manager")},
	{"kube-scheduler", named("kube-scheduler")},
	{"kueue", named("kueue")},
	{"kwok", named("kwok")},
	{"mdplane-controllers", func(argv []string) bool {
		return filepath.Base(argv[0]) == "mdplane-controllers" && !slices.Contains(argv, "--enable-controllers=false")
	}},
	{"mdplane-webhooks", func(argv []string) bool {
		return filepath.Base(argv[0]) == "mdplane-controllers" && slices.Contains(argv, "--enable-controllers=false") &&
			!slices.Contains(argv, "--enable-webhooks=false")
	}},
	{"mdplane-api", func(argv []string) bool {
		return filepath.Base(argv[0]) == "mdplane-controllers" && slices.Contains(argv, "--enable-controllers=false") &&
			slices.Contains(argv, "--enable-webhooks=false")
	}},
	{"crossplane", func(argv []string) bool {
		return filepath.Base(argv[0]) == "crossplane" && len(argv) > 2 && argv[1] == "core" && argv[2] == "start"
	}},
	{"crossplane-rbac-manager", func(argv []string) bool {
		return filepath.Base(argv[0]) == "crossplane" && len(argv) > 1 && argv[1] == "rbac"
	}},
	{"composition functions", func(argv []string) bool { return filepath.Base(argv[0]) == "function" }},
	{"kubelet", named("kubelet")},
	{"containerd and its shims", named("containerd")},
	{"kube-proxy", named("kube-proxy")},
	{"coredns", named("coredns")},
	{"the harness", named("mdplane-bench")},
}

// compared are the programs whose memory a run prints side by side: mdplane-controllers (without the
// webhook and API replicas of the same binary), Kueue and Crossplane's core, which watch the same
// Pods and Workloads or the same composites.
var compared = []string{"mdplane-controllers", "kueue", "crossplane"}

// named matches a program whose executable's name starts with prefix (the stack's cached binaries
// carry their version after it).
func named(prefix string) func(argv []string) bool {
	return func(argv []string) bool { return strings.HasPrefix(filepath.Base(argv[0]), prefix) }
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times, 100 on Linux.
const clockTicks = 100

// processUsage is one process's peak resident memory and CPU time so far.
type processUsage struct {
	peakRSS uint64 // bytes, VmHWM
	cpu     time.Duration
}

// readProcess reads pid's command line, peak resident set and CPU time.
func readProcess(pid string) ([]string, processUsage, error) {
	raw, err := os.ReadFile("/proc/" + pid + "/cmdline")
	if err != nil || len(raw) == 0 {
		return nil, processUsage{}, fmt.Errorf("no command line: %v", err)
	}
	argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	var u processUsage
	status, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return nil, u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			u.peakRSS = kb * 1024
		}
	}
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, u, err
	}
	// The fields after the command's name, which may hold spaces, closed by the last ')'.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	if len(fields) > 12 {
		utime, _ := strconv.ParseUint(fields[11], 10, 64)
		stime, _ := strconv.ParseUint(fields[12], 10, 64)
		u.cpu = time.Duration(utime+stime) * time.Second / clockTicks
	}
	return argv, u, nil
}

// Usage samples the stack's programs' processes once a second: the highest peak resident set of
// one process of each (a second replica's, a standby's, is smaller), and the CPU time all of its
// processes spent since the sampling started. A process started between two samples is counted from
// its first.
type Usage struct {
	mu    sync.Mutex
	began time.Time
	start map[string]time.Duration // CPU time of each process, by component and pid, at its first sample
	now   map[string]time.Duration
	peak  map[string]uint64 // by component
	stop  chan struct{}
	done  chan struct{}
}

// StartUsage starts sampling.
func StartUsage() *Usage {
	u := &Usage{began: time.Now(), start: map[string]time.Duration{}, now: map[string]time.Duration{}, peak: map[string]uint64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	u.sample()
	go func() {
		defer close(u.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-u.stop:
				u.sample()
				return
			case <-tick.C:
				u.sample()
			}
		}
	}()
	return u
}

func (u *Usage) sample() {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, e := range entries {
		pid := e.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		argv, p, err := readProcess(pid)
		if err != nil {
			continue
		}
		for _, c := range programs {
			if !c.matches(argv) {
				continue
			}
			key := c.name + "/" + pid
			if _, seen := u.start[key]; !seen {
				u.start[key] = p.cpu
			}
			u.now[key] = p.cpu
			u.peak[c.name] = max(u.peak[c.name], p.peakRSS)
		}
	}
}

// ProgramCost is one program's peak resident memory and CPU time over a phase.
type ProgramCost struct {
	Name    string
	PeakRSS uint64
	CPU     time.Duration
}

// Costs is what a phase cost the stack's programs, in the order of programs, and how long it lasted.
type Costs struct {
	Elapsed  time.Duration
	Programs []ProgramCost
	// ClosedWatches are the watches the API server closed in the phase (WatchCloses); nil when
	// not counted.
	ClosedWatches ClosedWatches
}

// Stop ends the sampling and returns each program's cost.
func (u *Usage) Stop() Costs {
	close(u.stop)
	<-u.done
	u.mu.Lock()
	defer u.mu.Unlock()
	costs := Costs{Elapsed: time.Since(u.began), Programs: make([]ProgramCost, 0, len(programs))}
	for _, c := range programs {
		pc := ProgramCost{Name: c.name, PeakRSS: u.peak[c.name]}
		for key, cpu := range u.now {
			if strings.HasPrefix(key, c.name+"/") {
				pc.CPU += cpu - u.start[key]
			}
		}
		costs.Programs = append(costs.Programs, pc)
	}
	return costs
}

// program is the cost of the program of a name; zero when none was sampled.
func (c Costs) program(name string) ProgramCost {
	for _, p := range c.Programs {
		if p.Name == name {
			return p
		}
	}
	return ProgramCost{Name: name}
}

// cpu is the CPU time of every program together.
func (c Costs) cpu() time.Duration {
	var sum time.Duration
	for _, p := range c.Programs {
		sum += p.CPU
	}
	return sum
}

// PrintCosts prints the compared programs' peak memory and CPU.
func PrintCosts(out io.Writer, phase string, costs Costs) {
	fmt.Fprintf(out, "\nPeak resident memory of one process and CPU time of all its processes, %s:\n", phase)
	fmt.Fprintf(out, "  %-22s %14s %12s\n", "program", "peak memory", "CPU")
	for _, name := range compared {
		c := costs.program(name)
		fmt.Fprintf(out, "  %-22s %10.0f MiB %10.1f s\n", c.Name, float64(c.PeakRSS)/(1<<20), c.CPU.Seconds())
	}
}

// PhaseCosts names a phase's costs in the CPU table.
type PhaseCosts struct {
	Name  string
	Costs Costs
}

// PrintCPU prints each program's CPU time in each phase, and the cores all of them kept busy on
// average: a phase that keeps the machine's cores as busy as another but takes longer did more
// work, and the program whose CPU grew did it.
func PrintCPU(out io.Writer, phases []PhaseCosts) {
	fmt.Fprintln(out, "\nCPU time of each program of the stack, from each phase's first create to its last Pod Ready (mdplane's: to the deployment Ready):")
	header := fmt.Sprintf("  %-26s", "program")
	for _, p := range phases {
		header += fmt.Sprintf(" %16s", p.Name)
	}
	fmt.Fprintln(out, header)
	for _, prog := range programs {
		line := fmt.Sprintf("  %-26s", prog.name)
		for _, p := range phases {
			line += fmt.Sprintf(" %14.1f s", p.Costs.program(prog.name).CPU.Seconds())
		}
		fmt.Fprintln(out, line)
	}
	all, elapsed, cores := fmt.Sprintf("  %-26s", "all"), fmt.Sprintf("  %-26s", "the phase lasted"), fmt.Sprintf("  %-26s", "cores busy on average")
	for _, p := range phases {
		all += fmt.Sprintf(" %14.1f s", p.Costs.cpu().Seconds())
		elapsed += fmt.Sprintf(" %14.1f s", p.Costs.Elapsed.Seconds())
		busy := 0.0
		if p.Costs.Elapsed > 0 {
			busy = p.Costs.cpu().Seconds() / p.Costs.Elapsed.Seconds()
		}
		cores += fmt.Sprintf(" %16.2f", busy)
	}
	fmt.Fprintln(out, all)
	fmt.Fprintln(out, elapsed)
	fmt.Fprintln(out, cores)
	resources := closedResources(phases)
	if len(resources) == 0 {
		return
	}
	fmt.Fprintln(out, "  watches the API server closed, their client too slow to take the events:")
	for _, resource := range resources {
		line := fmt.Sprintf("    %-24s", resource)
		for _, p := range phases {
			if p.Costs.ClosedWatches == nil {
				line += fmt.Sprintf(" %16s", "-")
				continue
			}
			line += fmt.Sprintf(" %16d", p.Costs.ClosedWatches[resource])
		}
		fmt.Fprintln(out, line)
	}
}

// MemoryTarget is the target that mdplane-controllers' peak memory stays within Kueue's.
func MemoryTarget(costs Costs) Target {
	md, kueue := costs.program("mdplane-controllers").PeakRSS, costs.program("kueue").PeakRSS
	t := Target{Name: "mdplane-controllers' peak memory / Kueue's", AtMost: 1, Unit: "×"}
	if md > 0 && kueue > 0 {
		t.Got = float64(md) / float64(kueue)
		t.Figure = fmt.Sprintf("%.0f MiB / %.0f MiB", float64(md)/(1<<20), float64(kueue)/(1<<20))
	}
	return t
}
