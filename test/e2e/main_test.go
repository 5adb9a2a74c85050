// Package e2e runs mdplane against the real control plane of package cluster: Crossplane composing
// through the real functions, Kueue admitting, the scheduler binding, KWOK running the Pods.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mdplane/mdplane/test/cluster"
)

// stack is shared by every test of the package: starting it costs seconds, building it minutes.
var stack *cluster.Stack

func TestMain(m *testing.M) {
	if os.Getenv("MDPLANE_SKIP_E2E") != "" {
		fmt.Println("e2e: skipped (MDPLANE_SKIP_E2E is set)")
		os.Exit(0)
	}
	// make conformance: the conformance tests alone, against a platform team's cluster.
	if kubeconfig := os.Getenv("MDPLANE_CONFORMANCE_KUBECONFIG"); kubeconfig != "" {
		os.Exit(runConformance(m, kubeconfig))
	}
	// make test-e2e-on-stack: the tests asked for, against a running stack of make cluster-up's.
	if dir := os.Getenv("MDPLANE_E2E_STACK"); dir != "" {
		os.Exit(runOnStack(m, dir))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	opts := cluster.SuiteOptions()
	// MDPLANE_E2E_AUDIT=1 keeps an audit log of every write (logs/audit.log in the stack's directory,
	// kept when a test fails): who wrote what, when, to diagnose a failure.
	opts.Audit = os.Getenv("MDPLANE_E2E_AUDIT") != ""
	opts.Log = func(format string, args ...any) { fmt.Printf("e2e stack: "+format+"\n", args...) }
	var err error
	started := time.Now()
	stack, err = cluster.Start(ctx, opts)
	stackStart := time.Since(started)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot start the stack:", err)
		os.Exit(1)
	}
	// The conformance tests reach the stack only as any cluster is reached: through its kubeconfig.
	if target, err = stack.Attach(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: cannot reach the stack through its kubeconfig:", err)
		stack.Stop()
		os.Exit(1)
	}
	code := m.Run()
	summarize(groupsSummary())
	if proven.claims != nil {
		summarize(conformanceSummary())
	}
	// The controllers, webhooks and API run with their install manifest's RBAC, Crossplane and its RBAC
	// manager with their chart's and mdplane's package's, Kueue with its own manifests': an RBAC
	// refusal anywhere in the suite is a rule an install lacks.
	// Every replica and restart counts (mdplane-controllers-standby-3, mdplane-webhooks-1, ...).
	for _, component := range []string{"mdplane-controllers", "mdplane-webhooks", "mdplane-api", "crossplane", "crossplane-rbac-manager", "kueue"} {
		logs, _ := filepath.Glob(strings.TrimSuffix(stack.LogFile(component), ".log") + "*.log")
		for _, log := range logs {
			if refused := forbidden(log); refused != "" {
				fmt.Fprintf(os.Stderr, "e2e: %s was refused by RBAC: %s\n", filepath.Base(log), refused)
				code = 1
			}
		}
	}
	// Last, the suite removes mdplane as the page says; the stack goes with it.
	var uninstall time.Duration
	if code == 0 {
		uninstallCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		started := time.Now()
		err := uninstallAsDocumented(uninstallCtx)
		uninstall = time.Since(started)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e: uninstalling as docs/install.md says:", err)
			code = 1
		} else {
			fmt.Println("e2e: uninstalled as docs/install.md says; nothing of mdplane is left")
		}
		cancel()
	}
	summarize(timingSummary(stackStart, uninstall))
	if file := os.Getenv("MDPLANE_E2E_TIMES"); file != "" {
		_ = os.WriteFile(file, []byte(testTimes()), 0o644)
	}
	if code != 0 {
		fmt.Printf("e2e: component logs kept in %s/logs\n", stack.Dir)
	}
	stack.Stop()
	// The real node puts the machine back as it found it: CI's next run starts on this machine.
	for _, left := range stack.Leftovers() {
		fmt.Fprintln(os.Stderr, "e2e: the stack's real node left on this machine:", left)
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(stack.Dir)
	}
	os.Exit(code)
}

// runOnStack is TestMain on a stack another process runs (make cluster-up STACK_ARGS=--e2e): no
// stack is started or stopped, and the tests that need one of the suite's own skip, saying why.
func runOnStack(m *testing.M, dir string) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if stack, err = cluster.Reattach(ctx, dir); err == nil {
		err = stack.RunsWith(cluster.SuiteOptions())
	}
	if err == nil {
		target, err = stack.Attach()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\nthe suite attaches to a stack started with make cluster-up STACK_ARGS=--e2e\n", err)
		return 1
	}
	fmt.Printf("e2e: on the stack in %s; tests of the sequential group, and those that need the suite's own stack, skip\n", dir)
	code := m.Run()
	fmt.Println(groupsSummary())
	return code
}

// summarize prints a line of the suite's summary, and appends it to the file MDPLANE_E2E_SUMMARY
// names, if any: go test shows a passing package's output only with -v, so make test prints the
// file after the test module's run.
func summarize(line string) {
	fmt.Println(line)
	if file := os.Getenv("MDPLANE_E2E_SUMMARY"); file != "" {
		f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = fmt.Fprintln(f, line)
			_ = f.Close()
		}
	}
}

// forbidden is the first line of a log that reports an RBAC refusal, if any: the API server's
// message names the user refused ("is forbidden: User \"…\" cannot …"), which an admission
// refusal (Pod Security, a policy) does not.
func forbidden(log string) string {
	raw, err := os.ReadFile(log)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(line, `is forbidden: User \"`) || strings.Contains(line, `is forbidden: User "`) {
			return line
		}
	}
	return ""
}
