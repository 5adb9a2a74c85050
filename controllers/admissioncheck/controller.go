package admissioncheck

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/workload"
)

// The check's names: the AdmissionCheck object, the controller name Kueue matches it by, and the
// field owner of every verdict this controller writes.
const (
	CheckName      kueue.AdmissionCheckReference = "gpustack-model-deployment-joint"
	ControllerName                               = "worker.gpustack.ai/model-deployment-joint"
	FieldOwner                                   = ControllerName
)

// podsUnseenRetry is how soon a Workload whose Pods the cache does not show yet is judged again.
const podsUnseenRetry = time.Second

// DefaultParkAfter is how long a settled set may hold part of its quota before it is parked.
const DefaultParkAfter = 30 * time.Minute

// Reconciler writes the joint check's verdict on every Workload of a deployment's replica set.
type Reconciler struct {
	Client client.Client
	// Reader reads the API server directly: a lone Workload's owner Pod, which the cache may not
	// show yet.
	Reader    client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	ParkAfter time.Duration

	told told
	// pods files the cache's Pods by group: the Pod watch keeps it.
	pods *podGroups
}

// Judgment is what one reconcile judges: the whole set of a deployment, or a lone Workload whose
// Pods name no deployment. Keying the queue by set, not by member, makes the events of a set's
// hundreds of members (each reserving quota, each admitted) wait as one item while a judgment runs:
// one judgment per set change, not one per member event, each of which would read the whole set.
type Judgment struct {
	Namespace string
	// Deployment names the ModelDeployment whose set is judged.
	Deployment string
	// Workload names a Workload no deployment's Pods claim; set only when Deployment is empty.
	Workload string
}

// SetupWithManager files mdplane's Pods by group, and watches Workloads, each mapped to its set, and
// deployments, so that a scale or an edit re-judges their set.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.pods = newPodGroups()
	return builder.TypedControllerManagedBy[Judgment](mgr).
		Named("joint_admission_workload").
		Watches(&corev1.Pod{}, r.pods.handler()).
		Watches(&kueue.Workload{}, handler.TypedEnqueueRequestsFromMapFunc(r.judgmentOf)).
		Watches(&workerv1.ModelDeployment{}, handler.TypedEnqueueRequestsFromMapFunc(judgmentOfDeployment)).
		Complete(r)
}

// judgmentOf maps a Workload to the set its Pods belong to, or to itself when their Pods name no
// deployment (or are gone).
func (r *Reconciler) judgmentOf(ctx context.Context, obj client.Object) []Judgment {
	deployment := r.pods.deploymentOf(obj.GetNamespace(), obj.GetName())
	if deployment == "" {
		return []Judgment{{Namespace: obj.GetNamespace(), Workload: obj.GetName()}}
	}
	return []Judgment{{Namespace: obj.GetNamespace(), Deployment: deployment}}
}

// judgmentOfDeployment maps a deployment to its set.
func judgmentOfDeployment(_ context.Context, obj client.Object) []Judgment {
	return []Judgment{{Namespace: obj.GetNamespace(), Deployment: obj.GetName()}}
}

// groupKey is a group's place in its deployment.
type groupKey struct {
	role    string
	ordinal int32
}

// Reconcile judges a set (or a lone Workload) and writes the verdict on every member: it reads
// everything first (observe), decides with a pure function (decide), then writes (act).
func (r *Reconciler) Reconcile(ctx context.Context, j Judgment) (reconcile.Result, error) {
	o, err := r.observe(ctx, j)
	if o == nil || err != nil {
		return reconcile.Result{}, err
	}
	if o.podsUnseen {
		return reconcile.Result{RequeueAfter: podsUnseenRetry}, nil
	}
	p := decide(*o, r.Clock.Now(), r.ParkAfter)
	if err := r.act(ctx, o.deployment, p); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: p.requeueAfter}, nil
}

// observe reads what a judgment judges: a lone Workload, or a deployment and its set. Nil when there
// is nothing to judge: the Workload or the deployment is gone (a deleted deployment's groups are
// never admitted: their Pods are going), or no member's ClusterQueue asks for this check (yet).
func (r *Reconciler) observe(ctx context.Context, j Judgment) (*observed, error) {
	if j.Deployment == "" {
		return r.observeLone(ctx, types.NamespacedName{Namespace: j.Namespace, Name: j.Workload})
	}
	md := &workerv1.ModelDeployment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: j.Namespace, Name: j.Deployment}, md); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	set, members, err := r.readSet(ctx, md)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(slices.Collect(maps.Values(members)), judged) {
		return nil, nil
	}
	return &observed{deployment: md, set: set, members: members}, nil
}

// observeLone reads a Workload no deployment claimed at its event; nil when it is gone or does not
// ask for the check. Its Pods are looked up again: a group whose Pods appeared since is a set's.
func (r *Reconciler) observeLone(ctx context.Context, key types.NamespacedName) (*observed, error) {
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, key, wl); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if !judged(wl) {
		return nil, nil
	}
	if deployment := r.pods.deploymentOf(key.Namespace, key.Name); deployment != "" {
		// Its Pods reached the cache after its event: judge its set now, since no other event may
		// come (a set of one group has no other member).
		return r.observe(ctx, Judgment{Namespace: key.Namespace, Deployment: deployment})
	}
	// Kueue makes a pod group's Workload once the group's Pods exist, and owns it by them. A Pod of
	// a deployment's that the cache does not show yet would leave its group judged alone, and
	// approved, admitting part of a set: the owner is read from the API server, and a group of
	// mdplane's Pods is judged again once the cache shows them.
	for _, ref := range wl.OwnerReferences {
		if ref.Kind != "Pod" || ref.APIVersion != "v1" {
			continue
		}
		pod := &corev1.Pod{}
		err := r.reader().Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: ref.Name}, pod)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		case pod.Labels[workerv1.LabelName] == workerv1.NameModelDeployment:
			return &observed{podsUnseen: true}, nil
		}
		break // the Pods of one group are all mdplane's or none
	}
	return &observed{lone: wl}, nil
}

// reader reads what must not come from the cache; the client when no Reader is set.
func (r *Reconciler) reader() client.Reader {
	if r.Reader != nil {
		return r.Reader
	}
	return r.Client
}

// judged reports whether a Workload is this check's to write: its ClusterQueue asks for the check,
// or parking deactivated it.
func judged(wl *kueue.Workload) bool {
	return CheckState(wl, CheckName) != nil || wl.Annotations[workerv1.AnnotationParkedGeneration] != ""
}

// readSet reads the replicas each role declares and each group's Workload, by group name.
func (r *Reconciler) readSet(ctx context.Context, md *workerv1.ModelDeployment) (Set, map[string]*kueue.Workload, error) {
	groups := r.pods.of(md.Namespace, md.Name)
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
	byName := workload.ByName(list.Items)
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
// what was written already is not written again (an unchanged state writes nothing, nor does one
// written since the Workload was read: told).
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
				if r.told.covers(w) {
					continue
				}
				if err := r.write(ctx, w); err != nil {
					return err
				}
				r.told.wrote(w, r.Clock.Now())
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
