package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mdplane/mdplane/test/cluster"
)

// profiledComponents are mdplane's processes whose profiles a run takes.
var profiledComponents = []string{"mdplane-controllers", "mdplane-webhooks", "mdplane-function-render-roles", "mdplane-function-kv-cache"}

// Profiles are the CPU and heap profiles of mdplane's processes taken during a phase, and a count of
// their goroutines by stack halfway through it; each of the webhooks' replicas is profiled, since
// the API server's calls reach them unevenly.
type Profiles struct {
	stack   *cluster.Stack
	dir     string
	targets []profiled
	wg      sync.WaitGroup
	mu      sync.Mutex
	files   map[string]string // "<name> cpu|heap|goroutine" → file
	errs    []string
}

// profiled is one process to profile: its component, a name naming its replica when the
// component has several, and its profiling endpoint.
type profiled struct{ component, name, address string }

// StartProfiles starts a CPU profile of each of mdplane's processes over the next cpu, and takes
// their goroutines at half of it, written under dir; the stack must have been started with
// Options.Profile.
func StartProfiles(ctx context.Context, stack *cluster.Stack, dir string, cpu time.Duration) *Profiles {
	p := &Profiles{stack: stack, dir: dir, files: map[string]string{}}
	for _, c := range profiledComponents {
		replicas := stack.ProfileAddresses(c)
		for replica, address := range replicas {
			name := c
			if len(replicas) > 1 {
				name = replica
			}
			p.targets = append(p.targets, profiled{component: c, name: name, address: address})
		}
	}
	for _, t := range p.targets {
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			p.fetch(ctx, t, "cpu", fmt.Sprintf("profile?seconds=%d", int(cpu.Seconds())))
		}()
		// Where the goroutines wait halfway through: what a CPU profile cannot show, a request
		// that takes long while the process is idle.
		go func() {
			defer p.wg.Done()
			select {
			case <-time.After(cpu / 2):
				p.fetch(ctx, t, "goroutine", "goroutine?debug=1")
			case <-ctx.Done():
			}
		}()
	}
	return p
}

// Finish waits for the CPU profiles and takes a heap profile of each process.
func (p *Profiles) Finish(ctx context.Context) {
	p.wg.Wait()
	for _, t := range p.targets {
		p.fetch(ctx, t, "heap", "heap")
	}
}

func (p *Profiles) fetch(ctx context.Context, t profiled, kind, path string) {
	file := filepath.Join(p.dir, t.name+"."+kind+".pprof")
	raw, err := httpGet(ctx, "http://"+t.address+"/debug/pprof/"+path)
	if err == nil {
		err = os.WriteFile(file, raw, 0o644)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs = append(p.errs, fmt.Sprintf("%s %s profile: %v", t.name, kind, err))
		return
	}
	p.files[t.name+" "+kind] = file
}

// Print writes the top functions of each CPU and heap profile, by cumulative share, as `go tool pprof
// -top` reads them, and the goroutines' commonest stacks.
func (p *Profiles) Print(out io.Writer, lines int) {
	keys := make([]string, 0, len(p.files))
	for k := range p.files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name, kind, _ := strings.Cut(k, " ")
		if kind == "goroutine" {
			printGoroutines(out, k, p.files[k], lines)
			continue
		}
		args := []string{"tool", "pprof", "-top", "-cum", fmt.Sprintf("-nodecount=%d", lines)}
		if strings.HasSuffix(k, "heap") {
			args = append(args, "-sample_index=inuse_space")
		}
		// A process of the stack's is named with its profile; a Pod's profile carries its symbols.
		if program := p.stack.Program(p.componentOf(name)); program != "" {
			args = append(args, program)
		}
		raw, err := exec.Command("go", append(args, p.files[k])...).CombinedOutput()
		fmt.Fprintf(out, "\n  %s profile (%s):\n", k, p.files[k])
		if err != nil {
			fmt.Fprintf(out, "    go tool pprof: %v\n", err)
		}
		for _, line := range strings.Split(strings.TrimRight(string(raw), "\n"), "\n") {
			fmt.Fprintf(out, "    %s\n", line)
		}
	}
	for _, e := range p.errs {
		fmt.Fprintf(out, "  %s\n", e)
	}
}

// componentOf is the component of the process profiled under name.
func (p *Profiles) componentOf(name string) string {
	for _, t := range p.targets {
		if t.name == name {
			return t.component
		}
	}
	return name
}

// printGoroutines writes the commonest stacks of a goroutine dump (debug=1: blocks of "N @ pcs"
// followed by "#\tpc\tfunction+offset\tfile:line", the largest N first), each as its count and
// its innermost functions.
func printGoroutines(out io.Writer, title, file string, stacks int) {
	fmt.Fprintf(out, "\n  %s, the commonest stacks (%s):\n", title, file)
	raw, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintf(out, "    %v\n", err)
		return
	}
	const frames = 8
	header, body, _ := strings.Cut(string(raw), "\n") // "goroutine profile: total N"
	fmt.Fprintf(out, "    %s\n", header)
	for i, block := range strings.Split(body, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		count, _, ok := strings.Cut(lines[0], " @ ")
		if i == stacks || !ok {
			break
		}
		var funcs []string
		for _, l := range lines[1:] {
			if fields := strings.Fields(l); len(fields) >= 3 && fields[0] == "#" && len(funcs) < frames {
				name, _, _ := strings.Cut(fields[2], "+0x")
				funcs = append(funcs, name)
			}
		}
		fmt.Fprintf(out, "    %5s  %s\n", count, strings.Join(funcs, " < "))
	}
}
