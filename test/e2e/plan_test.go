package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/plan"
)

// TestPlanPredictsTheRollout: `mdplane plan -f edited.yaml` against the stack says what each edit
// will do before it is applied, and the rollout controller then does that: a scale-up creates the
// ordinals the plan named and replaces nothing; an edit the webhook refuses makes the plan exit 1
// with the webhook's own refusal; a rolling edit replaces the replicas in the plan's order; an edit
// the queue has no quota for is predicted to wait, and does (one replica retired, its replacement
// queued, the rest serving); a newer edit's plan puts that queued replacement first, and the
// controller replaces it first.
func TestPlanPredictsTheRollout(t *testing.T) {
	parallelLong(t)
	ctx := context.Background()
	cli, err := stack.CLI()
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(ns, name string, replicas, gpus int, maxLen string) string {
		m := deploymentOnH20(ns, name, fmt.Sprintf("server Server %d %d", replicas, gpus))
		if maxLen != "" {
			m = strings.TrimSuffix(m, "}\n") + fmt.Sprintf(", extraArgs: [--max-model-len, %q]}\n", maxLen)
		}
		return m
	}

	t.Run("a scale-up creates the planned ordinals and replaces nothing", func(t *testing.T) {
		ns := ownName(t, "ns")
		const name = "scaled"
		runOnH20(t, ctx, ns, "plan-scale", 8, name, 2, manifest(ns, name, 2, 1, ""))
		before, err := standing(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		edited := manifest(ns, name, 4, 1, "")
		p := planOf(t, cli, edited)
		role := p.Roles[0]
		if role.Action != plan.ActionScales || !slices.Equal(role.Created, []int32{2, 3}) || len(role.Order) != 0 ||
			role.Quota.ScaleUpWaits == nil || *role.Quota.ScaleUpWaits {
			t.Fatalf("plan: %s; want the role to scale, creating r2 and r3, replacing none, within quota", show(role))
		}
		kubectlApply(t, edited)
		eventually(t, 2*time.Minute, "four replicas running", func() error { return running(ctx, ns, name, 4) })
		after, err := standing(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		for ordinal, p := range before {
			if after[ordinal].UID != p.UID {
				t.Errorf("r%s was replaced (Pod %s → %s); the plan said nothing is", ordinal, p.Name, after[ordinal].Name)
			}
		}

		// A refused edit: the plan exits 1 with the refusal the cluster's webhook then gives.
		refused := strings.Replace(edited, "name: "+name+", namespace: "+ns+"}",
			"name: "+name+", namespace: "+ns+", annotations: {"+workerv1.AnnotationRolloutCadence+": capacity}}", 1)
		out, code := runPlanStatus(t, cli, refused)
		want := `metadata.annotations[modeldeployment.gpustack.ai/rollout-cadence]: Unsupported value: "capacity"`
		if code != 1 || !strings.Contains(out, want) {
			t.Fatalf("mdplane plan exited %d saying:\n%s\nwant exit 1 and %q", code, out, want)
		}
		if applied := applyRefused(t, refused); !strings.Contains(applied, want) {
			t.Fatalf("the webhook said:\n%s\nwant what the plan said: %q", applied, want)
		}
	})

	t.Run("a rolling edit replaces the replicas in the planned order", func(t *testing.T) {
		ns := ownName(t, "ns")
		const name = "edited"
		runOnH20(t, ctx, ns, "plan-edit", 8, name, 3, manifest(ns, name, 3, 1, ""))
		edited := manifest(ns, name, 3, 1, "8192")
		table := planTable(t, cli, edited)
		fmt.Printf("e2e mdplane plan -f edited.yaml (against the stack):\n%s\n", table)
		p := planOf(t, cli, edited)
		role := p.Roles[0]
		if role.Action != plan.ActionRolls || role.Quota.WaitsForCapacity == nil || *role.Quota.WaitsForCapacity ||
			!slices.Contains(role.PodChanges.Args.Added, "--max-model-len 8192") {
			t.Fatalf("plan: %s; want the role to roll within quota, adding --max-model-len 8192", show(role))
		}
		departed := departures(t, ctx, ns, name, func() { kubectlApply(t, edited) }, func() error {
			return runningWith(ctx, ns, name, 3, "--max-model-len 8192")
		})
		if !slices.Equal(departed, role.Order) {
			t.Fatalf("the controller replaced %v; the plan said %v", departed, role.Order)
		}
	})

	t.Run("an edit beyond the free quota waits and a newer edit replaces the queued replacement first", func(t *testing.T) {
		ns := ownName(t, "ns")
		const name = "full"
		runOnH20(t, ctx, ns, "plan-quota", 3, name, 3, manifest(ns, name, 3, 1, ""))
		// The plan reads the free quota off the ClusterQueue's status, which Kueue writes a moment
		// after it admits.
		eventually(t, time.Minute, "the queue reporting its three cards reserved", func() error {
			return queueReserves(ctx, "plan-quota", "nvidia.com/gpu", "3")
		})
		wider := manifest(ns, name, 3, 2, "")
		p := planOf(t, cli, wider)
		role := p.Roles[0]
		if role.Action != plan.ActionRolls || role.Quota.WaitsForCapacity == nil || !*role.Quota.WaitsForCapacity || len(role.Order) == 0 {
			t.Fatalf("plan: %s; want the role to roll and wait for capacity", show(role))
		}
		first := role.Order[0]
		kubectlApply(t, wider)
		eventually(t, 2*time.Minute, fmt.Sprintf("r%d retired and its replacement queued, the others serving", first), func() error {
			ps, err := pods(ctx, ns, name)
			if err != nil {
				return err
			}
			var queued, serving []string
			for i := range ps {
				switch ordinal := ps[i].Labels[workerv1.LabelPodOrdinal]; {
				case ps[i].DeletionTimestamp != nil:
				case gated(&ps[i]):
					queued = append(queued, ordinal)
				default:
					serving = append(serving, ordinal)
				}
			}
			if !slices.Equal(queued, []string{strconv.Itoa(int(first))}) || len(serving) != 2 {
				return fmt.Errorf("queued %v, serving %v", queued, serving)
			}
			return nil
		})
		time.Sleep(5 * time.Second) // and it stays so: the rollout waits for capacity
		if err := running(ctx, ns, name, 3); err == nil {
			t.Fatal("three replicas running on a queue holding the quota of two of them")
		}

		// The newest edit goes back to one card: the plan must take the queued replacement first.
		newest := manifest(ns, name, 3, 1, "4096")
		p = planOf(t, cli, newest)
		role = p.Roles[0]
		if role.Action != plan.ActionRolls || len(role.Order) != 3 || role.Order[0] != first || role.Quota.WaitsForCapacity == nil || *role.Quota.WaitsForCapacity {
			t.Fatalf("plan: %s; want all three replaced, the queued r%d first, within quota", show(role), first)
		}
		departed := departures(t, ctx, ns, name, func() { kubectlApply(t, newest) }, func() error {
			return runningWith(ctx, ns, name, 3, "--max-model-len 4096")
		})
		if !slices.Equal(departed, role.Order) {
			t.Fatalf("the controller replaced %v; the plan said %v", departed, role.Order)
		}
	})
}

// planOf runs `mdplane plan -o json` on an edited manifest against the stack and decodes the plan;
// the command must exit 0 (admitted).
func planOf(t *testing.T, cli, manifest string) plan.Plan {
	t.Helper()
	out := runPlan(t, cli, manifest, "-o", "json")
	var p plan.Plan
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("mdplane plan -o json printed no plan: %v\n%s", err, out)
	}
	if !p.Admitted || p.Offline || len(p.Roles) != 1 {
		t.Fatalf("plan admitted %v, offline %v, %d roles; want an admitted plan of one role read from the cluster:\n%s", p.Admitted, p.Offline, len(p.Roles), out)
	}
	return p
}

// planTable runs `mdplane plan` (the table) on an edited manifest against the stack.
func planTable(t *testing.T, cli, manifest string) string {
	t.Helper()
	return runPlan(t, cli, manifest)
}

// runPlan runs `mdplane plan` on an edited manifest against the stack and returns what it printed
// on stdout; it must exit 0.
func runPlan(t *testing.T, cli, manifest string, args ...string) string {
	t.Helper()
	stdout, stderr, err := execPlan(t, cli, manifest, args...)
	if err != nil {
		t.Fatalf("mdplane plan: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	return stdout
}

// runPlanStatus runs `mdplane plan` and returns what it printed on stderr and its exit code.
func runPlanStatus(t *testing.T, cli, manifest string, args ...string) (string, int) {
	t.Helper()
	_, stderr, err := execPlan(t, cli, manifest, args...)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return stderr, 0
	case errors.As(err, &exit):
		return stderr, exit.ExitCode()
	}
	t.Fatalf("mdplane plan: %v", err)
	return "", -1
}

func execPlan(t *testing.T, cli, manifest string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "edited.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(cli, append([]string{"plan", "-f", f, "--kubeconfig", stack.Kubeconfig}, args...)...)
	var errs strings.Builder
	cmd.Stderr = &errs
	out, err := cmd.Output()
	return string(out), errs.String(), err
}

// departures applies an edit and returns the ordinals whose standing replica left, in the order
// they left, once every Pod standing before has left and done reports the rollout finished.
func departures(t *testing.T, ctx context.Context, namespace, name string, apply func(), done func() error) []int32 {
	t.Helper()
	initial, w := watchPods(t, ctx, namespace, name)
	defer w.Stop()
	before := map[string]bool{}
	for _, p := range initial.Items {
		if p.DeletionTimestamp == nil {
			before[p.Name] = true
		}
	}
	apply()
	var order []int32
	left := map[string]bool{}
	deadline := time.After(5 * time.Minute)
	for len(left) < len(before) || done() != nil {
		select {
		case ev := <-w.ResultChan():
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || !before[p.Name] || left[p.Name] || (ev.Type != watch.Deleted && p.DeletionTimestamp == nil) {
				continue
			}
			left[p.Name] = true
			o, _ := strconv.Atoi(p.Labels[workerv1.LabelPodOrdinal])
			order = append(order, int32(o))
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("the rollout not done after 5 minutes: %v; replicas left so far %v", done(), order)
		}
	}
	return order
}

// queueReserves passes once a ClusterQueue's status reports want of a resource reserved.
func queueReserves(ctx context.Context, name string, res corev1.ResourceName, want string) error {
	cq := &kueuev1beta2.ClusterQueue{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Name: name}, cq); err != nil {
		return err
	}
	for _, f := range cq.Status.FlavorsReservation {
		for _, r := range f.Resources {
			if r.Name == res && r.Total.Cmp(resource.MustParse(want)) == 0 {
				return nil
			}
		}
	}
	return fmt.Errorf("ClusterQueue %s reserves %+v, want %s %s", name, cq.Status.FlavorsReservation, want, res)
}

// show is a role's plan as JSON, for a failure message.
func show(r plan.Role) string {
	b, _ := json.Marshal(r)
	return string(b)
}
