package members

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/controllers/qualification"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/controllers/rolemetrics"
	"github.com/mdplane/mdplane/internal/replicas"
)

// DefaultWorkers is how many replicas are materialised at once: a 500-replica role's Pods are
// created in parallel, as a client creating them directly would.
const DefaultWorkers = 16

// memberCreates is the most member Pods of one replica created at once.
const memberCreates = 8

// slotBusyRetry is how soon a replica whose member name or Service is still held by the departing
// replica of its slot looks again.
const slotBusyRetry = 2 * time.Second

// reportInterval is the least time between two status writes of a replica that change what its role
// reads (its size, readiness, qualification, and its Pods all leaving), settleInterval how long such
// a change stands before it is written, and detailInterval the wait of a change of details alone (the
// counts, the Workload's name, its admission state and flavors, the admitted flag). A replica's Pods
// change several times a second while it comes up (created, gated, admitted, scheduled, Ready) and
// its group-forward probe answers within a second of its members turning Ready: the settle folds
// such a burst into one write. Its admission moves seconds to minutes apart (reserved, then
// admitted once its whole set is), and whoever acts on it reads its group's Workload (the role's
// counts, the elastic resize), so it waits for the next change the role reads or detailInterval:
// two writes per replica coming up (its members, its readiness with its verdict). A set of hundreds
// of groups takes minutes from its first reservation to its last Pod Ready, and a shorter wait put a
// third write per replica into its admission, beside Kueue's own writes.
const (
	reportInterval = 5 * time.Second
	settleInterval = 2 * time.Second
	detailInterval = 5 * time.Minute
)

// Reconciler materialises ModelReplicas: it creates the member Pods and the instance Service a
// replica's revision renders (replicas.Materialize), each once and never updated, and reports the
// replica's members and its group's admission on its status.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Workers is the number of replicas materialised at once; DefaultWorkers when 0.
	Workers int
	// Retirements is the rollout controller's retirement book: a replica an operation reserves
	// loses its endpoint eligibility. Without one, the role's status tells.
	Retirements *retirement.Book

	expected *expectations.Creates
	reported *writeTimes
	probes   *probes
	refused  *refusals
}

// SetupWithManager watches ModelReplicas, the Pods and Services they control, their groups'
// Workloads and the revisions they are stamped from. Nodes are read from the cache, through the
// index.NodeImage index that keeps their informer, and not watched: which Nodes hold an image only
// matters when a Pod is created.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.expected, r.reported, r.probes, r.refused = expectations.New(), newWriteTimes(), newProbes(), newRefusals()
	workers := r.Workers
	if workers == 0 {
		workers = DefaultWorkers
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("replica_members").
		For(&v1alpha1.ModelReplica{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(r.workloadReplica)).
		Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(r.revisionReplicas)).
		Watches(&v1alpha1.ModelRole{}, handler.EnqueueRequestsFromMapFunc(r.revisionReplicas)).
		// A node that stops reporting, or reports again, is named by the replicas standing on it.
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.nodeReplicas), builder.WithPredicates(nodeReadinessChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers})
	if r.Retirements != nil {
		// A retirement beginning or ending decides its target's eligibility again.
		b = b.WatchesRawSource(source.Channel(r.Retirements.Subscribe(), handler.EnqueueRequestsFromMapFunc(r.revisionReplicas)))
	}
	return b.Complete(r)
}

// workloadReplica maps a group's Workload to the replica controlling its Pods.
func (r *Reconciler) workloadReplica(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.PodGroup: o.GetName()}); err != nil {
		return nil
	}
	for i := range pods.Items {
		if owner := metav1.GetControllerOf(&pods.Items[i]); owner != nil && owner.Kind == v1alpha1.ModelReplicaKind {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: owner.Name}}}
		}
	}
	return nil
}

// revisionReplicas maps a revision, or a role, to the replicas of the role not yet materialised or
// short of members: a replica created before its revision reached the cache is materialised once it
// does, and one whose role's weights hold lifted gets its missing members.
func (r *Reconciler) revisionReplicas(ctx context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[workerv1.LabelInstance] == "" || l[workerv1.LabelComponent] == "" {
		return nil
	}
	replicas := &v1alpha1.ModelReplicaList{}
	if err := r.Client.List(ctx, replicas, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy,
		client.MatchingLabels(naming.RoleLabels(l[workerv1.LabelInstance], l[workerv1.LabelComponent]))); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	op := (*workerv1.Retirement)(nil)
	if role, ok := o.(*v1alpha1.ModelRole); ok {
		op = r.Retirements.Targeting(role)
	}
	for _, mr := range replicas.Items {
		// Not materialised yet, or short of members (a weights hold kept a lost member from being
		// re-created until its role's hold lifted); or reserved by a retirement, or no longer (its
		// eligibility is decided again).
		if mr.Status.Members == nil || mr.Status.Size != nil && *mr.Status.Members < *mr.Status.Size ||
			op != nil && op.ReplicaOrdinal == mr.Spec.Ordinal || retirementReserved(mr.Status.Qualification) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: mr.Namespace, Name: mr.Name}})
		}
	}
	return reqs
}

// retirementReserved reports whether a replica's last qualification found it reserved by a retirement.
func retirementReserved(q *v1alpha1.Qualification) bool {
	return q != nil && qualification.LegFailed(*q, qualification.LegNoPlannedRetirement)
}

// Reconcile creates what is missing of a replica and reports it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	replica := &v1alpha1.ModelReplica{}
	if err := r.Client.Get(ctx, req.NamespacedName, replica); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if replica.DeletionTimestamp != nil {
		r.probes.forget(replica.UID)
		r.refused.forget(replica.UID)
		return reconcile.Result{}, nil // its Pods leave with it, through their owner reference
	}
	owned := &corev1.PodList{}
	if err := r.Client.List(ctx, owned, client.InNamespace(replica.Namespace), client.MatchingFields{index.PodController: string(replica.UID)}); err != nil {
		return reconcile.Result{}, err
	}
	pods := make([]*corev1.Pod, 0, len(owned.Items))
	for i := range owned.Items {
		pods = append(pods, &owned.Items[i])
	}
	if res, wait, err := r.waits(ctx, replica, pods); wait || err != nil {
		return res, err
	}
	revision, err := r.revision(ctx, replica)
	if err != nil || revision == nil {
		return reconcile.Result{}, err
	}
	if wait := r.refused.wait(replica.UID); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil // a refused create is retried when its backoff ends
	}
	wantPods, wantService := replicas.Materialize(replica, revision)
	var result reconcile.Result
	// The Service and the members are created at once: one after another, a replica's creates took
	// three round trips of a loaded API server, and the workers' concurrency bounded the Pods' pace.
	var serviceBusy bool
	var serviceErr error
	var wg sync.WaitGroup
	if wantService != nil {
		wg.Go(func() { serviceBusy, serviceErr = r.createService(ctx, replica, wantService) })
	}
	created, busy, err := r.createMissing(ctx, replica, wantPods, pods)
	wg.Wait()
	refusal, err := splitRefusal(serviceErr, err)
	if refusal != nil {
		res, reportErr := r.refuse(ctx, replica, refusal)
		return res, errors.Join(err, reportErr)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	r.refused.forget(replica.UID)
	if busy || serviceBusy {
		result.RequeueAfter = slotBusyRetry
	}
	if created > 0 {
		return result, nil // the new members' events bring the replica back, to be reported then
	}
	wait, err := r.report(ctx, replica, pods, len(wantPods), !busy && !serviceBusy)
	if wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
		result.RequeueAfter = wait
	}
	return result, err
}

// slotHeld reports whether Pods of another replica are still in the replica's slot.
func (r *Reconciler) slotHeld(ctx context.Context, replica *v1alpha1.ModelReplica) (bool, error) {
	spec := replica.Spec
	pods := &corev1.PodList{}
	slot := index.SlotKey(spec.DeploymentName, spec.RoleName, strconv.Itoa(int(spec.Ordinal)))
	if err := r.Client.List(ctx, pods, client.InNamespace(replica.Namespace), client.UnsafeDisableDeepCopy,
		client.MatchingFields{index.PodSlot: slot}, client.MatchingLabels(naming.Managed())); err != nil {
		return false, err
	}
	for i := range pods.Items {
		if owner := metav1.GetControllerOf(&pods.Items[i]); owner == nil || owner.UID != replica.UID {
			return true, nil
		}
	}
	return false, nil
}

// waits reports whether the replica's members must not be created now, and when to look again. A
// slot's departing replica keeps it until its last Pod is gone, and then until its group's Workload
// is gone too: the slot's Pods share one Kueue pod group name, and a new member must join neither the
// old group nor a Workload Kueue still accounts for under that name. No Pod is created while the
// role's weights cannot be delivered, a lost member's replacement neither (the members that exist are
// still reported); the role's hold lifting brings the replica back (revisionReplicas).
func (r *Reconciler) waits(ctx context.Context, replica *v1alpha1.ModelReplica, pods []*corev1.Pod) (reconcile.Result, bool, error) {
	if held, err := r.slotHeld(ctx, replica); err != nil || held {
		return reconcile.Result{RequeueAfter: slotBusyRetry}, true, err
	}
	if len(pods) == 0 {
		if held, err := r.previousGroupStands(ctx, replica); err != nil || held {
			return reconcile.Result{RequeueAfter: slotBusyRetry}, true, err
		}
	}
	held, err := r.weightsHeld(ctx, replica)
	if err != nil || !held {
		return reconcile.Result{}, held, err
	}
	_, err = r.report(ctx, replica, pods, int(max(ptr.Deref(replica.Status.Size, 1), 1)), false)
	return reconcile.Result{}, true, err
}

// previousGroupStands reports whether the Workload of the slot's previous group still stands once
// its Pods are gone: one the garbage collector has not deleted yet, or one Kueue has not released
// (its finalizer stays while Kueue is down). Pods created under the name meanwhile would join that
// Workload, and a Kueue restarting then may still count the old one admitted under the name and
// skip the new one for minutes. A Workload nothing owns and nobody deletes does not hold the slot:
// nothing would ever remove it.
func (r *Reconciler) previousGroupStands(ctx context.Context, replica *v1alpha1.ModelReplica) (bool, error) {
	wl := &kueue.Workload{}
	name := workerv1.GroupName(replica.Namespace, replica.Spec.DeploymentName, replica.Spec.RoleName, replica.Spec.Ordinal)
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: name}, wl); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if wl.DeletionTimestamp == nil && len(wl.OwnerReferences) == 0 {
		return false, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("the slot's previous group's Workload still stands; its members wait", "workload", wl.Name, "uid", wl.UID)
	return true, nil
}

// weightsHeld reports whether the replica's role carries the weights hold.
func (r *Reconciler) weightsHeld(ctx context.Context, replica *v1alpha1.ModelReplica) (bool, error) {
	role := &v1alpha1.ModelRole{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: naming.RoleServiceName(replica.Spec.DeploymentName, replica.Spec.RoleName)}, role)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return workerv1.RolloutHeldBy(role.Annotations[workerv1.AnnotationRolloutHeld], workerv1.ReasonRolloutHeldByWeights), nil
}

// revision reads the RoleRevision a replica is stamped from: its ControllerRevision or, while that
// is not in the cache yet, its role's current configuration when the replica is stamped from it
// (the role composes its replicas and its revision in one pass, in no set order, and the
// ControllerRevision holds that configuration byte for byte). It is nil, with nothing to retry,
// while neither is in the cache (their arrival requeues the replica), or when the revision cannot be
// used, which an event says.
func (r *Reconciler) revision(ctx context.Context, replica *v1alpha1.ModelReplica) (*v1alpha1.RoleRevision, error) {
	spec := replica.Spec
	cr := &appsv1.ControllerRevision{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: spec.RevisionName}, cr)
	if apierrors.IsNotFound(err) {
		role := &v1alpha1.ModelRole{}
		err = r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: naming.RoleServiceName(spec.DeploymentName, spec.RoleName)}, role)
		if err == nil && role.Spec.Revision == spec.Revision {
			return replicas.CurrentRevision(role.Spec), nil
		}
		return nil, client.IgnoreNotFound(err)
	}
	if err != nil {
		return nil, err
	}
	revision, err := replicas.ReadRevision(cr)
	if err == nil && revision.Revision != spec.Revision {
		err = fmt.Errorf("revision %s/%s holds revision %q, not the %q the replica was created with", cr.Namespace, cr.Name, revision.Revision, spec.Revision)
	}
	if err != nil {
		r.Recorder.Eventf(replica, cr, corev1.EventTypeWarning, "RevisionUnreadable", "Materialize",
			"%v: the replica's Pods cannot be created; delete the ModelReplica to have its slot refilled from the role's current revision", err)
		return nil, nil
	}
	return revision, nil
}

// createService creates the instance Service unless it exists; busy is true while the Service of
// the slot's departing replica still holds the name.
func (r *Reconciler) createService(ctx context.Context, replica *v1alpha1.ModelReplica, want *corev1.Service) (busy bool, err error) {
	have := &corev1.Service{}
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case err == nil:
		return !metav1.IsControlledBy(have, replica), nil
	case !apierrors.IsNotFound(err):
		return false, err
	}
	if err := r.Client.Create(ctx, want); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		return false, fmt.Errorf("creating Service %s/%s of ModelReplica %s: %w", want.Namespace, want.Name, replica.Name, err)
	}
	return false, nil
}

// createMissing creates each member no Pod of the replica stands for and says how many it created;
// busy is true while a member's name is still held by a Pod of the slot's departing replica. A member
// that exists is never updated: a Pod's configuration changes only by replacing its replica. Image
// delivery's preferred Nodes are read as each member is created (placement).
func (r *Reconciler) createMissing(ctx context.Context, replica *v1alpha1.ModelReplica, want, have []*corev1.Pod) (created int, busy bool, err error) {
	present := map[string]bool{}
	for _, pod := range have {
		present[pod.Labels[workerv1.LabelMemberIndex]] = true
	}
	place := newPlacement(r.Client)
	missing := map[int]*corev1.Pod{}
	for m, pod := range want {
		index := strconv.Itoa(m)
		if r.expected.Awaiting(replica.UID, int32(m), present[index]) || present[index] {
			continue
		}
		if err := place.place(ctx, pod); err != nil {
			return 0, false, err
		}
		missing[m] = pod
	}
	// The missing members are created at once, at most memberCreates at a time.
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	slots := make(chan struct{}, memberCreates)
	for m, pod := range missing {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			err := r.Client.Create(ctx, pod)
			if err == nil {
				r.expected.Created(replica.UID, int32(m))
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case apierrors.IsAlreadyExists(err):
				busy = true
			default:
				errs = append(errs, fmt.Errorf("creating member %d of ModelReplica %s/%s: %w", m, replica.Namespace, replica.Name, err))
			}
		})
	}
	wg.Wait()
	return created, busy, errors.Join(errs...)
}

// report writes the replica's members and admission when they changed: the first report at once,
// then a change the role reads once it has settled and reportInterval has passed since the last
// write, a change of details alone after detailInterval unless a change the role reads carries it;
// wait is how long a change waits for its write. accepted says the API server accepted every create
// of the replica: its PodsCreated condition turns True.
func (r *Reconciler) report(ctx context.Context, replica *v1alpha1.ModelReplica, pods []*corev1.Pod, size int, accepted bool) (wait time.Duration, err error) {
	group := workerv1.GroupName(replica.Namespace, replica.Spec.DeploymentName, replica.Spec.RoleName, replica.Spec.Ordinal)
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: group}, wl); err != nil {
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
		wl = nil
	}
	status := replicas.MemberStatus(pods, wl, group, replica.Spec.RoleName, size)
	if status.PreemptedBy, err = r.preemptedBy(ctx, wl, pods, status.Quota, r.carriedPreemption(ctx, replica)); err != nil {
		return 0, err
	}
	if status.LostNode, err = r.lostNode(ctx, pods); err != nil {
		return 0, err
	}
	if status.PreemptedBy != "" && replicas.WaitsAfterPreemption(status.Quota) {
		status.Quota = replicas.QuotaPreempted
	}
	status.ConditionedStatus = *replica.Status.ConditionedStatus.DeepCopy()
	status.SetConditions(readiness(status))
	if accepted {
		status.SetConditions(replicas.ReplicaPodsCreated(""))
	}
	var recheck time.Duration
	if status.Qualification, recheck, err = r.qualify(ctx, replica, pods, size); err != nil {
		return 0, err
	}
	if equality.Semantic.DeepEqual(status, replica.Status) {
		r.reported.settled(replica.UID)
		return recheck, nil
	}
	kind := detailChange
	switch {
	case replica.Status.Members == nil:
		kind = firstReport
	case status.PreemptedBy != "" && status.PreemptedBy != replica.Status.PreemptedBy:
		kind = preemptionReport
	case readByRole(status) != readByRole(replica.Status):
		kind = roleChange
	}
	wait = r.reported.wait(replica.UID, kind)
	if kind == firstReport {
		wait = r.reported.firstReportWait(replica.CreationTimestamp.Time)
	}
	if wait > 0 {
		if recheck > 0 {
			wait = min(wait, recheck)
		}
		return wait, nil
	}
	patch := client.MergeFrom(replica.DeepCopy())
	was := replica.Status
	replica.Status = status
	if err := r.Client.Status().Patch(ctx, replica, patch); err != nil {
		return 0, client.IgnoreNotFound(fmt.Errorf("reporting ModelReplica %s/%s: %w", replica.Namespace, replica.Name, err))
	}
	r.reported.wrote(replica.UID)
	rolemetrics.ObserveReplicaReport(replica.CreationTimestamp.Time, was, status, time.Now())
	return recheck, nil
}

// refuse reports a create the API server refused: the replica's PodsCreated condition False with
// the API server's message, at once (the role and the deployment carry it on), and a Warning event
// on the replica's deployment naming the role and the replica, where its user looks. The create is
// retried after a backoff.
func (r *Reconciler) refuse(ctx context.Context, replica *v1alpha1.ModelReplica, refusal error) (reconcile.Result, error) {
	message := apiServerMessage(refusal)
	result := reconcile.Result{RequeueAfter: r.refused.refused(replica.UID)}
	r.Recorder.Eventf(r.deploymentOf(ctx, replica), replica, corev1.EventTypeWarning, string(v1alpha1.PodRefusedReason), "Create",
		"role %s replica %d: %s", replica.Spec.RoleName, replica.Spec.Ordinal, message)
	condition := replicas.ReplicaPodsCreated(message)
	if replica.Status.GetCondition(condition.Type).Equal(condition) {
		return result, nil
	}
	patch := client.MergeFrom(replica.DeepCopy())
	replica.Status.SetConditions(condition)
	if err := r.Client.Status().Patch(ctx, replica, patch); err != nil {
		return result, client.IgnoreNotFound(fmt.Errorf("reporting ModelReplica %s/%s: %w", replica.Namespace, replica.Name, err))
	}
	r.reported.wrote(replica.UID)
	return result, nil
}

// splitRefusal separates the first of errs the API server refused (refusedByAPIServer) from the
// others, which are retried as any failed reconcile is.
func splitRefusal(errs ...error) (refusal, rest error) {
	var others []error
	for _, err := range flatten(errs) {
		if refusal == nil && refusedByAPIServer(err) {
			refusal = err
			continue
		}
		others = append(others, err)
	}
	return refusal, errors.Join(others...)
}

// flatten lists the errors errors.Join combined.
func flatten(errs []error) []error {
	var out []error
	for _, err := range errs {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			out = append(out, flatten(joined.Unwrap())...)
		} else if err != nil {
			out = append(out, err)
		}
	}
	return out
}

// deploymentOf is what a replica's refusals are recorded on: its ModelDeployment, the controller of
// its role; the replica itself while the role is not in the cache.
func (r *Reconciler) deploymentOf(ctx context.Context, replica *v1alpha1.ModelReplica) runtime.Object {
	name := naming.RoleServiceName(replica.Spec.DeploymentName, replica.Spec.RoleName)
	if owner := metav1.GetControllerOf(replica); owner != nil && owner.Kind == v1alpha1.ModelRoleKind {
		name = owner.Name
	}
	role := &v1alpha1.ModelRole{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: name}, role); err != nil {
		return replica
	}
	owner := metav1.GetControllerOf(role)
	if owner == nil || owner.Kind != workerv1.ModelDeploymentKind {
		return replica
	}
	return &corev1.ObjectReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Namespace: replica.Namespace, Name: owner.Name, UID: owner.UID}
}

// Reasons of a replica's Ready condition.
const (
	ReasonMembersReady    xpv2.ConditionReason = "MembersReady"
	ReasonMembersNotReady xpv2.ConditionReason = "MembersNotReady"
)

// readiness is the replica's Ready condition, which its role counts ready replicas by: True once as
// many members as its revision gives it exist and are Ready (ModelReplicaStatus.Ready).
func readiness(s v1alpha1.ModelReplicaStatus) xpv2.Condition {
	c := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: ReasonMembersNotReady, LastTransitionTime: metav1.Now()}
	if s.Ready() {
		c.Status, c.Reason = corev1.ConditionTrue, ReasonMembersReady
	}
	size := ptr.Deref(s.Size, 0)
	c.Message = fmt.Sprintf("%d of %d members exist, %d Ready", ptr.Deref(s.Members, 0), size, ptr.Deref(s.ReadyMembers, 0))
	return c
}

// roleView is what a replica's role and deployment read of its status.
type roleView struct {
	// leaving is whether every member is terminating: the role counts the slot Terminating. Its
	// other admission states the role reads from the group's Workload, which has them first.
	leaving bool
	size    int32
	ready   bool
	// WeightsReady's status reads whether every live member has its volumes and its engine Ready;
	// how many do not is a detail (the condition's message), which a member count moves with every
	// Pod coming up.
	volumesBehind, enginesBehind bool
	// The role's eligible count and activation read whether the replica is conclusive, qualified
	// and labelled; which inconclusive verdict it holds is a detail (the condition's reason).
	conclusive, qualified, granted bool
	// podsCreated is the PodsCreated condition's status and message, which the role carries on.
	podsCreated string
	// preemptedBy is who Kueue preempted the group for, which the role and the deployment tell.
	preemptedBy string
	// lostNode names a node of the replica's that stopped reporting, which the deployment tells.
	lostNode string
}

func readByRole(s v1alpha1.ModelReplicaStatus) roleView {
	live := ptr.Deref(s.Live, v1alpha1.MemberCounts{})
	v := roleView{leaving: s.Quota == replicas.QuotaTerminating, size: ptr.Deref(s.Size, 0), ready: s.Ready(), preemptedBy: s.PreemptedBy, lostNode: s.LostNode,
		volumesBehind: live.Started < live.Live, enginesBehind: live.MainReady < live.Live}
	if c := s.GetCondition(v1alpha1.PodsCreatedConditionType); c.Reason != "" {
		v.podsCreated = string(c.Status) + ": " + c.Message
	}
	if q := s.Qualification; q != nil {
		v.qualified, v.granted = q.Verdict == v1alpha1.QualificationQualified, q.Granted
		v.conclusive = v.qualified || q.Verdict == v1alpha1.QualificationNotQualified
	}
	return v
}
