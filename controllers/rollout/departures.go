package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/controllers/internal/preemptor"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/internal/pacing"
	"github.com/mdplane/mdplane/internal/workload"
)

// Departures handles a replica losing a member and a replica being deleted.
//
// A member going (Kueue preemption, a drain or eviction, `kubectl delete pod`) retires the whole
// replica: an instance is the unit of replacement, and a deleted member of an admitted group is held
// until the group's Workload goes anyway. The slot is then refilled on the current revision.
//
// A replica being deleted (a scale-down, a retirement) has its own Pods deleted at once rather than
// left to the garbage collector, whose view of composite kinds lags by its discovery period. Only the
// replica's own Pods go (by controller reference): a replacement in the same slot is never touched.
// Its leaving was already said on the deployment by whoever deleted it (ReplicaLeaving), so its
// members going say nothing more.
//
// The deployment hears of each departure and restart once, by the replica events' triggers: a member
// with a deletion timestamp is ReplicaLeaving (ReplicaEvicted when an eviction deletes it), and a
// member whose containers' restart count rose is ReplicaRestarted.
//
// A member can be gone from the API server before a reconcile sees it leaving: a Pod on no node, or
// on a node that acknowledges at once, is removed moments after its deletion. The Pod watch keeps the
// last state of each deleted member until its replica's reconcile takes it, so such a departure
// retires the replica and is told with its reason like any other.
type Departures struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Deletes are the deletes the cache has not shown yet, shared with the pacer; none when nil.
	Deletes *expectations.Deletes
	// Retirements is the pacer's record of each role's replacement in flight; without one, the
	// role's status says.
	Retirements *retirement.Book

	// gone holds, by replica, the last state of a member the Pod watch saw deleted (MemberDeleted).
	gone sync.Map
}

// SetupWithManager watches ModelReplicas and the Pods they control.
func (d *Departures) SetupWithManager(mgr ctrl.Manager) error {
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.ModelReplica{}, handler.OnlyControllerOwner())
	return ctrl.NewControllerManagedBy(mgr).
		Named("replica_departure").
		For(&v1alpha1.ModelReplica{}).
		Watches(&corev1.Pod{}, memberEvents{EventHandler: owner, departures: d}).
		Complete(d)
}

// memberEvents enqueues a Pod's replica as EnqueueRequestForOwner does, and tells Departures of a
// deleted member first.
type memberEvents struct {
	handler.EventHandler
	departures *Departures
}

func (m memberEvents) Delete(ctx context.Context, e ctrlevent.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if p, ok := e.Object.(*corev1.Pod); ok {
		m.departures.MemberDeleted(p)
	}
	m.EventHandler.Delete(ctx, e, q)
}

// goneMember is a deleted member as the watch last saw it, with its replica's UID.
type goneMember struct {
	replica types.UID
	pod     *corev1.Pod
}

// MemberDeleted keeps the last state of a deleted Pod of a replica, for the replica's next
// reconcile: a Pod the API server removed is a departure the reconcile no longer finds.
func (d *Departures) MemberDeleted(p *corev1.Pod) {
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "ModelReplica" {
		return
	}
	last := p.DeepCopy()
	if last.DeletionTimestamp == nil {
		last.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	}
	d.gone.Store(types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}, goneMember{replica: ref.UID, pod: last})
}

// goneOf returns the member of this replica the watch saw deleted, if any; it is kept until the
// replica is retired or gone. A member of an earlier replica of the same name is forgotten.
func (d *Departures) goneOf(replica *v1alpha1.ModelReplica) *corev1.Pod {
	key := client.ObjectKeyFromObject(replica)
	v, ok := d.gone.Load(key)
	if !ok {
		return nil
	}
	if v.(goneMember).replica != replica.UID {
		d.gone.CompareAndDelete(key, v)
		return nil
	}
	return v.(goneMember).pod
}

// Reconcile retires a replica that lost a member, and deletes a departing replica's standing Pods.
func (d *Departures) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	replica := &v1alpha1.ModelReplica{}
	if err := d.Client.Get(ctx, req.NamespacedName, replica); err != nil {
		if apierrors.IsNotFound(err) {
			d.gone.Delete(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	own, err := ownPods(ctx, d.Client, replica)
	if err != nil {
		return reconcile.Result{}, err
	}
	if replica.DeletionTimestamp != nil {
		d.gone.Delete(req.NamespacedName)
		return reconcile.Result{}, deletePods(ctx, d.Client, d.Deletes, replica, own)
	}
	role, err := d.role(ctx, replica)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := d.reportRestarts(ctx, replica, own); err != nil {
		return reconcile.Result{}, err
	}
	lost := lostMember(own)
	if lost == nil {
		lost = d.goneOf(replica)
	}
	if lost == nil {
		// A member that ended (Failed or Succeeded) is gone for good under restartPolicy Always: the
		// kubelet evicted it (node pressure), shut it down with its node or refused it at admission,
		// and nothing restarts it. It leaves as a deleted member does and its replica is rebuilt.
		lost = terminalMember(own)
	}
	if lost == nil {
		return reconcile.Result{}, nil
	}
	inFlight := int32(-1)
	if role != nil {
		inFlight = inFlightOf(d.Retirements.Replacement(role))
	}
	if waitsBehind(inFlight, replica.Spec.Ordinal) {
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return d.rebuild(ctx, replica, lost)
}

// role reads the replica's ModelRole, nil when it is gone.
func (d *Departures) role(ctx context.Context, replica *v1alpha1.ModelReplica) (*v1alpha1.ModelRole, error) {
	role := &v1alpha1.ModelRole{}
	err := d.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: naming.RoleServiceName(replica.Spec.DeploymentName, replica.Spec.RoleName)}, role)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return role, nil
}

// terminalMember is the first member that ended (phase Succeeded or Failed) and is not being
// deleted.
func terminalMember(own []corev1.Pod) *corev1.Pod {
	for i := range own {
		if p := &own[i]; p.DeletionTimestamp == nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			return p
		}
	}
	return nil
}

// waitsBehind reports whether a broken replica waits behind a replacement already in flight in its
// role: one replica missing at a time. The pacer's progress (its Pod and Workload events) brings it
// back.
func waitsBehind(inFlight, ordinal int32) bool {
	return inFlight >= 0 && inFlight != ordinal
}

// rebuild retires a replica that lost a member, and says why on the deployment: once, by the
// pass whose delete took. The delete carries the replica's resourceVersion, so a pass reading a
// cache that has not yet seen an earlier pass's delete (the member's Pod events come in a burst)
// is refused rather than deleting it again and telling it twice; a replica gone already is not
// told either. A refusal for a newer replica read again: requeue.
func (d *Departures) rebuild(ctx context.Context, replica *v1alpha1.ModelReplica, lost *corev1.Pod) (reconcile.Result, error) {
	reason, why := d.departureReason(ctx, replica, lost)
	if err := d.keepPreemption(ctx, replica, lost); err != nil {
		return reconcile.Result{}, err
	}
	backoff, err := d.countReadyTimeout(ctx, replica, reason, why)
	if err != nil {
		return reconcile.Result{}, err
	}
	err = d.Client.Delete(ctx, replica, client.Preconditions{UID: &replica.UID, ResourceVersion: &replica.ResourceVersion})
	if err == nil || apierrors.IsNotFound(err) {
		d.gone.Delete(client.ObjectKeyFromObject(replica))
	}
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("retiring ModelReplica %s/%s after its member %s left: %w", replica.Namespace, replica.Name, lost.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("a member left; retired the whole replica", "replica", replica.Name, "pod", lost.Name, "reason", reason)
	rebuilt := "is rebuilt"
	if backoff != "" {
		rebuilt = "is rebuilt after " + backoff
	}
	d.event(ctx, replica, reason, "Rebuild",
		"replica r%d of role %s lost member %s (%s); the whole instance %s on the current configuration, and the cache blocks it held stay leased for the %s kv_lease_duration window, then its siblings lose them",
		replica.Spec.Ordinal, replica.Spec.RoleName, lost.Name, why, rebuilt, pacing.LeaseWindow)
	return reconcile.Result{}, nil
}

// keepPreemption records on the replica's role, before the rebuild deletes the replica, who Kueue
// preempted its group for: the replacement reads it there while its group waits for quota, once
// the replica, its Workload and its stopped members, which said so, are gone. Nothing for a
// departure that is not a preemption.
func (d *Departures) keepPreemption(ctx context.Context, replica *v1alpha1.ModelReplica, lost *corev1.Pod) error {
	text := replica.Status.PreemptedBy
	if text == "" {
		wl := &kueue.Workload{}
		name := workerv1.GroupName(replica.Namespace, replica.Spec.DeploymentName, replica.Spec.RoleName, replica.Spec.Ordinal)
		if err := d.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: name}, wl); err != nil {
			if !apierrors.IsNotFound(err) {
				return err
			}
			wl = nil
		}
		found, preempted, err := preemptor.Of(ctx, d.Client, wl, []*corev1.Pod{lost})
		if err != nil || !preempted {
			return err
		}
		text = found
	}
	if err := d.keepForSlot(ctx, replica, "preemptions", text); err != nil {
		return fmt.Errorf("keeping that replica %s was preempted: %w", replica.Name, err)
	}
	return nil
}

// keepForSlot merges value into the replica's role's status map field under the replica's slot
// ("r<ordinal>"), leaving the other slots' entries; a role that is gone keeps nothing.
func (d *Departures) keepForSlot(ctx context.Context, replica *v1alpha1.ModelReplica, field string, value any) error {
	entry, err := json.Marshal(map[string]any{"status": map[string]any{field: map[string]any{v1alpha1.SlotKey(replica.Spec.Ordinal): value}}})
	if err != nil {
		return err
	}
	role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Namespace: replica.Namespace, Name: naming.RoleServiceName(replica.Spec.DeploymentName, replica.Spec.RoleName)}}
	if err := d.Client.Status().Patch(ctx, role, client.RawPatch(types.MergePatchType, entry)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("patching status.%s of ModelRole %s/%s: %w", field, role.Namespace, role.Name, err)
	}
	return nil
}

// countReadyTimeout records on the replica's role, before the rebuild deletes the replica, that
// Kueue evicted its group at the waitForPodsReady timeout: one more in a row for its slot, which the
// pacer then leaves vacant for pacing.ReadyTimeoutBackoff. It returns the backoff in words, "" for a
// departure of another cause.
func (d *Departures) countReadyTimeout(ctx context.Context, replica *v1alpha1.ModelReplica, reason, why string) (string, error) {
	if reason != "ReplicaEvicted" || !strings.HasPrefix(why, kueueEvicted+kueue.WorkloadEvictedByPodsReadyTimeout+":") {
		return "", nil
	}
	role, err := d.role(ctx, replica)
	if err != nil || role == nil {
		return "", err
	}
	slot := v1alpha1.SlotKey(replica.Spec.Ordinal)
	count := role.Status.ReadyTimeouts[slot].Count
	if last := role.Status.ReadyTimeouts[slot].Evicted; count == 0 || last.Before(&replica.CreationTimestamp) {
		count++ // not this replica's eviction counted already, by a pass whose delete was refused
	}
	now := metav1.Now()
	record := v1alpha1.ReadyTimeout{Count: count, Evicted: now, Until: metav1.NewTime(now.Add(pacing.ReadyTimeoutBackoff(count))), Message: why}
	if err := d.keepForSlot(ctx, replica, "readyTimeouts", record); err != nil {
		return "", fmt.Errorf("counting that replica %s outlasted the PodsReady timeout: %w", replica.Name, err)
	}
	return fmt.Sprintf("%s (%d PodsReady timeouts in a row)", pacing.ReadyTimeoutBackoff(count), count), nil
}

// event records a Warning event on the replica's deployment, where a person looks; none when it
// is gone.
func (d *Departures) event(ctx context.Context, replica *v1alpha1.ModelReplica, reason, action, note string, args ...any) {
	md := &workerv1.ModelDeployment{}
	if err := d.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: replica.Spec.DeploymentName}, md); err == nil {
		d.Recorder.Eventf(md, nil, corev1.EventTypeWarning, reason, action, note, args...)
	}
}

// deletePods deletes a departing replica's standing Pods at once, each while it is the Pod read.
func deletePods(ctx context.Context, c client.Client, deletes *expectations.Deletes, replica *v1alpha1.ModelReplica, own []corev1.Pod) error {
	for i := range own {
		p := &own[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := deleteOnce(ctx, c, deletes, p); err != nil {
			return fmt.Errorf("deleting Pod %s/%s of departing replica %s: %w", p.Namespace, p.Name, replica.Name, err)
		}
	}
	return nil
}

// ownPods lists the Pods the replica controls.
func ownPods(ctx context.Context, c client.Reader, replica *v1alpha1.ModelReplica) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(replica.Namespace), client.MatchingFields{index.PodController: string(replica.UID)},
		client.MatchingLabels(naming.ReplicaLabels(replica.Spec.DeploymentName, replica.Spec.RoleName, replica.Spec.Ordinal))); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// lostMember returns a member being deleted, or nil. A member merely not Ready (a NotReady node, a
// failing probe) is not a departure.
func lostMember(own []corev1.Pod) *corev1.Pod {
	for i := range own {
		if own[i].DeletionTimestamp != nil {
			return &own[i]
		}
	}
	return nil
}

// The condition Kueue's Pod integration sets on a Pod it stops, and the reason's prefix when it
// stops the Pod because its Workload was evicted (the eviction's own reason follows).
const kueueTerminationTarget corev1.PodConditionType = "TerminationTarget"

const kueueEvictedPrefix = "WorkloadEvictedDueTo"

// kueueEvicted begins the words of a departure Kueue's eviction caused; its reason follows.
const kueueEvicted = "Kueue evicted its group: "

// departureReason names the path a member left by: Kueue evicting or preempting the group, the
// eviction API (a drain), or any other deletion; an Elastic EP member that ended leaves too, as
// the rebuild deletes it. None of these restarts a container, so none is ReplicaRestarted.
func (d *Departures) departureReason(ctx context.Context, replica *v1alpha1.ModelReplica, lost *corev1.Pod) (reason, why string) {
	wl := &kueue.Workload{}
	name := workerv1.GroupName(replica.Namespace, replica.Spec.DeploymentName, replica.Spec.RoleName, replica.Spec.Ordinal)
	if d.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: name}, wl) == nil {
		if c := workload.Evicted(wl); c != nil {
			return "ReplicaEvicted", kueueEvicted + c.Reason + ": " + c.Message
		}
	}
	for _, c := range lost.Status.Conditions {
		// Kueue marks each Pod it stops for an eviction (TerminationTarget, reason
		// WorkloadEvictedDueTo<why>) before deleting it; the group's Workload may already be gone,
		// deleted once none of its Pods stands, when this reconcile runs.
		if why, evicted := strings.CutPrefix(c.Reason, kueueEvictedPrefix); evicted && c.Type == kueueTerminationTarget && c.Status == corev1.ConditionTrue {
			return "ReplicaEvicted", kueueEvicted + why + ": " + c.Message
		}
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return "ReplicaEvicted", "evicted: " + c.Reason + ": " + c.Message
		}
	}
	if lost.DeletionTimestamp == nil {
		why := "the Pod ended in phase " + string(lost.Status.Phase)
		if lost.Status.Reason != "" {
			why += " (" + lost.Status.Reason + ": " + lost.Status.Message + ")"
		}
		return "ReplicaLeaving", why
	}
	return "ReplicaLeaving", "the Pod was deleted"
}
