package roles

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/controllers/internal/rolekey"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/rolestatus"
	"github.com/mdplane/mdplane/internal/workload"
)

// DefaultInterval is the least time between two status writes of one role that change its counts
// alone. A change of what the role is (Ready, PodsCreated, its eligibility, every replica up to date
// or holding quota, a retirement beginning or ending) is written at once; a retirement's own steps
// are counts here; the counts of a role coming up or rolling over are gathered
// and written at most this often, so the deployment above it is rendered again a few times a
// minute, whatever the role's size: each write wakes the deployment, and Crossplane's watch circuit
// breaker allows a composite about one event a second.
const DefaultInterval = 15 * time.Second

// MilestoneGap is the least time between any two status writes of one role, milestones included:
// changes of what the role is that arrive together (a rollout's edit makes the role not up to date
// and its first departure makes it not Ready, milliseconds apart) share one write. Each write of
// the role wakes the deployment's composition, which then reconciles several times over.
const MilestoneGap = 2 * time.Second

// Reporter writes each ModelRole's status from its replicas and its slots' Workloads.
type Reporter struct {
	Client client.Client
	// Interval is the least time between two status writes of a role; DefaultInterval when zero.
	Interval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Retirements is the rollout controller's record: the operation targeting a replica of the role
	// and the role's replacement are reported on it. Without one, the status keeps what it reports.
	Retirements *retirement.Book

	written sync.Map // role UID → when its status was last written
}

// SetupWithManager watches ModelRoles' specs, every change of their replicas, and their groups'
// Workloads' admission states.
func (r *Reporter) SetupWithManager(mgr ctrl.Manager) error {
	toRole := rolekey.Requests
	// A role's status is written at most once per MilestoneGap: the events of its hundreds of
	// replicas and Workloads coming up share a count per second.
	perCount := func(h handler.EventHandler) handler.EventHandler { return rolekey.Coalesced(h, time.Second) }
	b := ctrl.NewControllerManagedBy(mgr).
		Named("role_status").
		// Its own status writes do not wake a role: only its spec does.
		For(&v1alpha1.ModelRole{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ModelReplica{}, perCount(handler.EnqueueRequestsFromMapFunc(toRole))).
		Watches(&kueue.Workload{}, perCount(handler.EnqueueRequestsFromMapFunc(r.rolesOfGroup)), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return admission(e.ObjectOld.(*kueue.Workload)) != admission(e.ObjectNew.(*kueue.Workload))
			}})).
		// A revision read later than its replicas decides their mode.
		Watches(&appsv1.ControllerRevision{}, handler.EnqueueRequestsFromMapFunc(toRole))
	if r.Retirements != nil {
		b = b.WatchesRawSource(source.Channel(r.Retirements.Subscribe(), &handler.EnqueueRequestForObject{})).
			WatchesRawSource(source.Channel(r.Retirements.SubscribeReplacements(), &handler.EnqueueRequestForObject{}))
	}
	return b.Complete(r)
}

// Reconcile sums a role's replicas and writes its status when it changed: when what the role is
// changed, as soon as MilestoneGap has passed since the last write; else at most once per interval.
func (r *Reporter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	role := &v1alpha1.ModelRole{}
	if err := r.Client.Get(ctx, req.NamespacedName, role); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if role.DeletionTimestamp != nil || role.Spec.Revision == "" {
		r.written.Delete(role.UID)
		return reconcile.Result{}, nil
	}
	observed, err := r.observe(ctx, role)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := status(role, rolestatus.Count(observed), r.Retirements.Targeting(role), r.Retirements.Replacement(role), r.now())
	if equality.Semantic.DeepEqual(role.Status, want) { // the transition times of unchanged conditions are kept
		return reconcile.Result{}, nil
	}
	if wait := r.wait(role, r.interval()); wait > 0 && milestones(role.Status, role.Spec.Replicas) == milestones(want, role.Spec.Replicas) {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if wait := r.wait(role, MilestoneGap); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	patch := client.MergeFrom(role.DeepCopy())
	role.Status = want
	if err := r.Client.Status().Patch(ctx, role, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	r.written.Store(role.UID, r.now())
	return reconcile.Result{}, nil
}

// rolesOfGroup are the roles one of whose declared slots a Workload's group is.
func (r *Reporter) rolesOfGroup(ctx context.Context, o client.Object) []reconcile.Request {
	roles := &v1alpha1.ModelRoleList{}
	if err := r.Client.List(ctx, roles, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.RoleGroup: o.GetName()}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(roles.Items))
	for i := range roles.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&roles.Items[i])})
	}
	return out
}

// admission is the part of a Workload a role's status reads: its admission state (with no members
// to count, what the Workload alone says), the flavors it holds quota on and what its provisioning
// check says.
func admission(wl *kueue.Workload) string {
	var flavors []string
	if wl.Status.Admission != nil {
		for _, a := range wl.Status.Admission.PodSetAssignments {
			for _, f := range a.Flavors {
				flavors = append(flavors, string(f))
			}
		}
	}
	slices.Sort(flavors)
	return replicas.InstanceQuota(wl, 1, 0, 1) + " " + strings.Join(flavors, ",") + " " + workload.Provisioning(wl)
}

// observe reads the role's replicas, its slots' Workloads and the mode of each revision the
// replicas run.
func (r *Reporter) observe(ctx context.Context, role *v1alpha1.ModelRole) (rolestatus.Observed, error) {
	list := &v1alpha1.ModelReplicaList{}
	if err := r.Client.List(ctx, list, client.InNamespace(role.Namespace), client.MatchingLabels(naming.RoleLabels(role.Spec.DeploymentName, role.Spec.RoleName)),
		client.UnsafeDisableDeepCopy); err != nil {
		return rolestatus.Observed{}, err
	}
	carried, _ := rolestatus.PodsCreatedOf(role.Status.ConditionedStatus)
	o := rolestatus.Observed{Spec: role.Spec, Carried: carried, TakesOver: map[string]bool{}, Workloads: map[int32]*kueue.Workload{},
		Preemptions: role.Status.Preemptions, ReadyTimeouts: role.Status.ReadyTimeouts}
	// A count reads each of the role's hundreds of groups' Workloads once a second while they come
	// up: the cache's objects are read in place, not copied (each carries its Pods' templates), and
	// never written to.
	workloads := &kueue.WorkloadList{}
	if err := r.Client.List(ctx, workloads, client.InNamespace(role.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return rolestatus.Observed{}, err
	}
	byName := workload.ByName(workloads.Items)
	for ordinal := range role.Spec.Replicas {
		if wl := byName[workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, ordinal)]; wl != nil {
			o.Workloads[ordinal] = wl
		}
	}
	for i := range list.Items {
		replica := &list.Items[i]
		o.Replicas = append(o.Replicas, replica)
		rev := replica.Spec.Revision
		if _, read := o.TakesOver[rev]; read {
			continue
		}
		if rev == role.Spec.Revision {
			o.TakesOver[rev] = replicas.CurrentRevision(role.Spec).TakesOver()
			continue
		}
		cr := &appsv1.ControllerRevision{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: role.Namespace, Name: replica.Spec.RevisionName}, cr); err != nil {
			if client.IgnoreNotFound(err) != nil {
				return rolestatus.Observed{}, err
			}
			continue
		}
		if revision, err := replicas.ReadRevision(cr); err == nil {
			o.TakesOver[rev] = revision.TakesOver()
		}
	}
	return o, nil
}

// status is the role's status as summed, with its Ready and PodsCreated conditions; a condition
// whose status, reason and message hold keeps its transition time. A replacement's change is a
// count: a rollout turns one over per replica.
func status(role *v1alpha1.ModelRole, s rolestatus.Summary, retiring *workerv1.Retirement, replacing v1alpha1.Replacement, now time.Time) v1alpha1.ModelRoleStatus {
	out := s.Status
	if !replacing.None() {
		out.Replacement = &replacing
	}
	out.Retirement = retiring.DeepCopy()
	out.Conditions = slices.Clone(role.Status.Conditions)
	ready := xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionFalse, Reason: xpv2.ReasonCreating,
		Message: fmt.Sprintf("%d of %d replicas are Ready", ptr.Deref(s.Status.Ready, 0), role.Spec.Replicas)}
	if s.Ready {
		ready = xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue, Reason: xpv2.ReasonAvailable}
	}
	set := func(c xpv2.Condition) {
		c.ObservedGeneration = role.Generation
		c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		if have := role.Status.GetCondition(c.Type); have.Status == c.Status && have.Reason == c.Reason && have.Message == c.Message {
			c.LastTransitionTime = have.LastTransitionTime
		}
		out.SetConditions(c)
	}
	set(ready)
	if s.PodsCreatedKnown {
		c := s.PodsCreated
		set(xpv2.Condition{Type: v1alpha1.PodsCreatedConditionType, Status: corev1.ConditionStatus(c.Status), Reason: xpv2.ConditionReason(c.Reason), Message: c.Message})
	}
	return out
}

// milestone is what a role is, apart from its counts: what a person and the deployment act on.
type milestone struct {
	ready, podsCreated, podsCreatedMessage string
	eligibility                            string
	eligibilityActive                      bool
	allUpToDate, allReserved, retiring     bool
	// preempted are the slots that wait behind a preemption: written soon, since the preempted
	// replica that says who for is being rebuilt.
	preempted string
	// lostNode is the node a replica stands on that stopped reporting, which the deployment names.
	lostNode string
}

func milestones(s v1alpha1.ModelRoleStatus, replicas int32) milestone {
	pc := s.GetCondition(v1alpha1.PodsCreatedConditionType)
	return milestone{ready: string(s.GetCondition(xpv2.TypeReady).Status), podsCreated: string(pc.Status), podsCreatedMessage: pc.Message,
		eligibility: s.Eligibility, eligibilityActive: s.EligibilityActive,
		allUpToDate: ptr.Deref(s.UpToDate, -1) == replicas, allReserved: ptr.Deref(s.QuotaReserved, -1) == replicas, retiring: s.Retirement != nil,
		preempted: strings.Join(slices.Sorted(maps.Keys(s.Preemptions)), ","), lostNode: s.LostNode}
}

// wait is how long the role's next status write must wait to be interval after its last.
func (r *Reporter) wait(role *v1alpha1.ModelRole, interval time.Duration) time.Duration {
	last, ok := r.written.Load(role.UID)
	if !ok {
		return 0
	}
	return last.(time.Time).Add(interval).Sub(r.now())
}

func (r *Reporter) interval() time.Duration {
	if r.Interval == 0 {
		return DefaultInterval
	}
	return r.Interval
}

func (r *Reporter) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}
