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
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Minute)
	var err error
	stack, err = cluster.Start(ctx, cluster.Options{
		// MDPLANE_E2E_AUDIT=1 keeps an audit log of every write (logs/audit.log in the stack's
		// directory, kept when a test fails): who wrote what, when, to diagnose a failure.
		Audit:                  os.Getenv("MDPLANE_E2E_AUDIT") != "",
		CrossplanePollInterval: 5 * time.Second,
		// Room for the parallel tests' peaks at once (make test runs E2E_PARALLEL of them): each
		// holds at most 9 GPUs and most 2 to 4; the nodes alternate A10G and H20, 8 GPUs each.
		Nodes: 10,
		// Short enough for a test to watch a set being parked, long enough for the others to finish
		// holding a set on purpose.
		// mdplane manages the queues of every InstanceType, as on a real cluster, except those a test
		// labels ownQueuesLabel: the types of examples/cluster.yaml and the tests' CPU types, whose
		// tests make their own queues with the quotas they need.
		// A ModelArtifact the hub refused is asked again after artifactRetry rather than 5 minutes, so
		// a test can watch a rollout resume once the hub learns the repository.
		ControllerArgs: []string{"--park-after=" + parkAfter.String(), "--queue-instance-types=" + ownQueuesLabel + "!=true",
			"--model-artifact-retry-interval=" + artifactRetry.String()},
		Log: func(format string, args ...any) { fmt.Printf("e2e stack: "+format+"\n", args...) },
	})
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
	fmt.Println(groupsSummary())
	if proven.claims != nil {
		fmt.Println(conformanceSummary())
	}
	// The controllers and webhooks run with their install manifest's RBAC, Crossplane and its RBAC
	// manager with their chart's and mdplane's package's, Kueue with its own manifests': an RBAC
	// refusal anywhere in the suite is a rule an install lacks.
	// Every replica and restart counts (mdplane-controllers-standby-3, mdplane-webhooks-1, ...).
	for _, component := range []string{"mdplane-controllers", "mdplane-webhooks", "crossplane", "crossplane-rbac-manager", "kueue"} {
		logs, _ := filepath.Glob(strings.TrimSuffix(stack.LogFile(component), ".log") + "*.log")
		for _, log := range logs {
			if refused := forbidden(log); refused != "" {
				fmt.Fprintf(os.Stderr, "e2e: %s was refused by RBAC: %s\n", filepath.Base(log), refused)
				code = 1
			}
		}
	}
	// Last, the suite removes mdplane as the page says; the stack goes with it.
	if code == 0 {
		uninstallCtx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		if err := uninstallAsDocumented(uninstallCtx); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: uninstalling as docs/install.md says:", err)
			code = 1
		} else {
			fmt.Println("e2e: uninstalled as docs/install.md says; nothing of mdplane is left")
		}
		cancel()
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
