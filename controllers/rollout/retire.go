package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/qualification"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/internal/pacing"
	"github.com/mdplane/mdplane/snapshot"
)

// DrainScraper reads members' /metrics for the drain read (snapshot/scrape's Scraper).
type DrainScraper interface {
	Scrape(ctx context.Context, targets []snapshot.Target) []snapshot.Read
}

// heldBySibling is how often a role whose scale-down waits behind another role's retirement looks
// again: the other role's operation ending does not wake it.
const heldBySibling = 5 * time.Second

// retireSeated runs the retirement protocol for the role's scale-down: the seated replicas it no
// longer declares leave one at a time per deployment, through an operation stored in the
// deployment's record (retirement.Book);
// replicas that never held an admission serve nothing and stay in d.scaledDown, deleted at once. It
// returns when to look again.
func (p *Pacer) retireSeated(ctx context.Context, o *observed, d *pass) (time.Duration, error) {
	role := o.role
	var seated []pacing.Slot
	d.scaledDown = slices.DeleteFunc(d.scaledDown, func(s pacing.Slot) bool {
		if s.EverAdmitted {
			seated = append(seated, s)
		}
		return s.EverAdmitted
	})
	md := o.deployment
	held, err := p.book().Load(ctx, p.reader(), md)
	if err != nil {
		if held, err = nil, p.dropUnreadable(ctx, role, md, err); err != nil {
			return 0, err
		}
	}
	if held != nil && held.RoleName != role.Spec.RoleName {
		// One operation per deployment: this role's scale-down waits behind a sibling's.
		if len(seated) > 0 {
			ctrl.LoggerFrom(ctx).V(1).Info("scale-down waits behind another role's retirement", "role", role.Name, "holder", held.RoleName)
		}
		return heldBySibling, nil
	}
	if held == nil {
		p.refuseStrayDirective(ctx, role, md)
		if len(seated) == 0 {
			return 0, nil
		}
		return 0, p.admitNext(ctx, o, seated, -1, md, false)
	}
	return p.advance(ctx, o, *held, md, seated)
}

// dropUnreadable says that the deployment's record does not hold an operation and clears it, so the
// scale-down is admitted again.
func (p *Pacer) dropUnreadable(ctx context.Context, role *v1alpha1.ModelRole, md *workerv1.ModelDeployment, err error) error {
	if !errors.Is(err, retirement.ErrUnreadable) {
		return err
	}
	p.event(ctx, role, corev1.EventTypeWarning, "RetirementUnreadable", "Retire", "%v; the operation is dropped and the scale-down admitted again", err)
	return p.book().Store(ctx, p.Client, md, nil)
}

// advance takes the role's operation one pass further: a retry directive applied, the target
// observed, the outcome deleted, stored and said. An operation that ends hands over to the next
// seated replica in the same write.
func (p *Pacer) advance(ctx context.Context, o *observed, stored workerv1.Retirement, md *workerv1.ModelDeployment, seated []pacing.Slot) (time.Duration, error) {
	role, op, err := o.role, &stored, error(nil)
	if op.State == workerv1.RetirementAborted && md.Annotations[workerv1.AnnotationRetirementRetry] != "" {
		if op, err = p.retry(ctx, role, md, *op); err != nil {
			return 0, err
		}
	}
	obs, err := p.observeTarget(ctx, o, *op, md)
	if err != nil {
		return 0, err
	}
	out := retirement.Advance(*op, obs, p.now(), p.budgets())
	// The state is written before it is acted on: a restart, or a write refused, never leaves members
	// deleted behind an operation that does not say Deleting.
	switch {
	case out.Clear:
		err = p.admitNext(ctx, o, seated, op.ReplicaOrdinal, md, true)
	case !equalRetirement(out.Op, *op):
		err = p.book().Store(ctx, p.Client, md, &out.Op)
	}
	if err == nil && out.Delete {
		err = p.deleteTarget(ctx, o, out.Op)
	}
	if out.Event != "" {
		kind, reason := corev1.EventTypeNormal, "Retirement"
		if out.Warning {
			kind, reason = corev1.EventTypeWarning, "RetirementAborted"
		}
		p.event(ctx, role, kind, reason, "Retire", "%s", out.Event)
	}
	return out.Recheck, err
}

// admitNext stores the operation for the highest seated replica other than skip (the one just
// retired, whose operation it replaces in the same write), or, with none left, removes the stored
// operation when there is one. A replica whose members are all leaving already has nothing to
// withdraw or drain: it is deleted at once. The admitting pass deletes nothing of its target.
func (p *Pacer) admitNext(ctx context.Context, o *observed, seated []pacing.Slot, skip int32, md *workerv1.ModelDeployment, stored bool) error {
	role := o.role
	for _, s := range seated {
		if s.Ordinal == skip {
			continue
		}
		t := retirement.Target{Role: role.Spec.RoleName, Ordinal: s.Ordinal}
		for _, pod := range o.membersOf(s.Replica) {
			if pod.DeletionTimestamp == nil {
				t.Members = append(t.Members, string(pod.UID))
			}
		}
		if len(t.Members) == 0 {
			if err := p.retire(ctx, role, s.Replica, s.Ordinal, "the role was scaled to "+strconv.Itoa(int(role.Spec.Replicas))); err != nil {
				return err
			}
			continue
		}
		if wl := o.workloads[workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, s.Ordinal)]; wl != nil {
			t.Workload = string(wl.UID)
		}
		op := retirement.Admit(t, md.Generation, p.now(), p.budgets())
		return p.book().Store(ctx, p.Client, md, &op)
	}
	if !stored {
		return nil
	}
	return p.book().Store(ctx, p.Client, md, nil)
}

// retry applies the deployment's retry directive to the role's Aborted operation.
func (p *Pacer) retry(ctx context.Context, role *v1alpha1.ModelRole, md *workerv1.ModelDeployment, op workerv1.Retirement) (*workerv1.Retirement, error) {
	d, err := retirement.ParseDirective(md.Annotations[workerv1.AnnotationRetirementRetry])
	if err != nil {
		p.event(ctx, role, corev1.EventTypeWarning, "RetirementRetryRefused", "Retire", "%v; the annotation is left for you to correct", err)
		return &op, nil
	}
	next, clearAnnotation, refused := retirement.Retry(&op, d, p.now(), p.budgets())
	if refused != "" {
		p.event(ctx, role, corev1.EventTypeWarning, "RetirementRetryRefused", "Retire", "%s; the annotation is left for you to correct", refused)
		return &op, nil
	}
	if next.State != op.State {
		if err := p.book().Store(ctx, p.Client, md, &next); err != nil {
			return nil, err
		}
		p.event(ctx, role, corev1.EventTypeNormal, "Retirement", "Retire", "the retirement of replica r%d of role %s starts again: %s", next.ReplicaOrdinal, next.RoleName, retirement.ReasonRetry)
	}
	if clearAnnotation {
		// Optimistic: a directive rewritten since it was read is read again, not removed unseen.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": md.ResourceVersion,
			"annotations": map[string]any{workerv1.AnnotationRetirementRetry: nil}}})
		if err != nil {
			return nil, err
		}
		if err := p.Client.Patch(ctx, md, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsConflict(err) {
			return nil, fmt.Errorf("removing %s from ModelDeployment %s/%s: %w", workerv1.AnnotationRetirementRetry, md.Namespace, md.Name, err)
		}
	}
	return &next, nil
}

// refuseStrayDirective says why a retry directive naming this role has nothing to retry, when no
// role of the deployment holds an operation.
func (p *Pacer) refuseStrayDirective(ctx context.Context, role *v1alpha1.ModelRole, md *workerv1.ModelDeployment) {
	if md.Annotations[workerv1.AnnotationRetirementRetry] == "" {
		return
	}
	d, err := retirement.ParseDirective(md.Annotations[workerv1.AnnotationRetirementRetry])
	if err != nil || d.Role != role.Spec.RoleName {
		return
	}
	if _, _, refused := retirement.Retry(nil, d, p.now(), p.budgets()); refused != "" {
		p.event(ctx, role, corev1.EventTypeWarning, "RetirementRetryRefused", "Retire", "%s; the annotation is left for you to correct", refused)
	}
}

// observeTarget reads what the operation's next transition depends on.
func (p *Pacer) observeTarget(ctx context.Context, o *observed, op workerv1.Retirement, md *workerv1.ModelDeployment) (retirement.Observation, error) {
	role := o.role
	obs := retirement.Observation{Declared: op.ReplicaOrdinal < role.Spec.Replicas, Standing: map[string]bool{}, Present: map[string]bool{}}
	targets := map[types.UID]bool{}
	for _, uid := range op.TargetMemberUIDs {
		targets[types.UID(uid)] = true
	}
	var members []*corev1.Pod
	for i := range o.pods {
		pod := &o.pods[i]
		if !targets[pod.UID] {
			continue
		}
		obs.Present[string(pod.UID)] = true
		if pod.DeletionTimestamp != nil {
			continue
		}
		obs.Standing[string(pod.UID)] = true
		members = append(members, pod)
		if pod.Labels[workerv1.LabelEndpointEligible] == "true" {
			obs.Labelled = append(obs.Labelled, pod.Name)
		}
	}
	group := workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, op.ReplicaOrdinal)
	if wl := o.workloads[group]; wl != nil {
		obs.WorkloadPresent = op.TargetWorkloadUID == "" || string(wl.UID) == op.TargetWorkloadUID
	}
	for _, r := range o.replicas {
		obs.ReplicaStanding = obs.ReplicaStanding || r.Spec.Ordinal == op.ReplicaOrdinal && r.DeletionTimestamp == nil
	}
	if op.State == workerv1.RetirementDeleting || op.State == workerv1.RetirementSettling || op.State == workerv1.RetirementAborted {
		return obs, nil
	}
	svc := &corev1.Service{}
	err := p.Client.Get(ctx, types.NamespacedName{Namespace: role.Namespace, Name: naming.RoleServiceName(role.Spec.DeploymentName, role.Spec.RoleName)}, svc)
	if client.IgnoreNotFound(err) != nil {
		return obs, err
	}
	obs.Selective = svc.Annotations[workerv1.AnnotationEndpointEligibility] == workerv1.EndpointEligibilityActive
	if !obs.Selective || len(obs.Labelled) > 0 {
		return obs, nil
	}
	serving, err := p.servingMembers(ctx, role, targets)
	if err != nil || len(serving) > 0 {
		obs.Serving = serving
		return obs, err
	}
	obs.Drain = p.readDrain(ctx, md, members)
	return obs, nil
}

// owns reports whether a replica controls one of the target Pods.
func owns(replica types.UID, pods []corev1.Pod, targets map[types.UID]bool) bool {
	for i := range pods {
		if owner := metav1.GetControllerOf(&pods[i]); targets[pods[i].UID] && owner != nil && owner.UID == replica {
			return true
		}
	}
	return false
}

// servingMembers are the target members an EndpointSlice of the deployment's Service or the role's
// Service still lists as serving, read uncached (no EndpointSlice of the cluster is cached). The
// replicas' headless Services list every member by design and are not read.
func (p *Pacer) servingMembers(ctx context.Context, role *v1alpha1.ModelRole, targets map[types.UID]bool) ([]string, error) {
	services, err := labels.NewRequirement(discoveryv1.LabelServiceName, selection.In,
		[]string{role.Spec.DeploymentName, naming.RoleServiceName(role.Spec.DeploymentName, role.Spec.RoleName)})
	if err != nil {
		return nil, err
	}
	list := &discoveryv1.EndpointSliceList{}
	if err := p.reader().List(ctx, list, client.InNamespace(role.Namespace), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*services)}); err != nil {
		return nil, fmt.Errorf("reading the EndpointSlices of %s's Services: %w", role.Name, err)
	}
	var serving []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			in := e.TargetRef != nil && targets[e.TargetRef.UID]
			if in && (e.Conditions.Serving == nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) || e.Conditions.Serving != nil && *e.Conditions.Serving) {
				serving = append(serving, e.TargetRef.Name)
			}
		}
	}
	slices.Sort(serving)
	return slices.Compact(serving), nil
}

// readDrain reads the answering members' engine gauges twice (by HTTP on the member's advertised
// metrics endpoint, the scrape the metrics snapshot uses, rather than
// pods/exec): the members that serve HTTP, every member of an External-DP replica.
func (p *Pacer) readDrain(ctx context.Context, md *workerv1.ModelDeployment, members []*corev1.Pod) retirement.Drain {
	switch {
	case p.Scraper == nil:
		return retirement.Drain{Held: "mdplane-controllers runs without a drain reader"}
	case qualification.TakesOver(members):
		return retirement.Drain{Held: "a take-over member advertises no engine gauges to read"}
	}
	var targets []snapshot.Target
	for pod := range qualification.Serving(members) {
		targets = append(targets, snapshot.Target{Pod: pod})
	}
	slices.SortFunc(targets, func(a, b snapshot.Target) int { return strings.Compare(a.Pod.Name, b.Pod.Name) })
	rounds := make([][]retirement.Read, 2)
	for i := range rounds {
		for _, r := range p.Scraper.Scrape(ctx, targets) {
			rounds[i] = append(rounds[i], retirement.Read{Member: r.Target.Pod.Name, Families: r.Families, Err: r.Err})
		}
	}
	return retirement.JudgeDrain(engine.DrainGauges(md.Spec.Engine.Name), rounds...)
}

// deleteTarget deletes the target's ModelReplica, members and Workload, each only while it is the
// object the operation admitted (UID preconditions). The replica's delete says so on the deployment.
func (p *Pacer) deleteTarget(ctx context.Context, o *observed, op workerv1.Retirement) error {
	role := o.role
	targets := map[types.UID]bool{}
	for _, uid := range op.TargetMemberUIDs {
		targets[types.UID(uid)] = true
	}
	for _, r := range o.replicas {
		if r.Spec.Ordinal != op.ReplicaOrdinal || r.DeletionTimestamp != nil || !owns(r.UID, o.pods, targets) {
			continue
		}
		if err := p.retire(ctx, role, r.Name, op.ReplicaOrdinal, "the role was scaled to "+strconv.Itoa(int(role.Spec.Replicas))+"; "+op.Reason); err != nil {
			return err
		}
	}
	for i := range o.pods {
		pod := &o.pods[i]
		if !targets[pod.UID] || pod.DeletionTimestamp != nil {
			continue
		}
		if err := deleteOnce(ctx, p.Client, p.Deletes, pod.DeepCopy()); err != nil {
			return fmt.Errorf("deleting member %s/%s of a retired replica: %w", pod.Namespace, pod.Name, err)
		}
	}
	group := workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, op.ReplicaOrdinal)
	if wl := o.workloads[group]; wl != nil && op.TargetWorkloadUID != "" && string(wl.UID) == op.TargetWorkloadUID && wl.DeletionTimestamp == nil {
		if err := deleteOnce(ctx, p.Client, p.Deletes, wl.DeepCopy()); err != nil {
			return fmt.Errorf("deleting Workload %s/%s of a retired replica: %w", wl.Namespace, wl.Name, err)
		}
	}
	return nil
}

func equalRetirement(a, b workerv1.Retirement) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// book is the pacer's retirement book.
func (p *Pacer) book() *retirement.Book {
	p.once.Do(p.init)
	return p.Retirements
}

func (p *Pacer) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

func (p *Pacer) budgets() retirement.Budgets {
	if p.Budgets == (retirement.Budgets{}) {
		return retirement.DefaultBudgets
	}
	return p.Budgets
}

func (p *Pacer) reader() client.Reader {
	if p.Reader != nil {
		return p.Reader
	}
	return p.Client
}

// membersOf are the Pods a replica controls, standing or not.
func (o *observed) membersOf(replica string) []*corev1.Pod {
	var uid types.UID
	for _, r := range o.replicas {
		if r.Name == replica {
			uid = r.UID
		}
	}
	var out []*corev1.Pod
	for i := range o.pods {
		if owner := metav1.GetControllerOf(&o.pods[i]); owner != nil && owner.UID == uid && uid != "" {
			out = append(out, &o.pods[i])
		}
	}
	return out
}
