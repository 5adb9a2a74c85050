package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/test/cluster"
)

// The chaos suite's settings: MDPLANE_CHAOS_SEED (default: the clock) and MDPLANE_CHAOS_ROUNDS
// (default 1, what make test runs); make chaos SEED=... ROUNDS=... sets both.
const (
	chaosSeedVar, chaosRoundsVar = "MDPLANE_CHAOS_SEED", "MDPLANE_CHAOS_ROUNDS"
	chaosDefaultRounds           = 1
	// chaosStepBound is how long a step may take from its change to the layout it asks for running,
	// faults included (each fault keeps its component down at most chaosMaxDowntime).
	chaosStepBound   = 3 * time.Minute
	chaosMaxDowntime = 5 * time.Second
	// chaosTouched is the annotation the second writer sets on every object it updates.
	chaosTouched = "chaos.mdplane.test/touched"
)

// chaosRole is one role of the chaos deployment and the layout it must run.
type chaosRole struct {
	name, kind     string
	replicas, size int
	// command is a take-over role's whole command line.
	command []string
	// marker is in every command line of the role's current configuration.
	marker string
}

// TestChaos: during a rolling edit, a scale-up, a scale-down and the delete of a three-role
// encode/prefill/decode deployment (joint admission check on its queue; every second round, and the
// first of an even seed, under the capacity-preserving rollout cadence), components are killed by
// pid (SIGKILL to the process group) at seeded random points and started again: mdplane-controllers
// (the rollout pacer, the joint admission check and every other controller share its process),
// each composition function, Crossplane core and the Kueue manager; all the while a second writer
// updates the deployment's objects (ModelDeployment, ModelRoles, ModelReplicas, RoleRevisions,
// Workloads, Pods), so mdplane's and Crossplane's writes meet conflicts. Watched throughout, on every
// Pod event: one configuration per instance, no Pod changed in place, at most one replica per role
// missing, no replica outside the change restarted. Each step finishes within chaosStepBound of its
// change; after the delete no Pod, Workload, ModelRole, ModelReplica or RoleRevision is left.
func TestChaos(t *testing.T) {
	sequential(t, "kills and restarts the controllers, Crossplane, Kueue and the Functions every deployment needs")
	ctx := context.Background()
	seed, rounds := chaosSettings(t)
	t.Logf("chaos: seed %d, %d rounds; rerun with make chaos SEED=%d ROUNDS=%d", seed, rounds, seed, rounds)
	var summaries []string
	for round := 1; round <= rounds; round++ {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			summary := chaosRound(t, ctx, seed, round)
			summaries = append(summaries, summary)
			t.Log(summary)
		})
		if t.Failed() {
			break
		}
	}
	passed := len(summaries)
	if t.Failed() {
		passed--
	}
	t.Logf("chaos: seed %d, %d/%d rounds passed\n%s", seed, max(passed, 0), rounds, strings.Join(summaries, "\n"))
}

// chaosSettings reads the seed and the number of rounds from the environment.
func chaosSettings(t *testing.T) (uint64, int) {
	seed, rounds := uint64(time.Now().UnixNano()), chaosDefaultRounds
	if v := os.Getenv(chaosSeedVar); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a seed (an unsigned integer): %v", chaosSeedVar, v, err)
		}
		seed = s
	}
	if v := os.Getenv(chaosRoundsVar); v != "" {
		r, err := strconv.Atoi(v)
		if err != nil || r < 1 {
			t.Fatalf("%s=%q: not a number of rounds (1 or more)", chaosRoundsVar, v)
		}
		rounds = r
	}
	return seed, rounds
}

// fault is one component killed a delay after the step's change (the first) or after the previous
// fault's component started again, and started again after a downtime.
type fault struct {
	component   string
	after, down time.Duration
}

// chaosComponents are the programs a fault may kill.
func chaosComponents() []string {
	return append([]string{"mdplane-controllers", "crossplane", "kueue"}, stack.FunctionNames()...)
}

// planFaults draws one or two faults for a step.
func planFaults(rng *rand.Rand) []fault {
	components := chaosComponents()
	faults := make([]fault, 1+rng.IntN(2))
	for i := range faults {
		faults[i] = fault{
			component: components[rng.IntN(len(components))],
			after:     time.Duration(rng.Int64N(int64(4 * time.Second))),
			down:      500*time.Millisecond + time.Duration(rng.Int64N(int64(chaosMaxDowntime-500*time.Millisecond))),
		}
	}
	return faults
}

// inflict runs faults one after another from start, each killing its component and starting it
// again, and describes each as it happened (offsets from start); it stops at the first component
// that does not start again.
func inflict(ctx context.Context, start time.Time, faults []fault) (string, error) {
	var happened []string
	from := start
	for _, f := range faults {
		time.Sleep(time.Until(from.Add(f.after)))
		killedAt := time.Since(start)
		var err error
		// A component is started again even when its kill failed half way, so that a failed round
		// leaves the stack whole for the tests after it.
		stop, restart := func() error { return stack.KillFunction(ctx, f.component) }, func() error { return stack.StartFunction(ctx, f.component) }
		switch f.component {
		case "mdplane-controllers":
			stop, restart = func() error { return stack.KillControllers(ctx) }, func() error { return stack.StartControllers(ctx) }
		case "crossplane", "kueue":
			stop, restart = func() error { return stack.KillComponent(ctx, f.component) }, func() error { return stack.StartComponent(ctx, f.component) }
		}
		if err = stop(); err == nil {
			time.Sleep(f.down)
		}
		if restartErr := restart(); err == nil {
			err = restartErr
		}
		from = time.Now()
		happened = append(happened, fmt.Sprintf("%s killed at +%.1fs, serving again at +%.1fs", f.component, killedAt.Seconds(), from.Sub(start).Seconds()))
		if err != nil {
			return strings.Join(happened, "; "), fmt.Errorf("%s: %w", f.component, err)
		}
	}
	return strings.Join(happened, "; "), nil
}

// chaosRound runs one round: the deployment created, then each step under its faults, and returns
// the round's summary line.
func chaosRound(t *testing.T, ctx context.Context, seed uint64, round int) string {
	rng := rand.New(rand.NewPCG(seed, uint64(round)))
	ns, name := fmt.Sprintf("chaos-%d", round), "epd"
	roles := []*chaosRole{
		// mdplane has no vLLM command line for an encoder: the role writes its own.
		{name: "encode", kind: "Encode", replicas: 1, size: 1, command: []string{"vllm", "serve", "Qwen/Qwen2.5-72B-Instruct", "--port", "8000"}},
		{name: "prefill", kind: "Prefill", replicas: 2, size: 2},
		{name: "decode", kind: "Decode", replicas: 2, size: 1},
	}
	applyCluster(t, ctx, ns)
	// Room for every replica and one more of the widest role; the joint check holds every group.
	queue(t, ctx, ns, h20Entrance, ns, 10, admissioncheck.CheckName)
	// The cadence alternates from round to round, the first round's from the seed's parity, so that
	// make test's one round tries each cadence about half the time; an odd seed's rounds (and every
	// seed's faults) are as before.
	cadence := workerv1.RolloutCadenceAdmission
	if (seed+uint64(round))%2 == 1 {
		cadence = workerv1.RolloutCadenceCapacity
	}
	kubectlApply(t, chaosDeployment(ns, name, cadence, roles))
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	eventually(t, chaosStepBound, "the deployment running", func() error { return layoutRunning(ctx, ns, name, roles) })

	watcher := watchChaos(t, ctx, ns, name, roles)
	writer := startSecondWriter(t, ctx, ns, seed+uint64(round))
	// A round that fails part-way stops both before the next test (stopping twice is harmless).
	t.Cleanup(func() { writer.stop(); watcher.stop() })
	summary := []string{fmt.Sprintf("round %d (seed %d, %s cadence):", round, seed, cadence)}
	step := func(what string, change func(), done func() error) {
		t.Helper()
		faults := planFaults(rng)
		start := time.Now()
		change()
		happened, err := inflict(ctx, start, faults)
		if err != nil {
			t.Fatalf("%s [%s]: a component did not start again: %v", what, happened, err)
		}
		for err := done(); err != nil; err = done() {
			if time.Since(start) > chaosStepBound {
				t.Fatalf("%s [%s]: not done %s after the change: %v\n%s", what, happened, chaosStepBound, err, chaosDiagnosis(ns))
			}
			time.Sleep(time.Second)
		}
		took := time.Since(start).Round(100 * time.Millisecond)
		summary = append(summary, fmt.Sprintf("  %s in %s [%s]", what, took, happened))
	}

	edited := roles[rng.IntN(len(roles))]
	marker := fmt.Sprintf("--max-num-seqs %d", 100+rng.IntN(900))
	step(fmt.Sprintf("rolling edit of %s (%s)", edited.name, marker), func() {
		watcher.permit(func(w *chaosWatch) { w.replacing[edited.name] = true })
		edited.marker = marker
		// A take-over role's extraArgs are inert: its edit is of the command.
		field, args := "extraArgs", strings.Fields(marker)
		if edited.command != nil {
			field, args = "command", append(slices.Clone(edited.command), args...)
		}
		value, err := json.Marshal(args)
		if err != nil {
			t.Fatal(err)
		}
		patchRole(t, ns, name, roles, edited, "add", field, string(value))
	}, func() error { return layoutRunning(ctx, ns, name, roles) })
	watcher.permit(func(w *chaosWatch) { clear(w.replacing) })

	// Not the encoder: a take-over role advertises no engine gauges, so a replica it sheds drains
	// until its retirement deadline, five minutes (docs/decisions/0016-retirement.md).
	scaled := roles[1+rng.IntN(len(roles)-1)]
	step(fmt.Sprintf("scale %s %d→%d", scaled.name, scaled.replicas, scaled.replicas+1), func() {
		scaled.replicas++
		patchRole(t, ns, name, roles, scaled, "replace", "replicas", strconv.Itoa(scaled.replicas))
	}, func() error { return layoutRunning(ctx, ns, name, roles) })
	watcher.permit(func(w *chaosWatch) { w.replicas[scaled.name] = scaled.replicas })

	step(fmt.Sprintf("scale %s %d→%d", scaled.name, scaled.replicas, scaled.replicas-1), func() {
		scaled.replicas--
		watcher.permit(func(w *chaosWatch) {
			w.replicas[scaled.name], w.shedFrom[scaled.name] = scaled.replicas, scaled.replicas
		})
		patchRole(t, ns, name, roles, scaled, "replace", "replicas", strconv.Itoa(scaled.replicas))
	}, func() error { return layoutRunning(ctx, ns, name, roles) })
	watcher.permit(func(w *chaosWatch) { delete(w.shedFrom, scaled.name) })

	step("delete", func() {
		watcher.permit(func(w *chaosWatch) { w.deleting = true })
		if _, err := stack.Kubectl("delete", "modeldeployment", name, "-n", ns, "--wait=false"); err != nil {
			t.Fatal(err)
		}
	}, func() error { return nothingLeft(ctx, ns) })

	writes := writer.stop()
	violations := watcher.stop()
	summary = append(summary, fmt.Sprintf("  second writer: %s; %d Pod events watched, invariants %s",
		writes, watcher.events, map[bool]string{true: "held", false: "broken"}[len(violations) == 0]))
	for _, v := range violations {
		t.Errorf("invariant broken: %s", v)
	}
	return strings.Join(summary, "\n")
}

// chaosDiagnosis is what a person would read first when a step does not finish: the namespace's
// deployment, roles, replicas, Workloads and Pods.
func chaosDiagnosis(namespace string) string {
	out, err := stack.Kubectl("get", "modeldeployments,modelroles,modelreplicas,workloads,pods", "-n", namespace, "-o", "wide", "--show-labels")
	if err != nil {
		return fmt.Sprintf("(cannot read the namespace: %v)", err)
	}
	roles, _ := stack.Kubectl("get", "modelroles", "-n", namespace, "-o", "jsonpath={range .items[*]}{.metadata.name}: replicas {.spec.replicas}, annotations {.metadata.annotations}, conditions {.status.conditions}{\"\\n\"}{end}")
	return out + "\n" + roles
}

// chaosDeployment is the round's deployment: every role on the H20 type, one accelerator a Pod.
func chaosDeployment(namespace, name string, cadence workerv1.RolloutCadence, roles []*chaosRole) string {
	var b strings.Builder
	b.WriteString(strings.Replace(vLLMDeployment(namespace, name), "namespace: "+namespace+"}",
		fmt.Sprintf("namespace: %s, annotations: {%s: %s}}", namespace, workerv1.AnnotationRolloutCadence, cadence), 1))
	for _, r := range roles {
		command := ""
		if r.command != nil {
			raw, _ := json.Marshal(r.command)
			command = " command: " + string(raw) + ","
		}
		fmt.Fprintf(&b, "    - {name: %s, kind: %s, replicas: %d, size: %d,%s instanceType: gpustack-nvidia-h20-linux-amd64, resources: {accelerator: 1}}\n",
			r.name, r.kind, r.replicas, r.size, command)
	}
	return b.String()
}

// patchRole sets one field of a role of the deployment by a JSON patch.
func patchRole(t *testing.T, namespace, name string, roles []*chaosRole, role *chaosRole, op, field, value string) {
	t.Helper()
	i := slices.Index(roles, role)
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", namespace, "--type=json",
		"-p", fmt.Sprintf(`[{"op":%q,"path":"/spec/roles/%d/%s","value":%s}]`, op, i, field, value)); err != nil {
		t.Fatal(err)
	}
}

// layoutRunning passes once every role runs exactly its replicas × size Pods, each Ready, bound and
// with the role's marker in its command line, and no Pod of the deployment is being deleted.
func layoutRunning(ctx context.Context, namespace, name string, roles []*chaosRole) error {
	ps, err := pods(ctx, namespace, name)
	if err != nil {
		return err
	}
	byRole := map[string][]corev1.Pod{}
	for _, p := range ps {
		if p.DeletionTimestamp != nil {
			return fmt.Errorf("Pod %s is being deleted", p.Name)
		}
		byRole[p.Labels[workerv1.LabelComponent]] = append(byRole[p.Labels[workerv1.LabelComponent]], p)
	}
	for _, r := range roles {
		got := byRole[r.name]
		if len(got) != r.replicas*r.size {
			return fmt.Errorf("role %s has %d Pods, want %d", r.name, len(got), r.replicas*r.size)
		}
		for i := range got {
			p := &got[i]
			if p.Spec.NodeName == "" || !ready(*p) {
				return fmt.Errorf("Pod %s not running and Ready yet", p.Name)
			}
			if !strings.Contains(argsOf(p), r.marker) {
				return fmt.Errorf("Pod %s runs %q, not yet %q", p.Name, argsOf(p), r.marker)
			}
		}
	}
	return nil
}

// nothingLeft passes once the namespace holds no Pod, Workload, ModelRole, ModelReplica or
// RoleRevision (a ControllerRevision) and the deployment itself is gone.
func nothingLeft(ctx context.Context, namespace string) error {
	lists := map[string]client.ObjectList{
		"ModelDeployments": &workerv1.ModelDeploymentList{}, "ModelRoles": &v1alpha1.ModelRoleList{},
		"ModelReplicas": &v1alpha1.ModelReplicaList{}, "RoleRevisions": &appsv1.ControllerRevisionList{},
		"Workloads": &kueuev1beta2.WorkloadList{}, "Pods": &corev1.PodList{},
	}
	var left []string
	for _, kind := range []string{"ModelDeployments", "ModelRoles", "ModelReplicas", "RoleRevisions", "Workloads", "Pods"} {
		list := lists[kind]
		if err := stack.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return err
		}
		if n := len(listedObjects(list)); n > 0 {
			left = append(left, fmt.Sprintf("%d %s", n, kind))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left: %s", strings.Join(left, ", "))
	}
	return nil
}

// chaosWatch follows every event of a deployment's Pods and records each violation of the rollout
// invariants, judged against the layout the round declares as it changes it.
type chaosWatch struct {
	mu sync.Mutex
	// size and replicas are each role's members per replica and the replicas that must stand (one
	// of them may be missing).
	size, replicas map[string]int
	// replacing is the roles whose replicas may leave now (a rolling edit); shedFrom, by role, the
	// ordinal from which replicas may leave (a scale-down); deleting lets every Pod go.
	replacing map[string]bool
	shedFrom  map[string]int
	deleting  bool

	pods       map[string]*corev1.Pod
	containers map[types.UID]string
	violations []string
	events     int
	w          watch.Interface
	done       chan struct{}
}

// watchChaos starts following the deployment's Pods from their current list.
func watchChaos(t *testing.T, ctx context.Context, namespace, deployment string, roles []*chaosRole) *chaosWatch {
	t.Helper()
	initial, w := watchPods(t, ctx, namespace, deployment)
	cw := &chaosWatch{size: map[string]int{}, replicas: map[string]int{}, shedFrom: map[string]int{}, replacing: map[string]bool{},
		pods: map[string]*corev1.Pod{}, containers: map[types.UID]string{}, w: w, done: make(chan struct{})}
	for _, r := range roles {
		cw.size[r.name], cw.replicas[r.name] = r.size, r.replicas
	}
	for i := range initial.Items {
		p := &initial.Items[i]
		cw.pods[p.Name], cw.containers[p.UID] = p, fmt.Sprint(p.Spec.Containers)
	}
	go func() {
		defer close(cw.done)
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				cw.observe(ev.Type, p)
			}
		}
	}()
	return cw
}

// permit changes what the watch allows, under its lock.
func (cw *chaosWatch) permit(change func(*chaosWatch)) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	change(cw)
}

func (cw *chaosWatch) violate(format string, args ...any) {
	if len(cw.violations) < 10 {
		cw.violations = append(cw.violations, fmt.Sprintf(format, args...))
	}
}

// observe judges one Pod event.
func (cw *chaosWatch) observe(kind watch.EventType, p *corev1.Pod) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.events++
	role, ordinal := p.Labels[workerv1.LabelComponent], p.Labels[workerv1.LabelPodOrdinal]
	containers := fmt.Sprint(p.Spec.Containers)
	if seen, ok := cw.containers[p.UID]; ok && seen != containers {
		cw.violate("Pod %s was changed in place", p.Name)
	}
	cw.containers[p.UID] = containers
	before := cw.pods[p.Name]
	leaving := kind == watch.Deleted || p.DeletionTimestamp != nil
	if leaving && before != nil && before.UID == p.UID && before.DeletionTimestamp == nil && !cw.mayLeave(role, ordinal) {
		cw.violate("Pod %s (replica %s r%s) left outside the change (%s)", p.Name, role, ordinal, whyLeaving(p))
	}
	if kind == watch.Deleted {
		delete(cw.pods, p.Name)
	} else {
		cw.pods[p.Name] = p
	}
	if cw.deleting {
		return
	}
	configs := map[string]map[string]bool{} // role/ordinal -> command lines of its standing members
	members := map[string]int{}             // role/ordinal -> standing members
	for _, q := range cw.pods {
		if q.DeletionTimestamp != nil {
			continue
		}
		instance := q.Labels[workerv1.LabelComponent] + " r" + q.Labels[workerv1.LabelPodOrdinal]
		if configs[instance] == nil {
			configs[instance] = map[string]bool{}
		}
		configs[instance][argsOf(q)] = true
		members[instance]++
	}
	for instance, lines := range configs {
		if len(lines) > 1 {
			cw.violate("instance %s mixes %d configurations", instance, len(lines))
		}
	}
	for r, n := range cw.replicas {
		missing := 0
		for o := range n {
			if members[fmt.Sprintf("%s r%d", r, o)] < cw.size[r] {
				missing++
			}
		}
		if missing > 1 {
			cw.violate("role %s has %d of %d replicas missing (after an event of Pod %s)", r, missing, n, p.Name)
		}
	}
}

// mayLeave reports whether a member of a role's replica may go now.
func (cw *chaosWatch) mayLeave(role, ordinal string) bool {
	if cw.deleting || cw.replacing[role] {
		return true
	}
	from, shedding := cw.shedFrom[role]
	o, err := strconv.Atoi(ordinal)
	return shedding && err == nil && o >= from
}

// whyLeaving is what a leaving Pod says of its going: its node, owner, phase and the condition
// Kubernetes sets on a Pod it disrupts (taint manager, scheduler preemption, eviction, Pod GC).
func whyLeaving(p *corev1.Pod) string {
	why := fmt.Sprintf("node %q, phase %s", p.Spec.NodeName, p.Status.Phase)
	if owner := metav1.GetControllerOf(p); owner != nil {
		why += fmt.Sprintf(", owner %s %s", owner.Kind, owner.Name)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget {
			why += fmt.Sprintf(", %s %s: %s", c.Type, c.Reason, c.Message)
		}
	}
	return why
}

// stop ends the watch and returns the violations seen.
func (cw *chaosWatch) stop() []string {
	cw.w.Stop()
	<-cw.done
	cw.mu.Lock()
	defer cw.mu.Unlock()
	return cw.violations
}

// secondWriter updates the deployment's objects, one at a time from a fresh read, adding an
// annotation on the resourceVersion read: every update moves the object's resourceVersion, so a
// controller writing from an older read meets a conflict, as it would beside another operator.
type secondWriter struct {
	cancel context.CancelFunc
	done   chan struct{}
	counts map[string]int // outcome -> updates
	// refusal is the first refusal's message: a webhook of a killed component, say.
	refusal string
}

func startSecondWriter(t *testing.T, ctx context.Context, namespace string, seed uint64) *secondWriter {
	t.Helper()
	// Each kind in the name of one that may write it: mdplane's internal objects refuse every
	// writer but Crossplane and mdplane-controllers. mdplane-controllers' own rights do not cover
	// patching a ModelReplica's or a revision's metadata, so those are written in its name with an
	// administrator's rights (impersonated), as another holder of its name could.
	asCrossplane := clientAs(t, cluster.CrossplaneUser)
	impersonated := rest.CopyConfig(stack.Config)
	impersonated.Impersonate = rest.ImpersonationConfig{UserName: cluster.ControllersUser, Groups: []string{"system:masters", "system:authenticated"}}
	asControllers, err := client.New(impersonated, client.Options{Scheme: stack.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	writerOf := func(obj client.Object) client.Client {
		switch obj.(type) {
		case *v1alpha1.ModelRole:
			return asCrossplane
		case *v1alpha1.ModelReplica, *appsv1.ControllerRevision:
			return asControllers
		}
		return stack.Client
	}
	ctx, cancel := context.WithCancel(ctx)
	sw := &secondWriter{cancel: cancel, done: make(chan struct{}), counts: map[string]int{}}
	rng := rand.New(rand.NewPCG(seed, 0))
	lists := []func() client.ObjectList{
		func() client.ObjectList { return &workerv1.ModelDeploymentList{} },
		func() client.ObjectList { return &v1alpha1.ModelRoleList{} },
		func() client.ObjectList { return &v1alpha1.ModelReplicaList{} },
		func() client.ObjectList { return &appsv1.ControllerRevisionList{} },
		func() client.ObjectList { return &kueuev1beta2.WorkloadList{} },
		func() client.ObjectList { return &corev1.PodList{} },
	}
	go func() {
		defer close(sw.done)
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(100+rng.IntN(200)) * time.Millisecond):
			}
			list := lists[rng.IntN(len(lists))]()
			if err := stack.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
				continue
			}
			objects := listedObjects(list)
			if len(objects) == 0 {
				continue
			}
			obj := objects[rng.IntN(len(objects))]
			read := obj.DeepCopyObject().(client.Object)
			annotations := obj.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[chaosTouched] = strconv.Itoa(n)
			obj.SetAnnotations(annotations)
			// Only the annotation, on the version read: a typed Update would drop the fields
			// Crossplane keeps in a composite's spec that the Go type does not declare.
			err := writerOf(obj).Patch(ctx, obj, client.MergeFromWithOptions(read, client.MergeFromWithOptimisticLock{}))
			switch {
			case err == nil:
				sw.counts["written"]++
			case apierrors.IsConflict(err):
				sw.counts["conflicted"]++
			case apierrors.IsNotFound(err) || ctx.Err() != nil:
				sw.counts["gone"]++
			default:
				sw.counts["refused"]++
				if sw.refusal == "" {
					sw.refusal = err.Error()
				}
			}
		}
	}()
	return sw
}

// listedObjects are the items of a typed list.
func listedObjects(list client.ObjectList) []client.Object {
	items, _ := apimeta.ExtractList(list)
	out := make([]client.Object, 0, len(items))
	for _, item := range items {
		if obj, ok := item.(client.Object); ok {
			out = append(out, obj)
		}
	}
	return out
}

// stop ends the writer and describes what it wrote.
func (sw *secondWriter) stop() string {
	sw.cancel()
	<-sw.done
	total := 0
	var parts []string
	for _, outcome := range []string{"written", "conflicted", "gone", "refused"} {
		total += sw.counts[outcome]
		if sw.counts[outcome] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", sw.counts[outcome], outcome))
		}
	}
	if sw.refusal != "" {
		parts = append(parts, fmt.Sprintf("the first refusal: %.200s", sw.refusal))
	}
	return fmt.Sprintf("%d updates (%s)", total, strings.Join(parts, ", "))
}

// TestChaosWatchJudges holds the chaos suite's watch to the invariants it reports, one row per rule,
// on made-up Pod events of a role of two replicas of two members.
func TestChaosWatchJudges(t *testing.T) {
	parallel(t)
	member := func(uid string, ordinal int, member int, args string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Name, p.UID = fmt.Sprintf("d-prefill-%d-%d-%s", ordinal, member, uid), types.UID(uid)
		p.Labels = map[string]string{workerv1.LabelComponent: "prefill", workerv1.LabelPodOrdinal: strconv.Itoa(ordinal)}
		p.Spec.Containers = []corev1.Container{{Name: "engine", Args: strings.Fields(args)}}
		return p
	}
	leaving := func(p *corev1.Pod) *corev1.Pod {
		q := p.DeepCopy()
		q.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		return q
	}
	type event struct {
		kind watch.EventType
		pod  *corev1.Pod
	}
	r0m0, r0m1, r1m0, r1m1 := member("a", 0, 0, "--old"), member("b", 0, 1, "--old"), member("c", 1, 0, "--old"), member("d", 1, 1, "--old")
	cases := []struct {
		rule   string
		permit func(*chaosWatch)
		events []event
		want   string
	}{
		{rule: "a Pod's containers never change", events: []event{{watch.Modified, member("a", 0, 0, "--new")}}, want: "changed in place"},
		{rule: "an instance runs one configuration", events: []event{{watch.Deleted, r0m1}, {watch.Added, member("e", 0, 1, "--new")}},
			permit: func(w *chaosWatch) { w.replacing["prefill"] = true }, want: "mixes 2 configurations"},
		{rule: "at most one replica of a role is missing", events: []event{{watch.Deleted, r0m0}, {watch.Deleted, r1m1}},
			permit: func(w *chaosWatch) { w.replacing["prefill"] = true }, want: "2 of 2 replicas missing"},
		{rule: "a replica outside the change does not restart", events: []event{{watch.Modified, leaving(r1m0)}}, want: "left outside the change"},
		{rule: "the role being edited may replace one replica at a time", permit: func(w *chaosWatch) { w.replacing["prefill"] = true },
			events: []event{{watch.Modified, leaving(r0m0)}, {watch.Deleted, r0m1}, {watch.Deleted, r0m0}, {watch.Added, member("e", 0, 0, "--new")}, {watch.Added, member("f", 0, 1, "--new")}}},
		{rule: "a scale-down sheds the ordinals at and above the new count", permit: func(w *chaosWatch) { w.replicas["prefill"], w.shedFrom["prefill"] = 1, 1 },
			events: []event{{watch.Deleted, r1m0}, {watch.Deleted, r1m1}}},
		{rule: "a scale-down keeps the ordinals below the new count", permit: func(w *chaosWatch) { w.replicas["prefill"], w.shedFrom["prefill"] = 1, 1 },
			events: []event{{watch.Deleted, r0m0}}, want: "left outside the change"},
		{rule: "a delete lets everything go", permit: func(w *chaosWatch) { w.deleting = true },
			events: []event{{watch.Deleted, r0m0}, {watch.Deleted, r0m1}, {watch.Deleted, r1m0}, {watch.Deleted, r1m1}}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			cw := &chaosWatch{size: map[string]int{"prefill": 2}, replicas: map[string]int{"prefill": 2}, shedFrom: map[string]int{}, replacing: map[string]bool{},
				pods: map[string]*corev1.Pod{}, containers: map[types.UID]string{}}
			for _, p := range []*corev1.Pod{r0m0, r0m1, r1m0, r1m1} {
				cw.pods[p.Name], cw.containers[p.UID] = p, fmt.Sprint(p.Spec.Containers)
			}
			if tc.permit != nil {
				cw.permit(tc.permit)
			}
			for _, ev := range tc.events {
				cw.observe(ev.kind, ev.pod)
			}
			got := strings.Join(cw.violations, "; ")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Fatalf("violations %q, want one saying %q", got, tc.want)
			}
		})
	}
}
