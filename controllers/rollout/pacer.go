package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// admissionGate is the scheduling gate Kueue holds a Pod with until its group is admitted.
const admissionGate = "kueue.x-k8s.io/admission"

// LeaseWindow is how long a departing replica's cache blocks stay leased to it (the Mooncake block
// lease), named in every departure event.
const LeaseWindow = "30s"

// Pacer turns a role's outdated replicas over one at a time behind Kueue admission.
type Pacer struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager watches ModelRoles, their ModelReplicas and their groups' Workloads.
func (p *Pacer) SetupWithManager(mgr ctrl.Manager) error {
	toRole := func(_ context.Context, o client.Object) []reconcile.Request {
		l := o.GetLabels()
		if l[workerv1.LabelInstance] == "" || l[workerv1.LabelComponent] == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: naming.RoleNameOf(l)}}}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("role_rollout").
		For(&v1alpha1.ModelRole{}).
		Watches(&v1alpha1.ModelReplica{}, handler.EnqueueRequestsFromMapFunc(toRole)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(toRole)).
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			pods := &corev1.PodList{}
			if err := mgr.GetClient().List(ctx, pods, client.InNamespace(o.GetNamespace()), client.MatchingLabels(naming.GroupLabels(o.GetName())), client.Limit(1)); err != nil || len(pods.Items) == 0 {
				return nil
			}
			return toRole(ctx, &pods.Items[0])
		})).
		Complete(p)
}

// Reconcile takes one step of a role's rollout.
func (p *Pacer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	role := &v1alpha1.ModelRole{}
	if err := p.Client.Get(ctx, req.NamespacedName, role); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if role.DeletionTimestamp != nil || role.Spec.Revision == "" {
		return reconcile.Result{}, nil
	}
	slots, podOrdinals, err := p.slots(ctx, role)
	if err != nil {
		return reconcile.Result{}, err
	}
	// A scale-down: the ordinals at and above replicas leave now, highest first. Crossplane would
	// delete them too, but only on the role composite's next requeue.
	sort.Slice(slots, func(i, j int) bool { return slots[i].Ordinal > slots[j].Ordinal })
	for _, s := range slots {
		if s.Ordinal >= role.Spec.Replicas {
			if err := p.retire(ctx, role, s.Replica, s.Ordinal, "the role was scaled to "+strconv.Itoa(int(role.Spec.Replicas))); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	inFlight := int32(-1)
	if v, err := strconv.ParseInt(role.Annotations[workerv1.AnnotationReplacing], 10, 32); err == nil {
		inFlight = int32(v)
	}
	// Slots whose departed replica's Pods are all gone: announcing them wakes Crossplane to refill
	// them now. Each vacancy changes the value, and its refill clears it.
	var vacant []string
	for ordinal := range role.Spec.Replicas {
		if !podOrdinals[ordinal] && !slotFilled(slots, ordinal) {
			vacant = append(vacant, strconv.Itoa(int(ordinal)))
		}
	}
	if v := strings.Join(vacant, ","); v != role.Annotations[workerv1.AnnotationVacated] {
		var value any
		if v != "" {
			value = v
		}
		if err := p.annotate(ctx, role, workerv1.AnnotationVacated, value); err != nil {
			return reconcile.Result{}, err
		}
	}
	step := Pace(role.Spec.Revision, role.Spec.Replicas, slots, inFlight)
	ctrl.LoggerFrom(ctx).V(1).Info("rollout step", "role", role.Name, "step", step.Message)
	if step.InFlight != inFlight {
		var value any
		if step.InFlight >= 0 {
			value = strconv.Itoa(int(step.InFlight))
		}
		if err := p.annotate(ctx, role, workerv1.AnnotationReplacing, value); err != nil {
			return reconcile.Result{}, err
		}
	}
	if step.Replace == "" {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{}, p.retire(ctx, role, step.Replace, step.Ordinal, step.Message)
}

// retire deletes a ModelReplica (its Pods and Workload follow) and says so on the deployment.
func (p *Pacer) retire(ctx context.Context, role *v1alpha1.ModelRole, name string, ordinal int32, why string) error {
	replica := &v1alpha1.ModelReplica{}
	replica.Namespace, replica.Name = role.Namespace, name
	if err := p.Client.Delete(ctx, replica); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("retiring ModelReplica %s/%s: %w", replica.Namespace, replica.Name, err)
	}
	md := &workerv1.ModelDeployment{}
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: role.Namespace, Name: role.Spec.DeploymentName}, md); err == nil {
		p.Recorder.Eventf(md, nil, corev1.EventTypeNormal, "ReplicaLeaving", "Retire",
			"replica r%d of role %s is leaving (%s); the cache blocks it held stay leased for %s, then its siblings lose them",
			ordinal, role.Spec.RoleName, why, LeaseWindow)
	}
	return nil
}

func slotFilled(slots []Slot, ordinal int32) bool {
	for _, s := range slots {
		if s.Ordinal == ordinal && s.Replica != "" {
			return true
		}
	}
	return false
}

// slots reads the role's ModelReplicas, their Pods and their groups' Workloads, and which ordinals
// still have Pods on the API server.
func (p *Pacer) slots(ctx context.Context, role *v1alpha1.ModelRole) ([]Slot, map[int32]bool, error) {
	selector := client.MatchingLabels(naming.RoleLabels(role.Spec.DeploymentName, role.Spec.RoleName))
	replicas := &v1alpha1.ModelReplicaList{}
	if err := p.Client.List(ctx, replicas, client.InNamespace(role.Namespace), selector); err != nil {
		return nil, nil, err
	}
	pods := &corev1.PodList{}
	if err := p.Client.List(ctx, pods, client.InNamespace(role.Namespace), selector); err != nil {
		return nil, nil, err
	}
	admittedGroups := map[int32]bool{}
	for _, r := range replicas.Items {
		wl := &kueue.Workload{}
		err := p.Client.Get(ctx, types.NamespacedName{Namespace: role.Namespace, Name: workerv1.GroupName(role.Namespace, role.Spec.DeploymentName, role.Spec.RoleName, r.Spec.Ordinal)}, wl)
		switch {
		case err == nil:
			admittedGroups[r.Spec.Ordinal] = apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted)
		case !apierrors.IsNotFound(err):
			return nil, nil, err
		}
	}
	slots, present := readSlots(role, replicas.Items, pods.Items, admittedGroups)
	return slots, present, nil
}

// readSlots is each standing replica's slot. A slot's group name is its ordinal's, shared by the
// replica that left it and the one that replaces it, so the group's Workload alone cannot tell whose
// admission it is (Crossplane may even re-create a retired replica's Pod, which then rejoins the old,
// admitted group): a replica counts as admitted only through an ungated Pod of its own.
func readSlots(role *v1alpha1.ModelRole, replicas []v1alpha1.ModelReplica, pods []corev1.Pod, admittedGroups map[int32]bool) ([]Slot, map[int32]bool) {
	ungated, present := map[types.UID]bool{}, map[int32]bool{}
	for _, pod := range pods {
		o, err := strconv.ParseInt(pod.Labels[workerv1.LabelPodOrdinal], 10, 32)
		if err == nil {
			present[int32(o)] = true
		}
		owner := metav1.GetControllerOf(&pod)
		if err != nil || owner == nil || pod.DeletionTimestamp != nil {
			continue // a departing replica's Pods say nothing of its replacement
		}
		gated := false
		for _, g := range pod.Spec.SchedulingGates {
			gated = gated || g.Name == admissionGate
		}
		ungated[owner.UID] = ungated[owner.UID] || !gated
	}
	var slots []Slot
	for _, r := range replicas {
		if r.DeletionTimestamp != nil {
			continue // leaving: its slot counts as empty
		}
		slots = append(slots, Slot{Ordinal: r.Spec.Ordinal, Replica: r.Name, Revision: r.Spec.Revision,
			Outdated: !r.Spec.UpToDate(role.Spec), EverAdmitted: ungated[r.UID],
			Admitted: admittedGroups[r.Spec.Ordinal] && ungated[r.UID]})
	}
	return slots, present
}

// annotate sets (or, with nil, removes) one annotation of the ModelRole.
func (p *Pacer) annotate(ctx context.Context, role *v1alpha1.ModelRole, key string, value any) error {
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}})
	if err != nil {
		return err
	}
	if err := p.Client.Patch(ctx, role, client.RawPatch(types.MergePatchType, raw)); err != nil {
		return fmt.Errorf("annotating ModelRole %s/%s with %s: %w", role.Namespace, role.Name, key, err)
	}
	return nil
}
