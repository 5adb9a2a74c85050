package bench

import (
	"strings"
	"testing"
	"time"
)

// Each process of the stack is counted under the program it is, and mdplane's one binary under the
// part each of its Deployments runs.
func TestProgramsNameEachProcessOfTheStack(t *testing.T) {
	for _, tc := range []struct {
		rule, want string
		argv       []string
	}{
		{"a cached binary carries its version after its name", "kube-controller-manager",
			[]string{"/root/.cache/mdplane/bin/kube-controller-manager-v1.35.3", "--controllers=garbagecollector"}},
		{"the API server", "kube-apiserver", []string{"/tmp/stack/assets/kube-apiserver", "--audit-log-format=json"}},
		{"the controllers run every controller", "mdplane-controllers",
			[]string{"/mdplane-controllers", "--enable-webhooks=false", "--leader-elect"}},
		{"near miss: the same binary without controllers serves the webhooks", "mdplane-webhooks",
			[]string{"/mdplane-controllers", "--enable-controllers=false", "--webhook-service=mdplane-webhook"}},
		{"near miss: without controllers or webhooks it serves the metrics API", "mdplane-api",
			[]string{"/mdplane-controllers", "--enable-webhooks=false", "--enable-controllers=false", "--metrics-api-bind-address=:6443"}},
		{"Crossplane's core", "crossplane", []string{"/bin/crossplane", "core", "start", "--poll-interval=1m0s"}},
		{"near miss: Crossplane's RBAC manager is the same binary", "crossplane-rbac-manager",
			[]string{"/bin/crossplane", "rbac", "start"}},
		{"a composition function", "composition functions", []string{"/function"}},
		{"a container's shim counts with containerd", "containerd and its shims",
			[]string{"/root/.cache/mdplane/bin/containerd-shim-runc-v2-v2.2.9", "-namespace", "k8s.io"}},
		{"the harness", "the harness", []string{"/tmp/go-build1/b001/exe/mdplane-bench-scale", "--changes=false"}},
		{"near miss: a process of none of them", "", []string{"/pause"}},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			var got []string
			for _, p := range programs {
				if p.matches(tc.argv) {
					got = append(got, p.name)
				}
			}
			if strings.Join(got, ",") != tc.want {
				t.Errorf("%v is counted as %q, want %q", tc.argv, got, tc.want)
			}
		})
	}
}

// The CPU table prints each program's seconds in each phase, their sum, and the cores the phase kept
// busy on average.
func TestPrintCPUPrintsTheCoresEachPhaseKeptBusy(t *testing.T) {
	phase := func(elapsed, apiserver, kueue time.Duration) Costs {
		return Costs{Elapsed: elapsed, Programs: []ProgramCost{{Name: "kube-apiserver", CPU: apiserver}, {Name: "kueue", CPU: kueue}}}
	}
	var out strings.Builder
	PrintCPU(&out, []PhaseCosts{
		{Name: "mdplane", Costs: phase(100*time.Second, 120*time.Second, 60*time.Second)},
		{Name: "joint floor", Costs: phase(50*time.Second, 50*time.Second, 40*time.Second)},
	})
	lines := map[string]bool{}
	for line := range strings.Lines(out.String()) {
		lines[strings.Join(strings.Fields(line), " ")] = true
	}
	for _, want := range []string{
		"kube-apiserver 120.0 s 50.0 s",
		"etcd 0.0 s 0.0 s",
		"all 180.0 s 90.0 s",
		"the phase lasted 100.0 s 50.0 s",
		"cores busy on average 1.80 1.80",
	} {
		if !lines[want] {
			t.Errorf("no line %q in:\n%s", want, out.String())
		}
	}
}
