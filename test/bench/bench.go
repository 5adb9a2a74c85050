package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// QueueLabel is the label of the InstanceTypes whose Kueue queues the stack's mdplane-controllers
// manage (--queue-instance-types=QueueLabel=true).
const QueueLabel = "mdplane.test/managed-queues"

// Product is the NVIDIA product the bench stack's nodes carry (Options.Products): GPU feature
// discovery's label forms the accelerator group nvidia-bench, the bench InstanceType's, so mdplane's
// inventory counts every node's GPUs as the type's capacity.
const Product = "NVIDIA-Bench"

// Names of what the run creates.
const (
	namespace      = "bench"
	floorNamespace = "bench-floor"
	instanceType   = "bench-gpu-linux-amd64"
	deployment     = "scale"
	floorWorkers   = 16
)

// Config is one run.
type Config struct {
	// Replicas of each role, Pods of each replica.
	Replicas, Size int
	// Roles is 1 (a Server role) or 2 (a Prefill and a Decode role, admitted as one set).
	Roles int
	// Rolling is the replicas of the deployment the rolling-edit phase edits; 0 skips the phase.
	Rolling int
	// Timeout bounds each wait: the deployment's Pods Ready, its deletion, the floor's Pods Ready.
	Timeout time.Duration
	Out     io.Writer
}

// Runner runs the phases against a started stack.
type Runner struct {
	cfg   Config
	stack *cluster.Stack
	cs    kubernetes.Interface
	c     client.WithWatch
	// template is a rendered member Pod of the deployment without Kueue's fields, kept for the
	// client-go floor; source is the member as the API server held it, for the Kueue floor.
	template, source *corev1.Pod
	// sourceReplica and sourceService are the source member's ModelReplica and headless Service
	// (nil for a replica of one Pod, which has none), for the replica floor.
	sourceReplica *v1alpha1.ModelReplica
	sourceService *corev1.Service
	// sourceFronts are the deployment's Services that select its serving members (the deployment's
	// and each role's), and sourceBudgets its roles' PodDisruptionBudgets: the replica floor makes
	// them again over its own Pods, since Kubernetes' controllers and scheduler work for each.
	sourceFronts  []corev1.Service
	sourceBudgets []policyv1.PodDisruptionBudget
}

// NewRunner prepares a run; the stack must have been started with Options.Audit and the controllers
// with --queue-instance-types=QueueLabel=true.
func NewRunner(cfg Config, stack *cluster.Stack) (*Runner, error) {
	rc := rest.CopyConfig(stack.Config)
	rc.QPS, rc.Burst = -1, -1 // the floor measures the API server, not a client-side limiter
	rc.UserAgent = "mdplane-bench"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Runner{cfg: cfg, stack: stack, cs: cs, c: c}, nil
}

func (r *Runner) pods() int { return r.cfg.Groups() * r.cfg.Size }

// Groups is the pod groups of the deployment: its replicas of every role.
func (c Config) Groups() int { return c.Replicas * max(1, c.Roles) }

func (r *Runner) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Out, "%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
}

// Milestone is the time from a phase's start to the moment the last of its objects reached a step,
// and how many did; a step not reached by all has Done < Want.
type Milestone struct {
	Name       string
	Done, Want int
	After      time.Duration
}

func milestone(name string, done, want int, start, last time.Time) Milestone {
	m := Milestone{Name: name, Done: done, Want: want, After: -1}
	if done >= want && !last.IsZero() {
		m.After = last.Sub(start)
	}
	return m
}

// CreateResult is what the create phase measured.
type CreateResult struct {
	Milestones []Milestone
	Created    int
	Elapsed    time.Duration
	Writes     Writes
}

// Create applies the InstanceType with quota for every Pod and the deployment, and waits until its
// Pods are Ready and it is, or the timeout passes.
func (r *Runner) Create(ctx context.Context) (*CreateResult, error) {
	if err := r.queue(ctx); err != nil {
		return nil, err
	}
	t, err := track(ctx, r.cs, namespace)
	if err != nil {
		return nil, err
	}
	defer t.close()
	md := r.deployment()
	start := time.Now()
	if err := r.c.Create(ctx, md); err != nil {
		return nil, fmt.Errorf("creating the ModelDeployment: %w", err)
	}
	r.logf("ModelDeployment %s/%s created: %d replicas of %d Pods in each of its %d role(s)", namespace, deployment, r.cfg.Replicas, r.cfg.Size, max(1, r.cfg.Roles))
	var res CreateResult
	deadline := start.Add(r.cfg.Timeout)
	var mdReady time.Time
	var wl workloadCounts
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second):
		}
		c := t.counts()
		// A List the loaded API server answers late is a missed poll, not a failed run: the
		// counts of the last poll stand until the next one.
		if got, err := r.workloads(ctx); err != nil {
			r.logf("%4.0fs: listing the Workloads: %v", time.Since(start).Seconds(), err)
		} else {
			wl = got
		}
		mdReady = r.readySince(ctx, md)
		r.logf("%4.0fs: Pods %d created, %d ungated, %d scheduled, %d Ready; Workloads %d, %d QuotaReserved, %d Admitted; deployment Ready: %v",
			time.Since(start).Seconds(), c.created, c.ungated, c.scheduled, c.ready, wl.total, wl.reserved, wl.admitted, !mdReady.IsZero())
		if c.ready >= r.pods() && !mdReady.IsZero() || time.Now().After(deadline) {
			break
		}
	}
	end := time.Now()
	c := t.counts()
	res.Created, res.Elapsed = c.created, end.Sub(start)
	n, readyDone := r.pods(), 0
	if !mdReady.IsZero() {
		readyDone = 1
	}
	res.Milestones = []Milestone{
		milestone("all Pods created", c.created, n, start, c.lastCreated),
		milestone("all Workloads QuotaReserved", wl.reserved, r.cfg.Groups(), start, wl.lastReserved),
		milestone("all Workloads Admitted", wl.admitted, r.cfg.Groups(), start, wl.lastAdmitted),
		milestone("all Pods ungated", c.ungated, n, start, c.lastUngated),
		milestone("all Pods scheduled", c.scheduled, n, start, c.lastScheduled),
		milestone("all Pods Ready", c.ready, n, start, c.lastReady),
		milestone("deployment Ready", readyDone, 1, start, mdReady),
	}
	if r.template, r.source, err = r.member(ctx); err != nil {
		return nil, err
	}
	if err := r.replicaOf(ctx, r.source); err != nil {
		return nil, err
	}
	if res.Writes, err = countWrites(r.stack.AuditLog(), start, end); err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return &res, nil
}

// queue creates the namespace and an InstanceType of the stack's nodes' accelerator group (one GPU
// and small unit resources per Pod), and waits until mdplane has published its entrance and sized its
// managed ClusterQueue from the nodes, with quota for every Pod.
func (r *Runner) queue(ctx context.Context) error {
	for _, ns := range []string{namespace, floorNamespace} {
		if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	it := &workerv1.InstanceType{
		ObjectMeta: metav1.ObjectMeta{Name: instanceType, Labels: map[string]string{QueueLabel: "true"}},
		Spec: workerv1.InstanceTypeSpec{
			Acceleratable: true, AcceleratorGroup: "nvidia-bench", OS: "linux", Arch: "amd64",
			UnitResources: workerv1.InstanceTypeUnitResources{CPU: "100m", RAM: "128Mi"}, LocalStorage: "1Gi",
		},
	}
	if err := r.c.Create(ctx, it); err != nil {
		return fmt.Errorf("creating the InstanceType: %w", err)
	}
	// Room for the rolling deployment and its one replacement in flight beside the main one; the
	// stack's nodes have more (cmd/mdplane-bench-scale sizes them), and the inventory publishes
	// them all as the type's capacity.
	need := int64(r.pods() + (r.cfg.Rolling+1)*r.cfg.Size)
	return poll(ctx, 2*time.Minute, "the entrance and the managed ClusterQueue sized from the nodes", func() error {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(it), it); err != nil {
			return err
		}
		if it.Status.Entrance == "" {
			return errors.New("no entrance published yet")
		}
		cq := &kueuev1beta2.ClusterQueue{}
		if err := r.c.Get(ctx, client.ObjectKey{Name: instanceType}, cq); err != nil {
			return err
		}
		for _, g := range cq.Spec.ResourceGroups {
			for _, f := range g.Flavors {
				for _, q := range f.Resources {
					if q.Name == cluster.GPUResource && q.NominalQuota.Value() >= need {
						return nil
					}
				}
			}
		}
		return fmt.Errorf("the ClusterQueue has no %s quota of %d yet: %+v (the InstanceType's phase is %q: %s)",
			cluster.GPUResource, need, cq.Spec.ResourceGroups, it.Status.Phase, it.Status.PhaseMessage)
	})
}

func (r *Runner) deployment() *unstructured.Unstructured {
	return r.deploymentOf(deployment, r.cfg.Replicas)
}

// readySince is when the deployment's Ready condition turned True, or zero.
func (r *Runner) readySince(ctx context.Context, md *unstructured.Unstructured) time.Time {
	got := md.DeepCopy()
	if err := r.c.Get(ctx, client.ObjectKeyFromObject(md), got); err != nil {
		return time.Time{}
	}
	conditions, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == "True" {
			at, _ := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
			return at
		}
	}
	return time.Time{}
}

type workloadCounts struct {
	total, reserved, admitted  int
	lastReserved, lastAdmitted time.Time
}

func (r *Runner) workloads(ctx context.Context) (workloadCounts, error) {
	return r.workloadsIn(ctx, namespace)
}

func (r *Runner) workloadsIn(ctx context.Context, ns string) (workloadCounts, error) {
	var w workloadCounts
	list := &kueuev1beta2.WorkloadList{}
	if err := r.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return w, err
	}
	for _, wl := range list.Items {
		w.total++
		for _, c := range wl.Status.Conditions {
			if c.Status != metav1.ConditionTrue {
				continue
			}
			switch c.Type {
			case kueuev1beta2.WorkloadQuotaReserved:
				w.reserved++
				if c.LastTransitionTime.After(w.lastReserved) {
					w.lastReserved = c.LastTransitionTime.Time
				}
			case kueuev1beta2.WorkloadAdmitted:
				w.admitted++
				if c.LastTransitionTime.After(w.lastAdmitted) {
					w.lastAdmitted = c.LastTransitionTime.Time
				}
			}
		}
	}
	return w, nil
}

// member is one of the deployment's Pods as a client would create it: its spec as rendered, without
// what Kueue, the scheduler and Crossplane added, and without Kueue's labels, so Kueue ignores it
// (the stack's Kueue manages no Pod without a queue name).
func (r *Runner) member(ctx context.Context) (*corev1.Pod, *corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.c.List(ctx, list, client.InNamespace(namespace), client.Limit(1)); err != nil {
		return nil, nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil, errors.New("the deployment has no Pod to copy for the floor")
	}
	src := list.Items[0]
	p := &corev1.Pod{Spec: *src.Spec.DeepCopy()}
	p.Spec.NodeName, p.Spec.SchedulingGates = "", nil
	p.Labels, p.Annotations = map[string]string{}, map[string]string{}
	for k, v := range src.Labels {
		if !strings.HasPrefix(k, "kueue.x-k8s.io/") {
			p.Labels[k] = v
		}
	}
	p.Labels[workerv1.LabelInstance] = "floor"
	for k, v := range src.Annotations {
		if !strings.HasPrefix(k, "kueue.x-k8s.io/") && !strings.HasPrefix(k, "crossplane.io/") {
			p.Annotations[k] = v
		}
	}
	return p, src.DeepCopy(), nil
}

// replicaOf keeps the ModelReplica that controls member and the replica's headless Service.
func (r *Runner) replicaOf(ctx context.Context, member *corev1.Pod) error {
	owner := metav1.GetControllerOf(member)
	if owner == nil || owner.Kind != v1alpha1.ModelReplicaKind {
		return fmt.Errorf("member %s is controlled by %v, not a ModelReplica", member.Name, owner)
	}
	r.sourceReplica = &v1alpha1.ModelReplica{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: member.Namespace, Name: owner.Name}, r.sourceReplica); err != nil {
		return fmt.Errorf("reading the member's ModelReplica: %w", err)
	}
	services := &corev1.ServiceList{}
	if err := r.c.List(ctx, services, client.InNamespace(member.Namespace)); err != nil {
		return fmt.Errorf("listing the deployment's Services: %w", err)
	}
	instance := member.Labels[workerv1.LabelInstance]
	for _, svc := range services.Items {
		if svc.Labels[workerv1.LabelInstance] == instance && svc.Spec.ClusterIP != corev1.ClusterIPNone && len(svc.Spec.Selector) > 0 {
			r.sourceFronts = append(r.sourceFronts, svc)
		}
	}
	budgets := &policyv1.PodDisruptionBudgetList{}
	if err := r.c.List(ctx, budgets, client.InNamespace(member.Namespace)); err != nil {
		return fmt.Errorf("listing the deployment's PodDisruptionBudgets: %w", err)
	}
	for _, b := range budgets.Items {
		if b.Labels[workerv1.LabelInstance] == instance {
			r.sourceBudgets = append(r.sourceBudgets, b)
		}
	}
	if member.Spec.Subdomain == "" {
		return nil
	}
	r.sourceService = &corev1.Service{}
	if err := r.c.Get(ctx, client.ObjectKey{Namespace: member.Namespace, Name: member.Spec.Subdomain}, r.sourceService); err != nil {
		return fmt.Errorf("reading the member's headless Service: %w", err)
	}
	return nil
}

// Delete deletes the deployment and waits until none of its Pods and Workloads is left. The rolling
// phase's deployment goes first, untimed, so the time is the main deployment's alone.
func (r *Runner) Delete(ctx context.Context) (time.Duration, error) {
	if r.cfg.Rolling > 0 {
		if err := client.IgnoreNotFound(r.c.Delete(ctx, r.deploymentOf(rolling, r.cfg.Rolling))); err != nil {
			return 0, err
		}
		if err := poll(ctx, r.cfg.Timeout, "the rolling deployment's Pods gone", func() error {
			pods := &corev1.PodList{}
			if err := r.c.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{workerv1.LabelInstance: rolling}); err != nil {
				return err
			}
			if len(pods.Items) > 0 {
				return fmt.Errorf("%d Pods left", len(pods.Items))
			}
			return nil
		}); err != nil {
			return 0, err
		}
	}
	start := time.Now()
	if err := r.c.Delete(ctx, r.deployment()); err != nil {
		return 0, err
	}
	logged := start
	err := poll(ctx, r.cfg.Timeout, "the deployment's Pods and Workloads gone", func() error {
		pods := &corev1.PodList{}
		if err := r.c.List(ctx, pods, client.InNamespace(namespace)); err != nil {
			return err
		}
		wls := &kueuev1beta2.WorkloadList{}
		if err := r.c.List(ctx, wls, client.InNamespace(namespace)); err != nil {
			return err
		}
		if n := len(pods.Items) + len(wls.Items); n > 0 {
			if time.Since(logged) >= 10*time.Second {
				logged = time.Now()
				r.logf("%4.0fs: deleting: %d Pods, %d Workloads left", time.Since(start).Seconds(), len(pods.Items), len(wls.Items))
			}
			return fmt.Errorf("%d Pods, %d Workloads left", len(pods.Items), len(wls.Items))
		}
		return nil
	})
	return time.Since(start), err
}

// FloorResult is what a floor phase measured.
type FloorResult struct {
	Name       string
	Milestones []Milestone
	Requests   time.Duration // until the last create request returned
	Costs      Costs         // the stack's programs' CPU from the first create to the last Pod Ready
}

// Floor creates the same number of Pods as the deployment's, from one of its members, straight
// through client-go with floorWorkers workers, and waits until they are Ready.
func (r *Runner) Floor(ctx context.Context) (*FloorResult, error) {
	if r.template == nil {
		return nil, errors.New("no member Pod was kept from the create phase")
	}
	t, err := track(ctx, r.cs, floorNamespace)
	if err != nil {
		return nil, err
	}
	defer t.close()
	n := r.pods()
	start := time.Now()
	requests, err := r.createPods(ctx, floorNamespace, n, func(i int) *corev1.Pod {
		p := r.template.DeepCopy()
		p.Name, p.Namespace = fmt.Sprintf("floor-%04d", i), floorNamespace
		return p
	})
	if err != nil {
		return nil, fmt.Errorf("creating the floor's Pods: %w", err)
	}
	r.logf("floor: %d Pods created through client-go in %s", n, requests.Round(time.Millisecond))
	deadline := start.Add(r.cfg.Timeout)
	for {
		c := t.counts()
		if c.ready >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	c := t.counts()
	r.logf("floor: %d of %d Pods Ready", c.ready, n)
	return &FloorResult{Name: "client-go floor", Requests: requests, Milestones: []Milestone{
		// The last create request's return: creationTimestamps' 1 s resolution is the whole floor.
		milestone("all Pods created", c.created, n, start, start.Add(requests)),
		milestone("all Pods scheduled", c.scheduled, n, start, c.lastScheduled),
		milestone("all Pods Ready", c.ready, n, start, c.lastReady),
	}}, nil
}

// createPods creates the n Pods pod(i) makes in namespace straight through client-go, floorWorkers
// at once, and returns when the last create request returned.
func (r *Runner) createPods(ctx context.Context, namespace string, n int, pod func(i int) *corev1.Pod) (time.Duration, error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, floorWorkers)
	start := time.Now()
	for range floorWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if _, err := r.cs.CoreV1().Pods(namespace).Create(ctx, pod(i), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// poll runs check every second until it passes or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not after %s: %w", what, timeout, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// settingFlag matches the flags that set a client's rate or a controller's concurrency.
var settingFlag = regexp.MustCompile(`qps|burst|rate|concurren|poll-interval|circuit-breaker|sync-interval`)

// Settings prints the rate and concurrency settings of Crossplane, mdplane-controllers and Kueue as
// the stack configured them: the flags it passed, each program's defaults for the others, and
// Kueue's clientConnection.
func Settings(out io.Writer, stack *cluster.Stack) {
	passed := func(component string) []string {
		var got []string
		for _, a := range stack.Args(component) {
			if settingFlag.MatchString(strings.SplitN(a, "=", 2)[0]) {
				got = append(got, a)
			}
		}
		return got
	}
	fmt.Fprintf(out, "  crossplane %s: flags %s\n", cluster.CrossplaneVersion, strings.Join(passed("crossplane"), " "))
	fmt.Fprintln(out, "    defaults: --max-reconcile-rate=100 (workers per controller), --circuit-breaker-refill-rate=1/s, --circuit-breaker-burst=100;")
	fmt.Fprintln(out, "    client QPS/burst: none (controller-runtime's ctrl.GetConfig disables client-side rate limiting)")
	fmt.Fprintf(out, "  mdplane-controllers: flags %q\n", passed("mdplane-controllers"))
	fmt.Fprintln(out, "    defaults: --member-workers=16 (the members controller's concurrent replicas), one worker for each other controller;")
	fmt.Fprintln(out, "    client QPS/burst none unless --kube-api-qps (controller-runtime's ctrl.GetConfigOrDie disables client-side limiting)")
	config, err := stack.KueueConfig()
	if err != nil {
		fmt.Fprintf(out, "  kueue %s: its Configuration unread: %v\n", cluster.KueueVersion, err)
		return
	}
	qps, burst := "20 (default)", "30 (default)"
	if c := config.ClientConnection; c.QPS != nil {
		qps = strconv.FormatFloat(*c.QPS, 'f', -1, 64)
	}
	if c := config.ClientConnection; c.Burst != nil {
		burst = strconv.Itoa(*c.Burst)
	}
	fmt.Fprintf(out, "  kueue %s: clientConnection qps %s, burst %s; Workload controller workers %d\n", cluster.KueueVersion, qps, burst, config.WorkloadWorkers())
}
