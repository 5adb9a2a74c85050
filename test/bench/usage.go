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

// compared are the programs whose cost a run prints side by side: mdplane-controllers (without the
// webhook and API replicas of the same binary), Kueue and Crossplane's core, which watch the same
// Pods and Workloads or the same composites.
var compared = []component{
	{"mdplane-controllers", func(argv []string) bool {
		return filepath.Base(argv[0]) == "mdplane-controllers" && !slices.Contains(argv, "--enable-controllers=false")
	}},
	{"kueue", func(argv []string) bool { return strings.HasPrefix(filepath.Base(argv[0]), "kueue") }},
	{"crossplane", func(argv []string) bool {
		return filepath.Base(argv[0]) == "crossplane" && len(argv) > 2 && argv[1] == "core" && argv[2] == "start"
	}},
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

// Usage samples the compared programs' processes once a second: the highest peak resident set of
// one process of each (a second replica's, a standby's, is smaller), and the CPU time all of its
// processes spent since the sampling started.
type Usage struct {
	mu    sync.Mutex
	start map[string]time.Duration // CPU time of each process, by component and pid, at its first sample
	now   map[string]time.Duration
	peak  map[string]uint64 // by component
	stop  chan struct{}
	done  chan struct{}
}

// StartUsage starts sampling.
func StartUsage() *Usage {
	u := &Usage{start: map[string]time.Duration{}, now: map[string]time.Duration{}, peak: map[string]uint64{},
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
		for _, c := range compared {
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

// Stop ends the sampling and returns each program's cost, in the order of compared.
func (u *Usage) Stop() []ProgramCost {
	close(u.stop)
	<-u.done
	u.mu.Lock()
	defer u.mu.Unlock()
	costs := make([]ProgramCost, 0, len(compared))
	for _, c := range compared {
		pc := ProgramCost{Name: c.name, PeakRSS: u.peak[c.name]}
		for key, cpu := range u.now {
			if strings.HasPrefix(key, c.name+"/") {
				pc.CPU += cpu - u.start[key]
			}
		}
		costs = append(costs, pc)
	}
	return costs
}

// PrintCosts prints the programs' costs.
func PrintCosts(out io.Writer, phase string, costs []ProgramCost) {
	fmt.Fprintf(out, "\nPeak resident memory of one process and CPU time of all its processes, %s:\n", phase)
	fmt.Fprintf(out, "  %-22s %14s %12s\n", "program", "peak memory", "CPU")
	for _, c := range costs {
		fmt.Fprintf(out, "  %-22s %10.0f MiB %10.1f s\n", c.Name, float64(c.PeakRSS)/(1<<20), c.CPU.Seconds())
	}
}

// MemoryTarget is the target that mdplane-controllers' peak memory stays within Kueue's.
func MemoryTarget(costs []ProgramCost) Target {
	var md, kueue uint64
	for _, c := range costs {
		switch c.Name {
		case "mdplane-controllers":
			md = c.PeakRSS
		case "kueue":
			kueue = c.PeakRSS
		}
	}
	t := Target{Name: "mdplane-controllers' peak memory / Kueue's", AtMost: 1, Unit: "×"}
	if md > 0 && kueue > 0 {
		t.Got = float64(md) / float64(kueue)
		t.Figure = fmt.Sprintf("%.0f MiB / %.0f MiB", float64(md)/(1<<20), float64(kueue)/(1<<20))
	}
	return t
}
