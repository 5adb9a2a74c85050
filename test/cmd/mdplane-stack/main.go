// Command mdplane-stack starts the test control plane (see package cluster) and keeps it running
// until it receives SIGINT or SIGTERM, then stops everything it started and puts back what its
// real node changed on the machine. `make cluster-up` runs it in the background; `make
// cluster-down` signals it, then runs it with --put-back in case it died without stopping.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/mdplane/mdplane/test/cluster"
)

func main() {
	dir := flag.String("dir", ".stack", "state directory: kubeconfig, logs, pids")
	nodes := flag.Int("nodes", 2, "fake GPU nodes")
	e2e := flag.Bool("e2e", false, "run as the e2e suite's stack (its fake nodes, Crossplane poll and controller flags), for make test-e2e-on-stack; -nodes is then the suite's")
	putBack := flag.Bool("put-back", false, "start nothing: remove what the real node of a stack that died without stopping left on this machine, and put its settings back")
	flag.Parse()
	if *putBack {
		if err := cluster.PutBackHost(context.Background(), func(format string, args ...any) { fmt.Printf(format+"\n", args...) }); err != nil {
			fmt.Fprintln(os.Stderr, "mdplane-stack:", err)
			os.Exit(1)
		}
		return
	}
	opts := cluster.Options{Nodes: *nodes}
	if *e2e {
		opts = cluster.SuiteOptions()
	}
	if err := run(*dir, opts); err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-stack:", err)
		os.Exit(1)
	}
}

func run(dir string, opts cluster.Options) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, "pids"))
	_ = os.Remove(filepath.Join(dir, "ready"))
	if err := os.WriteFile(filepath.Join(dir, "stack.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts.Dir = dir
	opts.Log = func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	s, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		s.Stop()
		for _, l := range s.Leftovers() {
			fmt.Println("left on this machine:", l)
		}
	}()
	fmt.Printf("local model hub at %s (empty; point the Setting model-artifact-huggingface-endpoint at it)\n", s.HubURL)
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte(s.Kubeconfig+"\n"), 0o644); err != nil {
		return err
	}
	<-ctx.Done()
	fmt.Println("stopping")
	return nil
}
