package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The Kueue floor's namespace, ClusterQueue and LocalQueue.
const (
	kueueFloorNamespace = "bench-kueue-floor"
	kueueFloorQueue     = "bench-kueue-floor"
)

// KueueFloor creates the deployment's pod groups again, straight through client-go, as Kueue pod
// groups a client would make: each group's size Pods carry the members' own Kueue labels and
// annotations (pod group name and total count, role hash, serving), queued on a LocalQueue of a
// ClusterQueue with the managed queue's flavors and quota but no admission check. It waits until
// every Pod is Ready and then deletes them, so the nodes are free for the next phase. Ready here is
// the most Kueue itself allows on this stack: what mdplane adds to admitting a set is the rest.
func (r *Runner) KueueFloor(ctx context.Context) (*FloorResult, error) {
	if r.source == nil {
		return nil, errors.New("no member Pod was kept from the create phase")
	}
	if err := r.kueueFloorQueue(ctx); err != nil {
		return nil, err
	}
	t, err := track(ctx, r.cs, kueueFloorNamespace)
	if err != nil {
		return nil, err
	}
	defer t.close()
	groups, size := r.cfg.Replicas, r.cfg.Size
	start := time.Now()
	requests, err := r.createPods(ctx, kueueFloorNamespace, groups*size, func(i int) *corev1.Pod { return r.groupMember(i/size, i%size) })
	if err != nil {
		return nil, fmt.Errorf("creating the Kueue floor's Pods: %w", err)
	}
	n := groups * size
	r.logf("Kueue floor: %d Pods of %d groups created through client-go in %s", n, groups, requests.Round(time.Millisecond))
	deadline := start.Add(r.cfg.Timeout)
	var wl workloadCounts
	for {
		c := t.counts()
		if wl, err = r.workloadsIn(ctx, kueueFloorNamespace); err != nil {
			return nil, err
		}
		if c.ready >= n || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	c := t.counts()
	r.logf("Kueue floor: %d of %d Pods Ready; Workloads %d, %d QuotaReserved, %d Admitted", c.ready, n, wl.total, wl.reserved, wl.admitted)
	res := &FloorResult{Name: "Kueue floor", Requests: requests, Milestones: []Milestone{
		milestone("all Pods created", c.created, n, start, start.Add(requests)),
		milestone("all Workloads QuotaReserved", wl.reserved, groups, start, wl.lastReserved),
		milestone("all Workloads Admitted", wl.admitted, groups, start, wl.lastAdmitted),
		milestone("all Pods ungated", c.ungated, n, start, c.lastUngated),
		milestone("all Pods scheduled", c.scheduled, n, start, c.lastScheduled),
		milestone("all Pods Ready", c.ready, n, start, c.lastReady),
	}}
	return res, r.deleteKueueFloor(ctx)
}

// groupMember is member m of the Kueue floor's group g: the deployment's member Pod with its spec
// as rendered, its own Kueue labels and annotations, the floor's queue and group name, and none of
// mdplane's labels, so no mdplane controller acts on it.
func (r *Runner) groupMember(g, m int) *corev1.Pod {
	src := r.source
	p := &corev1.Pod{Spec: *src.Spec.DeepCopy()}
	p.Spec.NodeName, p.Spec.SchedulingGates = "", nil // the scheduler's and Kueue's webhook's
	p.Namespace = kueueFloorNamespace
	p.Name = fmt.Sprintf("kueue-floor-%04d-%d", g, m)
	if p.Spec.Subdomain != "" {
		p.Spec.Hostname, p.Spec.Subdomain = p.Name, ""
	}
	p.Labels = map[string]string{
		workerv1.LabelQueueName:    "floor",
		workerv1.LabelPodGroupName: fmt.Sprintf("kueue-floor-%04d", g),
	}
	p.Annotations = map[string]string{}
	for _, k := range []string{workerv1.AnnotationPodGroupTotalCount, workerv1.AnnotationRoleHash, workerv1.AnnotationPodGroupServing, workerv1.AnnotationRequiredTopology} {
		if v, ok := src.Annotations[k]; ok {
			p.Annotations[k] = v
		}
	}
	return p
}

// kueueFloorQueue makes the Kueue floor's namespace and its LocalQueue "floor", on a ClusterQueue
// that copies the managed queue's resource groups, flavors and policies, without its admission check
// or cohort, open to the floor's namespace only.
func (r *Runner) kueueFloorQueue(ctx context.Context) error {
	if err := r.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kueueFloorNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	managed := &kueuev1beta2.ClusterQueue{}
	if err := r.c.Get(ctx, client.ObjectKey{Name: instanceType}, managed); err != nil {
		return fmt.Errorf("reading the managed ClusterQueue to copy: %w", err)
	}
	spec := managed.Spec.DeepCopy()
	spec.AdmissionChecksStrategy, spec.CohortName, spec.StopPolicy = nil, "", nil
	spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: kueueFloorNamespace}}
	cq := &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: kueueFloorQueue}, Spec: *spec}
	if err := r.c.Create(ctx, cq); err != nil {
		return fmt.Errorf("creating the Kueue floor's ClusterQueue: %w", err)
	}
	lq := &kueuev1beta2.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "floor", Namespace: kueueFloorNamespace},
		Spec: kueuev1beta2.LocalQueueSpec{ClusterQueue: kueueFloorQueue}}
	if err := r.c.Create(ctx, lq); err != nil {
		return fmt.Errorf("creating the Kueue floor's LocalQueue: %w", err)
	}
	return poll(ctx, time.Minute, "the Kueue floor's queues active", func() error {
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

// deleteKueueFloor deletes the floor's Pods and their Workloads, and waits until both are gone. The
// Workloads go too because Kueue keeps its finalizer on a deleted Pod of a group until the Pod has
// terminated or its Workload is gone, and KWOK plays no termination (mdplane deletes the Workloads
// of its departed groups likewise).
func (r *Runner) deleteKueueFloor(ctx context.Context) error {
	if err := r.cs.CoreV1().Pods(kueueFloorNamespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return err
	}
	if err := r.c.DeleteAllOf(ctx, &kueuev1beta2.Workload{}, client.InNamespace(kueueFloorNamespace)); err != nil {
		return err
	}
	return poll(ctx, r.cfg.Timeout, "the Kueue floor's Pods and Workloads gone", func() error {
		pods, err := r.cs.CoreV1().Pods(kueueFloorNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		wls := &kueuev1beta2.WorkloadList{}
		if err := r.c.List(ctx, wls, client.InNamespace(kueueFloorNamespace)); err != nil {
			return err
		}
		if n := len(pods.Items) + len(wls.Items); n > 0 {
			return fmt.Errorf("%d Pods, %d Workloads left", len(pods.Items), len(wls.Items))
		}
		return nil
	})
}
