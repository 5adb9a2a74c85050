// Command mdplane-bench-scale times a large ModelDeployment on the test stack (package cluster) and
// the same Pods created straight through client-go, and counts the writes each client issued per Pod
// from the API server's audit log. `make bench-scale` runs it; docs/performance.md has the method and
// the figures.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/mdplane/mdplane/test/bench"
	"github.com/mdplane/mdplane/test/cluster"
)

func main() {
	cfg := bench.Config{Out: os.Stdout}
	flag.IntVar(&cfg.Replicas, "replicas", 500, "replicas of each of the deployment's roles")
	flag.IntVar(&cfg.Roles, "roles", 1, "the deployment's roles: 1 (a Server) or 2 (a Prefill and a Decode role, admitted together; no changes phase)")
	flag.IntVar(&cfg.Size, "size", 2, "Pods per replica")
	flag.IntVar(&cfg.Rolling, "rolling", 20, "replicas of the second deployment whose extraArgs edit rolls; 0 skips the phase")
	flag.DurationVar(&cfg.Timeout, "timeout", 10*time.Minute, "bound of each wait: the deployment Ready, its deletion, the floor Ready")
	gpus := flag.Int("gpus-per-node", 128, "nvidia.com/gpu of each fake node")
	podsPerNode := flag.Int("pods-per-node", 130, "Pod capacity of each fake node")
	kueueQPS := flag.Float64("kueue-qps", 500, "Kueue's client QPS, as docs/operations.md recommends; 0 keeps Kueue's released configuration's (50)")
	kueueBurst := flag.Int("kueue-burst", 1000, "Kueue's client burst, as docs/operations.md recommends; 0 keeps Kueue's released configuration's (100)")
	changes := flag.Bool("changes", true, "after the create phase, scale to half and back and roll a second deployment's extraArgs")
	profile := flag.Duration("profile", 2*time.Minute, "length of the CPU profiles of mdplane's processes taken from the deployment's creation; 0 takes none")
	dir := flag.String("dir", "", "the stack's state directory (logs, audit log); a temporary one when empty, kept")
	floors := flag.String("floors", strings.Join(floorNames, ","), "the floors to run after the delete, of "+strings.Join(floorNames, ", "))
	flag.Parse()
	wanted, err := chooseFloors(*floors)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-bench-scale:", err)
		os.Exit(2)
	}
	if err := run(cfg, cluster.Options{
		Dir: *dir, GPUsPerNode: *gpus, PodsPerNode: *podsPerNode, KueueQPS: *kueueQPS, KueueBurst: *kueueBurst, Audit: true, Profile: *profile > 0,
		// docs/operations.md's waitForPodsReady: the suite's two minutes are for a test that outlasts
		// them, and a set of hundreds of groups on this machine takes longer than that from its first
		// admission to its last Pod Ready, which would evict groups of a deployment doing well.
		PodsReadyTimeout: 30 * time.Minute,
		// Crossplane's own default: the e2e suite's 5 s poll is for tests that wait on a composite,
		// and would reconcile every composite twelve times as often as a cluster does.
		CrossplanePollInterval: time.Minute,
	}, *profile, *changes, wanted); err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-bench-scale:", err)
		os.Exit(1)
	}
}

func run(cfg bench.Config, opts cluster.Options, profile time.Duration, changes bool, floors map[string]bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if cfg.Roles != 1 && cfg.Roles != 2 {
		return fmt.Errorf("--roles %d: a run has 1 role or 2", cfg.Roles)
	}
	if cfg.Roles == 2 {
		changes = false // the changes phase scales and rolls a single role
	}
	if !changes {
		cfg.Rolling = 0
	}
	pods := cfg.Groups() * cfg.Size
	// Room for every Pod (one GPU each) with a tenth to spare, and at least the stack's two nodes.
	pods += (cfg.Rolling + 1) * cfg.Size // the rolling deployment and its replacement in flight
	opts.Nodes = max(2, (pods+pods/10+opts.GPUsPerNode-1)/opts.GPUsPerNode, (pods+pods/10+opts.PodsPerNode-1)/opts.PodsPerNode)
	opts.Products = []string{bench.Product} // the bench InstanceType's accelerator group
	opts.ControllerArgs = []string{"--queue-instance-types=" + bench.QueueLabel + "=true"}
	opts.Log = func(format string, args ...any) {
		fmt.Printf("%s stack: "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	s, err := cluster.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Printf("stack: %d fake nodes × %d GPUs × %d Pods; logs and audit log in %s\n", opts.Nodes, opts.GPUsPerNode, opts.PodsPerNode, s.Dir)
	r, err := bench.NewRunner(cfg, s)
	if err != nil {
		return err
	}
	responsiveness := r.WatchResponsiveness(ctx)
	var profiles *bench.Profiles
	if profile > 0 {
		profiles = bench.StartProfiles(ctx, s, s.Dir, profile)
	}
	closes := r.WatchCloses(ctx)
	usage := bench.StartUsage()
	create, err := r.Create(ctx)
	if err != nil {
		return fmt.Errorf("create phase: %w", err)
	}
	costs := usage.Stop()
	costs.ClosedWatches = closes()
	bench.PrintCosts(os.Stdout, "from the stack's start to the deployment Ready (CPU over the create phase)", costs)
	if profiles != nil {
		profiles.Finish(ctx)
		fmt.Printf("\nProfiles of mdplane's processes: CPU over the first %s of the create phase, heap at its end:\n", profile)
		profiles.Print(os.Stdout, 12)
	}
	fmt.Println("\nWrites during the create phase, per client (the stack's programs share the admin user; they are told apart by user agent):")
	create.Writes.Print(os.Stdout, create.Created)
	fmt.Println("\nRate and concurrency settings:")
	bench.Settings(os.Stdout, s)
	var phases []*bench.PhaseResult
	for _, step := range []func() (*bench.PhaseResult, error){
		func() (*bench.PhaseResult, error) { return r.Scale(ctx, cfg.Replicas, cfg.Replicas/2) },
		func() (*bench.PhaseResult, error) { return r.Scale(ctx, cfg.Replicas/2, cfg.Replicas) },
		func() (*bench.PhaseResult, error) {
			if cfg.Rolling == 0 {
				return nil, nil
			}
			return r.RollingEdit(ctx, cfg.Rolling)
		},
	} {
		if !changes {
			break
		}
		p, err := step()
		if err != nil {
			return fmt.Errorf("changes phase: %w", err)
		}
		if p != nil {
			phases = append(phases, p)
		}
	}
	fmt.Println("\nChanges to the running deployments:")
	for _, p := range phases {
		p.Print(os.Stdout)
	}
	responsiveness.Stop()
	fmt.Println("\nCrossplane's watch circuit breaker on the deployments, create phase and changes:")
	responsiveness.Print(os.Stdout)
	deleted, err := r.Delete(ctx)
	if err != nil {
		bench.Report(os.Stdout, cfg, create)
		return fmt.Errorf("delete: %w", err)
	}
	fmt.Printf("%s deployment deleted, its Pods and Workloads gone after %s\n", time.Now().Format(time.TimeOnly), deleted.Round(time.Second))
	create.Milestones = append(create.Milestones, bench.Milestone{Name: bench.DeletedMilestone, Done: 1, Want: 1, After: deleted})
	return runFloors(ctx, s, r, cfg, create, costs, floors)
}

// floorNames are the floors in the order they run: the group floors first, since they delete their
// Pods when Ready, while the client-go floor's stay on the nodes.
var floorNames = []string{"kueue", "joint", "replica", "client-go"}

// chooseFloors reads --floors: a comma-separated list of floorNames.
func chooseFloors(list string) (map[string]bool, error) {
	out := map[string]bool{}
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(floorNames, name) {
			return nil, fmt.Errorf("--floors %q: %q is not a floor; the floors are %s", list, name, strings.Join(floorNames, ", "))
		}
		out[name] = true
	}
	return out, nil
}

// readyTarget is how many times the joint floor's time to all Pods Ready a run may take: 1.15 for a
// deployment of up to 1,000 Pods, 1.3 above (the 1,024 × 4 target).
func readyTarget(pods int) float64 {
	if pods > 1000 {
		return 1.3
	}
	return 1.15
}

// runFloors runs the floors with nothing of mdplane's acting (the replica floor's ModelReplicas would be
// the members controller's to fill) and prints the table and the targets.
func runFloors(ctx context.Context, s *cluster.Stack, r *bench.Runner, cfg bench.Config, create *bench.CreateResult, costs bench.Costs, wanted map[string]bool) error {
	if err := s.KillControllers(ctx); err != nil {
		return fmt.Errorf("stopping mdplane-controllers for the floors: %w", err)
	}
	var floors []*bench.FloorResult
	report := func() {
		bench.Report(os.Stdout, cfg, create, floors...)
		byName := map[string]*bench.FloorResult{}
		cpu := []bench.PhaseCosts{{Name: "mdplane", Costs: costs}}
		for _, f := range floors {
			if f != nil {
				byName[f.Name] = f
				if f.Costs.Elapsed > 0 {
					cpu = append(cpu, bench.PhaseCosts{Name: f.Name, Costs: f.Costs})
				}
			}
		}
		bench.PrintCPU(os.Stdout, cpu)
		bench.PrintTargets(os.Stdout, []bench.Target{
			ratioTarget(create, byName["joint floor"], "all Pods Ready", "all Pods Ready / the joint floor's", readyTarget(cfg.Groups()*cfg.Size)),
			ratioTarget(create, byName["replica floor"], "all Pods created", "all Pods created / the replica floor's", 1.15),
			{Name: "writes by Crossplane and mdplane-controllers per Pod created", Got: create.WritesPerPod(), AtMost: 3.8},
			ratioTarget(create, byName["replica floor"], bench.DeletedMilestone, "delete / the replica floor's", 1.2),
			bench.MemoryTarget(costs),
		})
	}
	runs := map[string]func(context.Context) (*bench.FloorResult, error){
		"kueue": r.KueueFloor, "joint": r.JointFloor, "replica": r.ReplicaFloor, "client-go": r.Floor,
	}
	for _, name := range floorNames {
		if !wanted[name] {
			continue
		}
		f, err := runs[name](ctx)
		floors = append(floors, f)
		if err != nil {
			report()
			return fmt.Errorf("the %s floor phase: %w", name, err)
		}
	}
	report()
	return nil
}

// ratioTarget is the target that mdplane's milestone stays within atMost times a floor's.
func ratioTarget(create *bench.CreateResult, floor *bench.FloorResult, milestone, name string, atMost float64) bench.Target {
	got, figure := bench.Ratio(create, floor, milestone)
	return bench.Target{Name: name, Got: got, AtMost: atMost, Unit: "×", Figure: figure}
}
