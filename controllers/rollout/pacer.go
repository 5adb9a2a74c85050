package rollout

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/controllers/internal/rolekey"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/internal/pacing"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/workload"
)

// Pacer keeps a role's slots filled and turns its outdated replicas over one at a time behind Kueue
// admission.
type Pacer struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Reader reads what is not cached (EndpointSlices); the Client when nil.
	Reader client.Reader
	// Scraper takes the retirement protocol's drain reads; without it a drain is never proven.
	Scraper DrainScraper
	// Budgets are the retirement protocol's; retirement.DefaultBudgets when zero.
	Budgets retirement.Budgets
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Retirements holds each deployment's retirement operation; a book of its own when nil. The
	// roles controller reads the same book to report the operation on its role.
	Retirements *retirement.Book
	// Deletes are the deletes the cache has not shown yet, shared with the departures and the
	// Workload reaper, which delete the same members and Workloads; a memory of its own when nil.
	Deletes *expectations.Deletes

	once      sync.Once
	expected  *expectations.Creates // the replicas created and not yet in the cache, per role and ordinal
	vacancies vacancies             // the slots a departed replica left, until they are filled
}

// init makes what the zero Pacer lacks.
func (p *Pacer) init() {
	p.expected = expectations.New()
	if p.Retirements == nil {
		p.Retirements = retirement.NewBook()
	}
	if p.Deletes == nil {
		p.Deletes = expectations.NewDeletes()
	}
}

// createWorkers bounds the creates of one pass in flight at once: a new role of hundreds of
// replicas gets them in seconds without one pass flooding the API server.
const createWorkers = 16

// SetupWithManager watches ModelRoles, their ModelReplicas and their groups' Workloads.
func (p *Pacer) SetupWithManager(mgr ctrl.Manager) error {
	p.once.Do(p.init)
	toRole := rolekey.Requests
	// A pass reads every slot of the role, so only the changes a pass reads wake it: a replica or
	// Pod coming or going, a Pod's scheduling gates or revoked eligibility, a Workload's admission. The status churn of a
	// role's hundreds of Pods and replicas coming up would otherwise run a pass per event; the events
	// that remain, hundreds a second while a large role comes up, share a pass per passGap.
	perPass := func(h handler.EventHandler) handler.EventHandler { return rolekey.Coalesced(h, passGap) }
	return ctrl.NewControllerManagedBy(mgr).
		Named("role_rollout").
		For(&v1alpha1.ModelRole{}).
		Watches(&v1alpha1.ModelReplica{}, perPass(handler.EnqueueRequestsFromMapFunc(toRole)), builder.WithPredicates(paced(func(old, new client.Object) bool {
			return old.GetGeneration() != new.GetGeneration()
		}))).
		Watches(&corev1.Pod{}, perPass(handler.EnqueueRequestsFromMapFunc(toRole)), builder.WithPredicates(paced(func(old, new client.Object) bool {
			// A revoked eligibility label moves a retirement on (Admitted → Disqualified); grants,
			// which every replica coming up gets, do not wake the role.
			revoked := old.GetLabels()[workerv1.LabelEndpointEligible] == "true" && new.GetLabels()[workerv1.LabelEndpointEligible] != "true"
			return revoked || len(old.(*corev1.Pod).Spec.SchedulingGates) != len(new.(*corev1.Pod).Spec.SchedulingGates)
		}))).
		Watches(&kueue.Workload{}, perPass(handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			pods := &corev1.PodList{}
			if err := mgr.GetClient().List(ctx, pods, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.PodGroup: o.GetName()}, client.Limit(1)); err == nil && len(pods.Items) > 0 {
				return toRole(ctx, &pods.Items[0])
			}
			// A Workload that outlived its group's Pods holds its slot vacant: its going wakes the role.
			roles := &v1alpha1.ModelRoleList{}
			if err := mgr.GetClient().List(ctx, roles, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.RoleGroup: o.GetName()}); err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, r := range roles.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&r)})
			}
			return out
		})), builder.WithPredicates(paced(func(old, new client.Object) bool {
			return workload.Admitted(old.(*kueue.Workload)) != workload.Admitted(new.(*kueue.Workload))
		}))).
		// A retirement retry directive or a cadence written on the deployment wakes its roles.
		Watches(&workerv1.ModelDeployment{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			roles := &v1alpha1.ModelRoleList{}
			if err := mgr.GetClient().List(ctx, roles, client.InNamespace(o.GetNamespace()), client.MatchingLabels(naming.DeploymentLabels(o.GetName()))); err != nil {
				return nil
			}
			var out []reconcile.Request
			for _, r := range roles.Items {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&r)})
			}
			return out
		}), builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(ctrlevent.CreateEvent) bool { return false },
			DeleteFunc: func(ctrlevent.DeleteEvent) bool { return false },
			UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
				was, is := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
				return was[workerv1.AnnotationRetirementRetry] != is[workerv1.AnnotationRetirementRetry] ||
					workerv1.CadenceOf(was) != workerv1.CadenceOf(is)
			},
		})).
		// The deployment's retirement record changing wakes the roles it names: the pass after a
		// stored step takes the next one (the record is no object the pacer watches).
		WatchesRawSource(source.Channel(p.Retirements.Subscribe(), &handler.EnqueueRequestForObject{})).
		Complete(p)
}

// passGap is the least time between two passes of a role that its objects' events queue; an event
// after a quiet passGap runs its pass at once.
const passGap = 500 * time.Millisecond

// paced passes creations, deletions, a deletion's start and the updates changed reports.
func paced(changed func(old, new client.Object) bool) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e ctrlevent.UpdateEvent) bool {
		return (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil) || changed(e.ObjectOld, e.ObjectNew)
	}}
}

// Reconcile takes one step of a role's rollout: it reads the role's slots (observe), decides the
// pass with pure functions (decide, Pace), then retires, fills and remembers the replacement (act).
func (p *Pacer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	p.once.Do(p.init)
	o, err := p.observe(ctx, req.NamespacedName)
	if o == nil || err != nil {
		return reconcile.Result{}, err
	}
	d := decide(*o)
	recheck, err := p.retireSeated(ctx, o, &d)
	if err != nil {
		return reconcile.Result{}, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("rollout step", "role", o.role.Name, "step", d.step.Message)
	var settling time.Duration
	d.vacant, settling = p.vacancies.settle(o.role.UID, d.departing, d.vacant, d.filled, p.now())
	var backoff time.Duration
	d.vacant, backoff = pacing.AfterReadyTimeouts(o.role.Status.ReadyTimeouts, d.vacant, p.now())
	if err := p.act(ctx, o, d); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: sooner(sooner(sooner(recheck, settling), backoff), readinessPoll(d.step))}, nil
}

// ReadinessPoll is how often a role waiting at the Ready gate looks again. Readiness changes do not
// wake the pacer: they are a pass per Pod coming up on every role, and only a role under the
// capacity-preserving cadence waits on them.
const ReadinessPoll = time.Second

// readinessPoll is the step's requeue delay: ReadinessPoll while it waits at the Ready gate.
func readinessPoll(step pacing.Step) time.Duration {
	if step.Gate == workerv1.ReplacementGateReady {
		return ReadinessPoll
	}
	return 0
}

// sooner is the earlier of two requeue delays, where zero means none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// observed is what one pass reads: the role, its standing replicas' slots, and the ordinals whose
// departed replica has left something on the API server (Pods, or its group's Workload); and what
// they were read from (the cache's own objects: never written to).
type observed struct {
	role      *v1alpha1.ModelRole
	slots     []pacing.Slot
	occupied  map[int32]bool
	replicas  []v1alpha1.ModelReplica
	pods      []corev1.Pod
	workloads map[string]*kueue.Workload // by name
	admitted  map[int32]bool             // by ordinal: whether the slot's group Workload is admitted
	cadence   workerv1.RolloutCadence    // the deployment's
	// deployment is the role's; replacement is the role's replacement its record holds.
	deployment  *workerv1.ModelDeployment
	replacement v1alpha1.Replacement
}

// pass is what one pass does, in order: delete the never-admitted replicas a scale-down removed
// (the seated ones leave through the retirement protocol, retireSeated),
// create a replica in each vacant slot, write the role's replacement to the deployment's record when
// it changed, then retire the replica the step replaces.
type pass struct {
	scaledDown  []pacing.Slot
	duplicates  []pacing.Slot        // second replicas of one slot: a create whose expectation expired before the cache showed it
	vacant      []int32              // declared ordinals with neither a standing replica nor a Pod or Workload left
	departing   []int32              // declared ordinals without a standing replica whose departed one left Pods or its Workload
	filled      []int32              // declared ordinals with a standing replica
	replacement v1alpha1.Replacement // the role's replacement after this pass
	step        pacing.Step
}

// observe reads a role and its slots; nil when the role is gone (its replicas are collected),
// being deleted or not rendered yet.
func (p *Pacer) observe(ctx context.Context, key types.NamespacedName) (*observed, error) {
	role := &v1alpha1.ModelRole{}
	if err := p.Client.Get(ctx, key, role); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, p.collect(ctx, key)
		}
		return nil, err
	}
	if role.DeletionTimestamp != nil || role.Spec.Revision == "" {
		return nil, nil
	}
	o, err := p.slots(ctx, role)
	if err != nil {
		return nil, err
	}
	md := &workerv1.ModelDeployment{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: role.Namespace, Name: role.Spec.DeploymentName}, md); err != nil {
		return nil, client.IgnoreNotFound(err) // a role outliving its deployment is being collected
	}
	o.cadence = workerv1.CadenceOf(md.Annotations)
	// An unreadable operation is the retirement protocol's to say and drop (retireSeated).
	if _, err := p.book().Load(ctx, p.reader(), md); err != nil && !errors.Is(err, retirement.ErrUnreadable) {
		return nil, err
	}
	o.deployment = md
	o.replacement, _ = p.book().Replacing(client.ObjectKeyFromObject(md), role.Spec.RoleName)
	return o, nil
}

// decide is one pass over what was observed. A scale-down's ordinals at and above replicas leave
// now, highest first. A slot whose departed replica's Pods and group Workload are all gone is vacant
// and gets a replica of the current revision: the slot's Pods share one Kueue pod group name, so
// the replacement's Pods must not join the departed replica's group (Kueue would find their
// role-hash foreign to the lingering Workload, replace it and delete the new Pods). The replacement in flight is remembered
// (replacing) before its replica is deleted.
func decide(o observed) pass {
	role := o.role
	var d pass
	kept := map[int32]pacing.Slot{}
	for _, s := range o.slots {
		if s.Ordinal >= role.Spec.Replicas {
			d.scaledDown = append(d.scaledDown, s)
			continue
		}
		if k, taken := kept[s.Ordinal]; taken {
			// One replica per slot: the one that was admitted stays, else the first by name.
			if s.EverAdmitted && !k.EverAdmitted || s.EverAdmitted == k.EverAdmitted && s.Replica < k.Replica {
				s, kept[s.Ordinal] = k, s
			}
			d.duplicates = append(d.duplicates, s)
			continue
		}
		kept[s.Ordinal] = s
	}
	sort.Slice(d.scaledDown, func(i, j int) bool { return d.scaledDown[i].Ordinal > d.scaledDown[j].Ordinal })
	inFlight := inFlightOf(o.replacement)
	d.step = pacing.Pace(role.Spec.Revision, role.Spec.Replicas, o.slots, inFlight, o.cadence)
	if held := role.Annotations[workerv1.AnnotationRolloutHeld]; d.step.Replace != "" && held != "" {
		// A replacement would come up on a configuration without what its predecessor had (the
		// cache it wrote into); the outdated replicas keep serving until the hold is lifted.
		d.step = pacing.Step{InFlight: inFlight, Message: "the outdated replicas stay: " + held}
	}
	// A weights hold also keeps empty slots empty: a new Pod could not get the weights (no
	// replacement, no scale-up). A cache hold fills them: a new replica merely starts without a
	// cache client.
	weightsHeld := workerv1.RolloutHeldBy(role.Annotations[workerv1.AnnotationRolloutHeld], workerv1.ReasonRolloutHeldByWeights)
	for ordinal := range role.Spec.Replicas {
		switch {
		case slotFilled(o.slots, ordinal):
			d.filled = append(d.filled, ordinal)
		case o.occupied[ordinal]:
			d.departing = append(d.departing, ordinal)
		case !weightsHeld:
			d.vacant = append(d.vacant, ordinal)
		}
	}
	d.replacement = remember(d.step, o.cadence)
	return d
}

// remember is the replacement a step leaves: the slot in flight and the gate the next departure
// waits at. A step that starts a replacement (or names a broken replica to rebuild) waits at no
// gate itself, but the next pass will wait for that replacement at the cadence's gate: writing the
// gate with the ordinal makes one write of the record per replacement rather than two.
func remember(step pacing.Step, cadence workerv1.RolloutCadence) v1alpha1.Replacement {
	r := v1alpha1.Replacement{Gate: step.Gate}
	if step.InFlight >= 0 {
		r.Ordinal = ptr.To(step.InFlight)
		if r.Gate == "" {
			r.Gate = workerv1.ReplacementGateAdmitted
			if cadence == workerv1.RolloutCadenceCapacity {
				r.Gate = workerv1.ReplacementGateReady
			}
		}
	}
	return r
}

// inFlightOf is the ordinal whose replacement is remembered as unresolved, or -1.
func inFlightOf(r v1alpha1.Replacement) int32 {
	if r.Ordinal == nil {
		return -1
	}
	return *r.Ordinal
}

// act retires the scaled-down replicas, fills the vacant slots, writes the role's replacement to the
// deployment's record, then retires the replica the step replaces (after its ordinal is remembered,
// so a restart resumes the same slot) once the API server confirms the step.
func (p *Pacer) act(ctx context.Context, o *observed, d pass) error {
	role := o.role
	for _, s := range d.scaledDown {
		if err := p.retire(ctx, role, s.Replica, s.Ordinal, "the role was scaled to "+strconv.Itoa(int(role.Spec.Replicas))); err != nil {
			return err
		}
	}
	for _, s := range d.duplicates {
		if err := p.retire(ctx, role, s.Replica, s.Ordinal, "a second replica of its slot"); err != nil {
			return err
		}
	}
	if err := p.keepRevisions(ctx, o); err != nil {
		return err
	}
	if err := p.fill(ctx, role, d.vacant, d.filled); err != nil {
		return err
	}
	if err := p.book().Remember(ctx, p.Client, o.deployment, role.Spec.RoleName, d.replacement); err != nil {
		return err
	}
	if d.step.Replace == "" {
		return nil
	}
	if ok, err := p.confirmed(ctx, o, d.step); err != nil || !ok {
		return err
	}
	return p.retire(ctx, role, d.step.Replace, d.step.Ordinal, d.step.Message)
}

// confirmed takes the step again on the role's Pods as the API server has them now. The cache may
// lag by the few milliseconds in which Kueue stops a replacement it has just ungated (a group
// Workload it re-created from a departed Pod, then lost): read from the cache alone, that
// replacement would still count as admitted and a second replica would leave. When the fresh read
// disagrees, the Pod events it saw bring the role back.
func (p *Pacer) confirmed(ctx context.Context, o *observed, step pacing.Step) (bool, error) {
	role := o.role
	pods := &corev1.PodList{}
	if err := p.reader().List(ctx, pods, client.InNamespace(role.Namespace),
		client.MatchingLabels(naming.RoleLabels(role.Spec.DeploymentName, role.Spec.RoleName))); err != nil {
		return false, fmt.Errorf("reading the Pods of ModelRole %s/%s before replica r%d leaves: %w", role.Namespace, role.Name, step.Ordinal, err)
	}
	slots, _ := pacing.ReadSlots(role, o.replicas, pods.Items, o.admitted)
	again := pacing.Pace(role.Spec.Revision, role.Spec.Replicas, slots, inFlightOf(o.replacement), o.cadence)
	if again.Replace != step.Replace {
		ctrl.LoggerFrom(ctx).Info("the API server does not confirm the next replacement yet", "role", role.Name, "replica", step.Replace, "now", again.Message)
		return false, nil
	}
	return true, nil
}

// fill creates a ModelReplica of the current revision in each vacant slot whose create is not on its
// way to the cache already; a filled slot settles its create..
func (p *Pacer) fill(ctx context.Context, role *v1alpha1.ModelRole, vacant, filled []int32) error {
	for _, ordinal := range filled {
		p.expected.Awaiting(role.UID, ordinal, true)
	}
	var creates errgroup.Group
	creates.SetLimit(createWorkers)
	for _, ordinal := range vacant {
		if p.expected.Awaiting(role.UID, ordinal, false) {
			continue
		}
		p.expected.Created(role.UID, ordinal)
		creates.Go(func() error {
			replica := replicas.NewReplica(role, ordinal)
			if err := p.Client.Create(ctx, replica); err != nil {
				p.expected.Awaiting(role.UID, ordinal, true) // nothing is on its way
				p.event(ctx, role, corev1.EventTypeWarning, "ReplicaCreateFailed", "Create",
					"cannot create replica r%d of role %s: %v; the rollout controller tries again", ordinal, role.Spec.RoleName, err)
				return fmt.Errorf("creating the ModelReplica of slot r%d of ModelRole %s/%s: %w", ordinal, role.Namespace, role.Name, err)
			}
			return nil
		})
	}
	return creates.Wait()
}

// collect deletes the replicas a role that is gone controlled, and their Pods, createWorkers
// replicas at a time. The garbage collector would delete them too, one owner level at a time and at
// the pace its client's request limit allows: a deleted deployment's role leaves hundreds of
// replicas, the collector's queue reaches their Pods only after it has deleted them one by one,
// and it then deletes about ten Pods a second under kube-controller-manager's default limit. As the
// collector does, a replica is deleted only while the API server has no role of its controller's
// UID (the cache may not show a role recreated under the name yet), in the background, with its UID
// as precondition; its Pods go first, each with its own UID as precondition, so the collector finds
// them already leaving.
func (p *Pacer) collect(ctx context.Context, key types.NamespacedName) error {
	list := &v1alpha1.ModelReplicaList{}
	if err := p.Client.List(ctx, list, client.InNamespace(key.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var orphans []*v1alpha1.ModelReplica
	for i := range list.Items {
		r := &list.Items[i]
		if owner := metav1.GetControllerOf(r); owner != nil && owner.Kind == v1alpha1.ModelRoleKind && owner.Name == key.Name && r.DeletionTimestamp == nil {
			orphans = append(orphans, r)
		}
	}
	if len(orphans) == 0 {
		return nil
	}
	live := &v1alpha1.ModelRole{}
	if err := p.reader().Get(ctx, key, live); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var deletes errgroup.Group
	deletes.SetLimit(createWorkers)
	for _, r := range orphans {
		if live.UID != "" && metav1.GetControllerOf(r).UID == live.UID {
			continue
		}
		gone := &v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: r.Name, UID: r.UID}}
		deletes.Go(func() error {
			own, err := ownPods(ctx, p.Client, r)
			if err != nil {
				return err
			}
			if err := deletePods(ctx, p.Client, p.Deletes, r, own); err != nil {
				return err
			}
			return deleteOnce(ctx, p.Client, p.Deletes, gone)
		})
	}
	return deletes.Wait()
}

// deleteOnce deletes obj while it is the object read (UID precondition), unless a delete of it was
// claimed already and the cache has not shown it yet. An object already gone counts as deleted;
// one replaced under the same name is not this delete's to take.
func deleteOnce(ctx context.Context, c client.Client, deletes *expectations.Deletes, obj client.Object) error {
	uid := obj.GetUID()
	if !deletes.Claim(uid) {
		return nil
	}
	err := c.Delete(ctx, obj, client.Preconditions{UID: &uid})
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	deletes.Release(uid)
	return err
}

// retire deletes a ModelReplica and says so on the deployment. The replica goes last (foreground):
// while it is being deleted its slot counts as Terminating, and once it is gone so are its Pods.
func (p *Pacer) retire(ctx context.Context, role *v1alpha1.ModelRole, name string, ordinal int32, why string) error {
	replica := &v1alpha1.ModelReplica{}
	replica.Namespace, replica.Name = role.Namespace, name
	if err := p.Client.Delete(ctx, replica, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("retiring ModelReplica %s/%s: %w", replica.Namespace, replica.Name, err)
	}
	p.event(ctx, role, corev1.EventTypeWarning, "ReplicaLeaving", "Retire",
		"replica r%d of role %s is leaving (%s); the cache blocks it held stay leased for the %s kv_lease_duration window, then its siblings lose them",
		ordinal, role.Spec.RoleName, why, pacing.LeaseWindow)
	return nil
}

// event records an event on the role's deployment, where a person looks; none when it is gone.
func (p *Pacer) event(ctx context.Context, role *v1alpha1.ModelRole, eventType, reason, action, note string, args ...any) {
	md := &workerv1.ModelDeployment{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: role.Namespace, Name: role.Spec.DeploymentName}, md); err == nil {
		p.Recorder.Eventf(md, nil, eventType, reason, action, note, args...)
	}
}

func slotFilled(slots []pacing.Slot, ordinal int32) bool {
	for _, s := range slots {
		if s.Ordinal == ordinal && s.Replica != "" {
			return true
		}
	}
	return false
}

// slots reads the role's ModelReplicas, their Pods and their groups' Workloads, and which ordinals
// still have Pods or a Workload on the API server.
func (p *Pacer) slots(ctx context.Context, role *v1alpha1.ModelRole) (*observed, error) {
	// A pass runs on every event of the role's hundreds of Pods, replicas and Workloads and only
	// reads what it lists: the cache's own objects are read in place, not copied (never written to).
	selector := client.MatchingLabels(naming.RoleLabels(role.Spec.DeploymentName, role.Spec.RoleName))
	replicas := &v1alpha1.ModelReplicaList{}
	if err := p.Client.List(ctx, replicas, client.InNamespace(role.Namespace), selector, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := p.Client.List(ctx, pods, client.InNamespace(role.Namespace), client.MatchingFields{index.PodRole: index.RoleKey(role.Spec.DeploymentName, role.Spec.RoleName)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	workloads := &kueue.WorkloadList{}
	if err := p.Client.List(ctx, workloads, client.InNamespace(role.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	admitted := pacing.WorkloadsAdmitted(workloads.Items)
	byName := workload.ByName(workloads.Items)
	admittedGroups := pacing.GroupsAdmitted(role, replicas.Items, admitted)
	slots, occupied := pacing.ReadSlots(role, replicas.Items, pods.Items, admittedGroups)
	for ordinal := range role.Spec.Replicas {
		if _, ok := admitted[workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, ordinal)]; ok {
			occupied[ordinal] = true
		}
	}
	return &observed{role: role, slots: slots, occupied: occupied, replicas: replicas.Items, pods: pods.Items, workloads: byName, admitted: admittedGroups}, nil
}
