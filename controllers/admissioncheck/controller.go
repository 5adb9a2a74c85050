package admissioncheck

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// The check's names: the AdmissionCheck object, the controller name Kueue matches it by, and the
// field owner of every verdict this controller writes.
const (
	CheckName      kueue.AdmissionCheckReference = "gpustack-model-deployment-joint"
	ControllerName                               = "worker.gpustack.ai/model-deployment-joint"
	FieldOwner                                   = ControllerName
)

// DefaultParkAfter is how long a settled set may hold part of its quota before it is parked.
const DefaultParkAfter = 30 * time.Minute

// Reconciler writes the joint check's verdict on every Workload of a deployment's replica set.
type Reconciler struct {
	Client    client.Client
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	ParkAfter time.Duration
}

// SetupWithManager watches Workloads, and deployments so that a scale or an edit re-judges their set.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("joint_admission_workload").
		For(&kueue.Workload{}).
		Watches(&workerv1.ModelDeployment{}, handler.EnqueueRequestsFromMapFunc(r.workloadsOfDeployment)).
		Complete(r)
}

// workloadsOfDeployment maps a deployment to the Workloads of its groups.
func (r *Reconciler) workloadsOfDeployment(ctx context.Context, obj client.Object) []reconcile.Request {
	groups, err := r.groups(ctx, obj.GetNamespace(), obj.GetName())
	if err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for name := range groups {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}})
	}
	return reqs
}

// groupKey is a group's place in its deployment.
type groupKey struct {
	role    string
	ordinal int32
}

// groups returns the pod groups of a deployment, by group name, from its Pods' labels.
func (r *Reconciler) groups(ctx context.Context, namespace, deployment string) (map[string]groupKey, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingFields{index.PodDeployment: deployment},
		client.MatchingLabels(naming.Managed()), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := map[string]groupKey{}
	for _, p := range pods.Items {
		name := p.Labels[workerv1.LabelPodGroupName]
		ordinal, err := strconv.ParseInt(p.Labels[workerv1.LabelPodOrdinal], 10, 32)
		if name == "" || err != nil {
			continue
		}
		out[name] = groupKey{role: p.Labels[workerv1.LabelComponent], ordinal: int32(ordinal)}
	}
	return out, nil
}

// Reconcile judges the set the Workload belongs to and writes the verdict on every member: it reads
// everything first (observe), decides with a pure function (decide), then writes (act).
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	o, err := r.observe(ctx, req.NamespacedName)
	if o == nil || err != nil {
		return reconcile.Result{}, err
	}
	p := decide(*o, r.Clock.Now(), r.ParkAfter)
	if err := r.act(ctx, o.deployment, p); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: p.requeueAfter}, nil
}

// observe reads a Workload, its deployment and the deployment's set; nil when the Workload is gone
// or its ClusterQueue does not ask for this check (yet).
func (r *Reconciler) observe(ctx context.Context, key types.NamespacedName) (*observed, error) {
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, key, wl); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if CheckState(wl, CheckName) == nil && wl.Annotations[workerv1.AnnotationParkedGeneration] == "" {
		return nil, nil
	}
	md, err := r.deploymentOf(ctx, wl)
	if err != nil || md == nil {
		return &observed{workload: wl}, err
	}
	set, members, err := r.readSet(ctx, md)
	if err != nil {
		return nil, err
	}
	if _, ok := members[wl.Name]; !ok {
		members[wl.Name] = wl // a member whose Pods are gone still gets the set's verdict
	}
	return &observed{workload: wl, deployment: md, set: set, members: members}, nil
}

// readSet reads the replicas each role declares and each group's Workload, by group name.
func (r *Reconciler) readSet(ctx context.Context, md *workerv1.ModelDeployment) (Set, map[string]*kueue.Workload, error) {
	groups, err := r.groups(ctx, md.Namespace, md.Name)
	if err != nil {
		return Set{}, nil, err
	}
	set := Set{Declared: map[string]int32{}}
	for _, role := range md.Spec.Roles {
		set.Declared[role.Name] = role.WithDefaults().Replicas
	}
	// Every Workload event of a set of hundreds judges the whole set: the cache's objects are read in
	// place, not copied, and never written to (a write names its Workload and sends a patch).
	list := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, list, client.InNamespace(md.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return Set{}, nil, err
	}
	byName := make(map[string]*kueue.Workload, len(list.Items))
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	members := map[string]*kueue.Workload{}
	for _, name := range slices.Sorted(maps.Keys(groups)) {
		member := byName[name]
		if member != nil {
			members[name] = member
		}
		set.Groups = append(set.Groups, Group{Role: groups[name].role, Ordinal: groups[name].ordinal, Workload: member})
	}
	return set, members, nil
}

// verdictWriters bounds the writes of one verdict in flight at once. A set of hundreds turns Ready
// in one judgment, and its members' writes made one after another would take the round trips of
// them all; the API server's priority and fairness, not this bound, paces a busy cluster.
const verdictWriters = 16

// act makes a plan's writes, each member's in order and the members' side by side, then counts and
// reports what they did.
func (r *Reconciler) act(ctx context.Context, md *workerv1.ModelDeployment, p plan) error {
	if p.log != "" {
		ctrl.LoggerFrom(ctx).Info(p.log, "deployment", md.Name)
	}
	if err := r.writeAll(ctx, p.writes); err != nil {
		return err
	}
	if p.parked {
		setsParked.Inc()
	}
	if p.admitted {
		setsAdmitted.Inc()
	}
	if p.waited != nil {
		admissionWait.Observe(p.waited.Seconds())
	}
	if p.event != nil {
		r.Recorder.Eventf(md, nil, p.event.eventType, p.event.reason, p.event.action, "%s", p.event.message)
	}
	return nil
}

// writeAll applies writes: those of one Workload in their order (a parked member's check before its
// deactivation), those of different Workloads concurrently, at most verdictWriters at once. The
// first error is returned once every started write has ended; the reconcile is then retried, and
// what was written already is not written again (an unchanged state writes nothing).
func (r *Reconciler) writeAll(ctx context.Context, writes []write) error {
	var order []string
	byWorkload := map[string][]write{}
	for _, w := range writes {
		if _, seen := byWorkload[w.workload.Name]; !seen {
			order = append(order, w.workload.Name)
		}
		byWorkload[w.workload.Name] = append(byWorkload[w.workload.Name], w)
	}
	var g errgroup.Group
	g.SetLimit(verdictWriters)
	for _, name := range order {
		g.Go(func() error {
			for _, w := range byWorkload[name] {
				if err := r.write(ctx, w); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// write applies one write of a plan: a check state, or a Workload's activation.
func (r *Reconciler) write(ctx context.Context, w write) error {
	if w.check != nil {
		return r.setCheck(ctx, w.workload, *w.check)
	}
	return r.setActive(ctx, w.workload, *w.active, w.parkedGeneration)
}

// deploymentOf finds the deployment a Workload's Pods belong to, or nil when it is not a
// deployment's replica group (or the deployment is gone).
func (r *Reconciler) deploymentOf(ctx context.Context, wl *kueue.Workload) (*workerv1.ModelDeployment, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(wl.Namespace), client.MatchingFields{index.PodGroup: wl.Name},
		client.MatchingLabels(naming.Managed()), client.Limit(1)); err != nil {
		return nil, err
	}
	if len(pods.Items) == 0 || pods.Items[0].Labels[workerv1.LabelInstance] == "" {
		return nil, nil
	}
	md := &workerv1.ModelDeployment{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: wl.Namespace, Name: pods.Items[0].Labels[workerv1.LabelInstance]}, md)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return md, err
}

// setCheck applies this check's state on a Workload under the controller's field owner.
func (r *Reconciler) setCheck(ctx context.Context, wl *kueue.Workload, state kueue.AdmissionCheckState) error {
	patch := kueueac.Workload(wl.Name, wl.Namespace).WithStatus(kueueac.WorkloadStatus().WithAdmissionChecks(
		kueueac.AdmissionCheckState().WithName(CheckName).WithState(state.State).WithMessage(state.Message).WithLastTransitionTime(state.LastTransitionTime)))
	err := r.Client.Status().Apply(ctx, patch, client.FieldOwner(FieldOwner), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("writing the %s check on Workload %s/%s: %w", CheckName, wl.Namespace, wl.Name, err)
	}
	return nil
}

// activePatch is the JSON merge patch that activates or deactivates a Workload (a nil annotation
// removes it). It is a merge patch, not an apply: spec.active keeps the owner it always had.
type activePatch struct {
	Metadata struct {
		Annotations map[string]*string `json:"annotations"`
	} `json:"metadata"`
	Spec struct {
		Active bool `json:"active"`
	} `json:"spec"`
}

// setActive activates or deactivates a Workload, recording the generation it was parked at.
func (r *Reconciler) setActive(ctx context.Context, wl *kueue.Workload, active bool, parkedGeneration string) error {
	var patch activePatch
	patch.Metadata.Annotations = map[string]*string{workerv1.AnnotationParkedGeneration: nil}
	if parkedGeneration != "" {
		patch.Metadata.Annotations[workerv1.AnnotationParkedGeneration] = &parkedGeneration
	}
	patch.Spec.Active = active
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	target := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: wl.Name, Namespace: wl.Namespace}} // wl may be the cache's own
	if err := r.Client.Patch(ctx, target, client.RawPatch(types.MergePatchType, raw)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting Workload %s/%s active=%t: %w", wl.Namespace, wl.Name, active, err)
	}
	return nil
}
