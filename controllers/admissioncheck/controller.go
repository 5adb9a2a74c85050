package admissioncheck

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
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
	if err := r.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels(naming.DeploymentLabels(deployment))); err != nil {
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

// Reconcile judges the set the Workload belongs to and writes the verdict on every member.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	wl := &kueue.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, wl); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if CheckState(wl, CheckName) == nil && wl.Annotations[workerv1.AnnotationParkedGeneration] == "" {
		return reconcile.Result{}, nil // its ClusterQueue does not ask for this check (yet)
	}
	md, err := r.deploymentOf(ctx, wl)
	if err != nil {
		return reconcile.Result{}, err
	}
	if md == nil {
		return reconcile.Result{}, r.setCheck(ctx, wl, kueue.CheckStateReady, "not a ModelDeployment replica group; nothing to hold it for")
	}
	groups, err := r.groups(ctx, md.Namespace, md.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	set := Set{Declared: map[string]int32{}}
	for _, role := range md.Spec.Roles {
		set.Declared[role.Name] = role.WithDefaults().Replicas
	}
	members := map[string]*kueue.Workload{}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		key := groups[name]
		member := &kueue.Workload{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: md.Namespace, Name: name}, member); {
		case apierrors.IsNotFound(err):
			member = nil
		case err != nil:
			return reconcile.Result{}, err
		default:
			members[name] = member
		}
		set.Groups = append(set.Groups, Group{Role: key.role, Ordinal: key.ordinal, Workload: member})
	}
	if _, ok := members[wl.Name]; !ok {
		members[wl.Name] = wl // a member whose Pods are gone still gets the set's verdict
	}

	generation := strconv.FormatInt(md.Generation, 10)
	if parked := r.parkedAt(members); parked != "" {
		if parked == generation {
			return reconcile.Result{}, nil
		}
		log.Info("deployment edited; queueing its parked set again", "deployment", md.Name)
		for _, m := range members {
			if err := r.setActive(ctx, m, true, ""); err != nil {
				return reconcile.Result{}, err
			}
		}
		return reconcile.Result{}, nil
	}

	now := r.Clock.Now()
	v := Judge(set, CheckName, now, r.ParkAfter)
	if v.Park {
		for _, m := range members {
			if CheckState(m, CheckName) != nil {
				if err := r.setCheck(ctx, m, kueue.CheckStatePending, v.Message); err != nil {
					return reconcile.Result{}, err
				}
			}
			if err := r.setActive(ctx, m, false, generation); err != nil {
				return reconcile.Result{}, err
			}
		}
		setsParked.Inc()
		r.Recorder.Eventf(md, nil, corev1.EventTypeWarning, "ReplicaSetParked", "Park", "%s", v.Message)
		return reconcile.Result{}, nil
	}
	turned := false
	for _, m := range members {
		state := CheckState(m, CheckName)
		if state == nil {
			continue
		}
		turned = turned || (v.Admitted && state.State != kueue.CheckStateReady)
		if err := r.setCheck(ctx, m, v.State, v.Message); err != nil {
			return reconcile.Result{}, err
		}
	}
	if turned {
		setsAdmitted.Inc()
		if !v.FirstReserved.IsZero() {
			admissionWait.Observe(now.Sub(v.FirstReserved).Seconds())
		}
		r.Recorder.Eventf(md, nil, corev1.EventTypeNormal, "ReplicaSetAdmitted", "Admit", "%s", v.Message)
	}
	if v.ParkIn > 0 {
		return reconcile.Result{RequeueAfter: v.ParkIn}, nil
	}
	return reconcile.Result{}, nil
}

// deploymentOf finds the deployment a Workload's Pods belong to, or nil when it is not a
// deployment's replica group (or the deployment is gone).
func (r *Reconciler) deploymentOf(ctx context.Context, wl *kueue.Workload) (*workerv1.ModelDeployment, error) {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(wl.Namespace), client.MatchingLabels(naming.GroupLabels(wl.Name)), client.Limit(1)); err != nil {
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

// parkedAt returns the deployment generation a set was parked at, or "".
func (r *Reconciler) parkedAt(members map[string]*kueue.Workload) string {
	for _, m := range members {
		if g := m.Annotations[workerv1.AnnotationParkedGeneration]; g != "" {
			return g
		}
	}
	return ""
}

// setCheck applies this check's state on a Workload under the controller's field owner, keeping the
// transition time while the state holds. An unchanged verdict writes nothing.
func (r *Reconciler) setCheck(ctx context.Context, wl *kueue.Workload, state kueue.CheckState, message string) error {
	transition := metav1.NewTime(r.Clock.Now())
	if cur := CheckState(wl, CheckName); cur != nil {
		if cur.State == state && cur.Message == message {
			return nil
		}
		if cur.State == state {
			transition = cur.LastTransitionTime
		}
	}
	patch := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": kueue.GroupVersion.String(),
		"kind":       "Workload",
		"metadata":   map[string]any{"name": wl.Name, "namespace": wl.Namespace},
		"status": map[string]any{"admissionChecks": []any{map[string]any{
			"name":               string(CheckName),
			"state":              string(state),
			"message":            message,
			"lastTransitionTime": transition.UTC().Format(time.RFC3339),
		}}},
	}}
	err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(patch), client.FieldOwner(FieldOwner), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("writing the %s check on Workload %s/%s: %w", CheckName, wl.Namespace, wl.Name, err)
	}
	return nil
}

// setActive activates or deactivates a Workload, recording the generation it was parked at.
func (r *Reconciler) setActive(ctx context.Context, wl *kueue.Workload, active bool, parkedGeneration string) error {
	annotation := any(nil)
	if parkedGeneration != "" {
		annotation = parkedGeneration
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{workerv1.AnnotationParkedGeneration: annotation}},
		"spec":     map[string]any{"active": active},
	}
	raw, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, wl, client.RawPatch(types.MergePatchType, raw)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting Workload %s/%s active=%t: %w", wl.Namespace, wl.Name, active, err)
	}
	return nil
}
