package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mdplane/mdplane/test/cluster"
)

// profiled are mdplane's processes whose profiles a run takes.
var profiled = []string{"mdplane-controllers", "mdplane-webhooks", "mdplane-function-render-roles", "mdplane-function-kv-cache"}

// Profiles are the CPU and heap profiles of mdplane's processes taken during a phase.
type Profiles struct {
	stack *cluster.Stack
	dir   string
	wg    sync.WaitGroup
	mu    sync.Mutex
	files map[string]string // "<component> cpu|heap" → file
	errs  []string
}

// StartProfiles starts a CPU profile of each of mdplane's processes over the next cpu, written under
// dir; the stack must have been started with Options.Profile.
func StartProfiles(ctx context.Context, stack *cluster.Stack, dir string, cpu time.Duration) *Profiles {
	p := &Profiles{stack: stack, dir: dir, files: map[string]string{}}
	for _, c := range profiled {
		if stack.ProfileAddress(c) == "" {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.fetch(ctx, c, "cpu", fmt.Sprintf("profile?seconds=%d", int(cpu.Seconds())))
		}()
	}
	return p
}

// Finish waits for the CPU profiles and takes a heap profile of each process.
func (p *Profiles) Finish(ctx context.Context) {
	p.wg.Wait()
	for _, c := range profiled {
		if p.stack.ProfileAddress(c) != "" {
			p.fetch(ctx, c, "heap", "heap")
		}
	}
}

func (p *Profiles) fetch(ctx context.Context, component, kind, path string) {
	file := filepath.Join(p.dir, component+"."+kind+".pprof")
	err := func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.stack.ProfileAddress(component)+"/debug/pprof/"+path, nil)
		if err != nil {
			return err
		}
		rsp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer rsp.Body.Close()
		if rsp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", rsp.Status)
		}
		f, err := os.Create(file)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(f, rsp.Body)
		return err
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.errs = append(p.errs, fmt.Sprintf("%s %s profile: %v", component, kind, err))
		return
	}
	p.files[component+" "+kind] = file
}

// Print writes the top functions of each profile, by cumulative share, as `go tool pprof -top`
// reads them.
func (p *Profiles) Print(out io.Writer, lines int) {
	keys := make([]string, 0, len(p.files))
	for k := range p.files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		component, _, _ := strings.Cut(k, " ")
		args := []string{"tool", "pprof", "-top", "-cum", fmt.Sprintf("-nodecount=%d", lines)}
		if strings.HasSuffix(k, "heap") {
			args = append(args, "-sample_index=inuse_space")
		}
		// A process of the stack's is named with its profile; a Pod's profile carries its symbols.
		if program := p.stack.Program(component); program != "" {
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
