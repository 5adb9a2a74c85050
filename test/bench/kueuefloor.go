package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// groupFloor is a floor of the deployment's pod groups created straight through client-go: its name
// in the table, its namespace (also its ClusterQueue's name), and the admission check its
// ClusterQueue asks for ("" for none).
type groupFloor struct {
	name, namespace, check string
	// replicas: each group is also a ModelReplica owning its Pods and headless Service, as
	// mdplane's replicas are, and the floor's delete is timed.
	replicas bool
}

var (
	kueueFloor   = groupFloor{name: "Kueue floor", namespace: "bench-kueue-floor"}
	jointFloor   = groupFloor{name: "joint floor", namespace: "bench-joint-floor", check: "bench-joint"}
	replicaFloor = groupFloor{name: "replica floor", namespace: "bench-replica-floor", check: "bench-replica", replicas: true}
)

// DeletedMilestone names the time from a delete to the last of its Pods and Workloads gone.
const DeletedMilestone = "deleted: Pods, Workloads gone"

// jointController is the controller name of the joint floor's admission check: the harness's own.
const jointController = "bench.mdplane.io/joint"

// KueueFloor creates the deployment's pod groups again, straight through client-go, as Kueue pod
// groups a client would make: each group's size Pods carry the members' own Kueue labels and
// annotations (pod group name and total count, role hash, serving), queued on a LocalQueue of a
// ClusterQueue with the managed queue's flavors and quota but no admission check. It waits until
// every Pod is Ready and then deletes them, so the nodes are free for the next phase. Ready here is
// the most Kueue itself allows on this stack: what mdplane adds to admitting a set is the rest.
func (r *Runner) KueueFloor(ctx context.Context) (*FloorResult, error) {
	return r.groupFloor(ctx, kueueFloor)
}

// JointFloor is the Kueue floor's pod groups held together as a set, with nothing of mdplane's: their
// ClusterQueue asks for an admission check of the harness's own, which the harness writes Ready on
// every Workload, 16 at a time as mdplane's check does, once the last group holds quota. Kueue then
// admits each checked Workload in a write of its own, after the whole set reserved, where the Kueue
// floor admits each group as it reserves. Its Ready is what an all-or-nothing admission of the set
// costs on this stack; mdplane's other work is the rest.
func (r *Runner) JointFloor(ctx context.Context) (*FloorResult, error) {
	return r.groupFloor(ctx, jointFloor)
}

// ReplicaFloor is the joint floor with the rest of what mdplane creates, through client-go: each
// group a ModelReplica, which owns the group's Pods and its headless Service (a group of more than
// one Pod), created the way mdplane's members controller does, the replica first, then its Service
// and Pods at once; and, once before them, the deployment's Services and PodDisruptionBudgets over
// the floor's Pods (createFronts). Its Pods created is what creating a replica's objects costs on
// this stack. Its delete, timed, deletes the ModelReplicas and the Workloads, and the garbage
// collector the rest, as a deployment's delete does.
func (r *Runner) ReplicaFloor(ctx context.Context) (*FloorResult, error) {
	return r.groupFloor(ctx, replicaFloor)
}

func (r *Runner) groupFloor(ctx context.Context, f groupFloor) (*FloorResult, error) {
	if r.source == nil || f.replicas && r.sourceReplica == nil {
		return nil, errors.New("no member Pod was kept from the create phase")
	}
	if err := r.floorQueue(ctx, f); err != nil {
		return nil, err
	}
	t, err := track(ctx, r.cs, f.namespace)
	if err != nil {
		return nil, err
	}
	defer t.close()
	groups, size := r.cfg.Groups(), r.cfg.Size
	held := make(chan error, 1)
	if f.check != "" {
		go func() { held <- r.holdTogether(ctx, f, groups) }()
	}
	if f.replicas {
		if err := r.createFronts(ctx, f.namespace); err != nil {
			return nil, err
		}
	}
	closes := r.WatchCloses(ctx)
	usage := StartUsage()
	start := time.Now()
	var requests time.Duration
	if f.replicas {
		requests, err = r.createReplicas(ctx, f.namespace, groups, size)
	} else {
		requests, err = r.createPods(ctx, f.namespace, groups*size, func(i int) *corev1.Pod { return r.groupMember(f.namespace, i/size, i%size) })
	}
	if err != nil {
		usage.Stop()
		return nil, fmt.Errorf("creating the %s's Pods: %w", f.name, err)
	}
	n := groups * size
	r.logf("%s: %d Pods of %d groups created through client-go in %s", f.name, n, groups, requests.Round(time.Millisecond))
	deadline := start.Add(r.cfg.Timeout)
	for {
		select {
		case err := <-held:
			if err != nil {
				usage.Stop()
				return nil, fmt.Errorf("the %s's admission check: %w", f.name, err)
			}
		default:
		}
		if t.counts().ready >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	costs := usage.Stop()
	costs.ClosedWatches = closes()
	// The Pods are counted from a watch; the Workloads are listed once, at the end, so the floor's
	// API server carries no more of the harness's reads than mdplane's does. A List the loaded API
	// server answers late is tried again.
	var wl workloadCounts
	if err := poll(ctx, 2*time.Minute, "the "+f.name+"'s Workloads listed", func() error {
		wl, err = r.workloadsIn(ctx, f.namespace)
		return err
	}); err != nil {
		return nil, err
	}
	c := t.counts()
	r.logf("%s: %d of %d Pods Ready; Workloads %d, %d QuotaReserved, %d Admitted", f.name, c.ready, n, wl.total, wl.reserved, wl.admitted)
	res := &FloorResult{Name: f.name, Requests: requests, Costs: costs, Milestones: []Milestone{
		milestone("all Pods created", c.created, n, start, start.Add(requests)),
		milestone("all Workloads QuotaReserved", wl.reserved, groups, start, wl.lastReserved),
		milestone("all Workloads Admitted", wl.admitted, groups, start, wl.lastAdmitted),
		milestone("all Pods ungated", c.ungated, n, start, c.lastUngated),
		milestone("all Pods scheduled", c.scheduled, n, start, c.lastScheduled),
		milestone("all Pods Ready", c.ready, n, start, c.lastReady),
	}}
	deleteStart := time.Now()
	if err := r.deleteGroupFloor(ctx, f); err != nil {
		return res, err
	}
	if f.replicas {
		deleted := time.Since(deleteStart)
		r.logf("%s: deleted in %s", f.name, deleted.Round(time.Second))
		res.Milestones = append(res.Milestones, Milestone{Name: DeletedMilestone, Done: 1, Want: 1, After: deleted})
		if err := r.deleteFronts(ctx, f.namespace); err != nil {
			return res, err
		}
	}
	return res, nil
}

// The replica floor's own labels: every Pod carries floorRole, the members the deployment's Services
// select (its leaders, or every member where the source's Services select every serving member)
// also floorFront. None of mdplane's labels, so no part of mdplane acts on them.
const (
	floorRole  = "bench.mdplane.io/role"
	floorFront = "bench.mdplane.io/front"
)

// fronted reports whether member m of a replica floor's group is selected by its Services.
func (r *Runner) fronted(m int) bool {
	for _, svc := range r.sourceFronts {
		if _, every := svc.Spec.Selector[workerv1.LabelServes]; every {
			return true
		}
	}
	return m == 0
}

// createFronts makes, before the replica floor's groups, what mdplane makes once per deployment
// over its Pods: a copy of each of the deployment's Services that select its serving members, with
// their ports, selecting the floor's fronted members, and a copy of each role's
// PodDisruptionBudget, selecting every floor Pod. The endpoint controllers rewrite the Services'
// EndpointSlices at each member's change, the disruption controller the budget's status, and the
// scheduler counts the Pods of the Services that select a Pod it places.
func (r *Runner) createFronts(ctx context.Context, namespace string) error {
	for _, src := range r.sourceFronts {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: namespace},
			Spec: corev1.ServiceSpec{Type: src.Spec.Type, Ports: src.Spec.Ports,
				Selector: map[string]string{floorRole: "floor", floorFront: "true"}}}
		if _, err := r.cs.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the replica floor's Service %s: %w", src.Name, err)
		}
	}
	for _, src := range r.sourceBudgets {
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: namespace}, Spec: *src.Spec.DeepCopy()}
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{floorRole: "floor"}}
		if _, err := r.cs.PolicyV1().PodDisruptionBudgets(namespace).Create(ctx, pdb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the replica floor's PodDisruptionBudget %s: %w", src.Name, err)
		}
	}
	return nil
}

// deleteFronts deletes what createFronts made, once the floor's Pods are gone.
func (r *Runner) deleteFronts(ctx context.Context, namespace string) error {
	for _, src := range r.sourceFronts {
		if err := client.IgnoreNotFound(r.cs.CoreV1().Services(namespace).Delete(ctx, src.Name, metav1.DeleteOptions{})); err != nil {
			return err
		}
	}
	for _, src := range r.sourceBudgets {
		if err := client.IgnoreNotFound(r.cs.PolicyV1().PodDisruptionBudgets(namespace).Delete(ctx, src.Name, metav1.DeleteOptions{})); err != nil {
			return err
		}
	}
	return nil
}

// createReplicas creates a replica floor's groups, floorWorkers at once: each group's ModelReplica,
// then its headless Service and Pods side by side, owned by it.
func (r *Runner) createReplicas(ctx context.Context, namespace string, groups, size int) (time.Duration, error) {
	asControllers, err := r.asControllers(ctx)
	if err != nil {
		return 0, err
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, floorWorkers)
	start := time.Now()
	for range floorWorkers {
		wg.Go(func() {
			for g := int(next.Add(1)) - 1; g < groups; g = int(next.Add(1)) - 1 {
				if err := r.createReplica(ctx, asControllers, namespace, g, size); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return time.Since(start), <-errs
}

// asControllers is a client as mdplane-controllers' ServiceAccount, without a client-side limit:
// mdplane's admission policy lets only its controllers and Crossplane write ModelReplicas, so the
// replica floor writes them as the controllers would.
func (r *Runner) asControllers(ctx context.Context) (client.Client, error) {
	cfg, err := r.stack.ConfigAs(ctx, "system:serviceaccount:"+cluster.Namespace+":mdplane-controllers")
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.UserAgent = -1, -1, "mdplane-bench"
	scheme, err := cluster.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// deleteReplicas deletes a replica floor's ModelReplicas one by one, floorWorkers at once, as the
// controllers delete a departed replica's (their role grants no collection delete).
func (r *Runner) deleteReplicas(ctx context.Context, namespace string) error {
	asControllers, err := r.asControllers(ctx)
	if err != nil {
		return err
	}
	list := &v1alpha1.ModelReplicaList{}
	if err := asControllers.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return err
	}
	var eg errgroup.Group
	eg.SetLimit(floorWorkers)
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp != nil {
			continue
		}
		eg.Go(func() error { return client.IgnoreNotFound(asControllers.Delete(ctx, &list.Items[i])) })
	}
	return eg.Wait()
}

func (r *Runner) createReplica(ctx context.Context, asControllers client.Client, namespace string, g, size int) error {
	name := fmt.Sprintf("floor-%04d", g)
	replica := &v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: *r.sourceReplica.Spec.DeepCopy()}
	replica.Spec.DeploymentName, replica.Spec.Ordinal = "floor", int32(g%1024)
	if err := asControllers.Create(ctx, replica); err != nil {
		return fmt.Errorf("creating ModelReplica %s: %w", name, err)
	}
	owner := []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelReplicaKind,
		Name: name, UID: replica.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	var eg errgroup.Group
	if r.sourceService != nil {
		eg.Go(func() error {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, OwnerReferences: owner},
				Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Ports: r.sourceService.Spec.Ports,
					PublishNotReadyAddresses: r.sourceService.Spec.PublishNotReadyAddresses,
					Selector:                 map[string]string{workerv1.LabelPodGroupName: name}}}
			_, err := r.cs.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
			return err
		})
	}
	for m := range size {
		eg.Go(func() error {
			p := r.groupMember(namespace, g, m)
			p.OwnerReferences = owner
			p.Labels[floorRole] = "floor"
			if r.fronted(m) {
				p.Labels[floorFront] = "true"
			}
			if r.sourceService != nil {
				p.Spec.Hostname, p.Spec.Subdomain = p.Name, name
			}
			_, err := r.cs.CoreV1().Pods(namespace).Create(ctx, p, metav1.CreateOptions{})
			return err
		})
	}
	return eg.Wait()
}

// holdTogether is the joint floor's admission check: it watches the floor's Workloads and, once
// every one of groups holds quota, writes the check Ready on each, 16 at a time.
func (r *Runner) holdTogether(ctx context.Context, f groupFloor, groups int) error {
	w, err := r.c.Watch(ctx, &kueuev1beta2.WorkloadList{}, client.InNamespace(f.namespace))
	if err != nil {
		return err
	}
	defer w.Stop()
	reserved := map[string]bool{}
	for ev := range w.ResultChan() {
		wl, ok := ev.Object.(*kueuev1beta2.Workload)
		if !ok {
			continue
		}
		reserved[wl.Name] = ev.Type != watch.Deleted && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved)
		held := 0
		for _, holds := range reserved {
			if holds {
				held++
			}
		}
		if held < groups {
			continue
		}
		var g errgroup.Group
		g.SetLimit(16)
		now := metav1.Now()
		for name := range reserved {
			g.Go(func() error {
				patch := kueueac.Workload(name, f.namespace).WithStatus(kueueac.WorkloadStatus().WithAdmissionChecks(
					kueueac.AdmissionCheckState().WithName(kueuev1beta2.AdmissionCheckReference(f.check)).WithState(kueuev1beta2.CheckStateReady).
						WithMessage("all groups hold quota").WithLastTransitionTime(now)))
				return r.c.Status().Apply(ctx, patch, client.FieldOwner(jointController), client.ForceOwnership)
			})
		}
		return g.Wait()
	}
	return fmt.Errorf("the watch of the %s's Workloads ended before every group held quota", f.name)
}

// groupMember is member m of a group floor's group g: the deployment's member Pod with its spec as
// rendered, its own Kueue labels and annotations, the floor's queue and group name, and none of
// mdplane's labels, so no mdplane controller acts on it.
func (r *Runner) groupMember(namespace string, g, m int) *corev1.Pod {
	src := r.source
	p := &corev1.Pod{Spec: *src.Spec.DeepCopy()}
	p.Spec.NodeName, p.Spec.SchedulingGates = "", nil // the scheduler's and Kueue's webhook's
	p.Namespace = namespace
	p.Name = fmt.Sprintf("floor-%04d-%d", g, m)
	if p.Spec.Subdomain != "" {
		p.Spec.Hostname, p.Spec.Subdomain = p.Name, ""
	}
	p.Labels = map[string]string{
		workerv1.LabelQueueName:    "floor",
		workerv1.LabelPodGroupName: fmt.Sprintf("floor-%04d", g),
	}
	p.Annotations = map[string]string{}
	for _, k := range []string{workerv1.AnnotationPodGroupTotalCount, workerv1.AnnotationRoleHash, workerv1.AnnotationPodGroupServing, workerv1.AnnotationRequiredTopology} {
		if v, ok := src.Annotations[k]; ok {
			p.Annotations[k] = v
		}
	}
	return p
}

// floorQueue makes a group floor's namespace and its LocalQueue "floor", on a ClusterQueue that
// copies the managed queue's resource groups, flavors and policies, without its cohort or admission
// check, open to the floor's namespace only. A floor with a check of its own gets the AdmissionCheck,
// Active as its controller (the harness) says, and its ClusterQueue asks for it.
func (r *Runner) floorQueue(ctx context.Context, f groupFloor) error {
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	managed := &kueuev1beta2.ClusterQueue{}
	if err := r.c.Get(ctx, client.ObjectKey{Name: instanceType}, managed); err != nil {
		return fmt.Errorf("reading the managed ClusterQueue to copy: %w", err)
	}
	spec := managed.Spec.DeepCopy()
	spec.AdmissionChecksStrategy, spec.CohortName, spec.StopPolicy = nil, "", nil
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: f.namespace}}
	if f.check != "" {
		if err := r.activeCheck(ctx, f.check); err != nil {
			return err
		}
		spec.AdmissionChecksStrategy = &kueuev1beta2.AdmissionChecksStrategy{AdmissionChecks: []kueuev1beta2.AdmissionCheckStrategyRule{{Name: kueuev1beta2.AdmissionCheckReference(f.check)}}}
	}
	cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: f.namespace}, Spec: *spec}
	if err := r.c.Create(ctx, cq); err != nil {
		return fmt.Errorf("creating the %s's ClusterQueue: %w", f.name, err)
	}
	lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: f.namespace},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(f.namespace)}}
	if err := r.c.Create(ctx, lq); err != nil {
		return fmt.Errorf("creating the %s's LocalQueue: %w", f.name, err)
	}
	return poll(ctx, time.Minute, "the "+f.name+"'s queues active", func() error {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(lq), lq); err != nil {
			return err
		}
		for _, c := range lq.Status.Conditions {
			if c.Type == kueuev1beta2.LocalQueueActive && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("LocalQueue not active: %v", lq.Status.Conditions)
	})
}

// activeCheck creates the AdmissionCheck name of the harness's controller and marks it Active, as
// its controller would.
func (r *Runner) activeCheck(ctx context.Context, name string) error {
	ac := &kueuev1beta2.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: kueuev1beta2.AdmissionCheckSpec{ControllerName: jointController}}
	if err := r.c.Create(ctx, ac); err != nil {
		return fmt.Errorf("creating the AdmissionCheck %s: %w", name, err)
	}
	// Kueue's own AdmissionCheck controller writes its status too: read it again on a conflict.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.c.Get(ctx, client.ObjectKeyFromObject(ac), ac); err != nil {
			return err
		}
		apimeta.SetStatusCondition(&ac.Status.Conditions, metav1.Condition{Type: kueuev1beta2.AdmissionCheckActive, Status: metav1.ConditionTrue,
			Reason: "Active", Message: "the bench's own check"})
		return r.c.Status().Update(ctx, ac)
	})
}

// deleteGroupFloor deletes the floor's Pods and their Workloads, and waits until both are gone. The
// Workloads go too because Kueue keeps its finalizer on a deleted Pod of a group until the Pod has
// terminated or its Workload is gone, and KWOK plays no termination (mdplane deletes the Workloads
// of its departed groups likewise).
func (r *Runner) deleteGroupFloor(ctx context.Context, f groupFloor) error {
	// A collection of thousands may outlast the API server's request timeout, which leaves the
	// deletes running on the server; the next attempt picks up what is left.
	if err := poll(ctx, r.cfg.Timeout, "the "+f.name+"'s Pods and Workloads deleted", func() error {
		if f.replicas {
			if err := r.deleteReplicas(ctx, f.namespace); err != nil {
				return err
			}
		} else if err := r.cs.CoreV1().Pods(f.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return err
		}
		return r.c.DeleteAllOf(ctx, &kueuev1beta2.Workload{}, client.InNamespace(f.namespace))
	}); err != nil {
		return err
	}
	return poll(ctx, r.cfg.Timeout, "the "+f.name+"'s Pods and Workloads gone", func() error {
		pods, err := r.cs.CoreV1().Pods(f.namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		wls := &kueuev1beta2.WorkloadList{}
		if err := r.c.List(ctx, wls, client.InNamespace(f.namespace)); err != nil {
			return err
		}
		if n := len(pods.Items) + len(wls.Items); n > 0 {
			return fmt.Errorf("%d Pods, %d Workloads left", len(pods.Items), len(wls.Items))
		}
		return nil
	})
}
