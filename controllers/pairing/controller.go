package pairing

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/controllers/qualification"
)

// Reconciler gives workerv1.LabelTransferRouted to the Pods of one transfer configuration of a
// deployment whose pair shares a transfer document, and takes it from the others: the deployment's
// llm-d-router selects on it (render: llmd.Deployment.SharedTransfer).
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// SetupWithManager watches ModelDeployments and the Pods of prefill, decode and encode roles (the
// roles a shared-transfer deployment has); a Server role's Pods never wake it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toDeployment := func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[workerv1.LabelInstance]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
	ofThePair := predicate.NewPredicateFuncs(func(o client.Object) bool {
		switch o.GetLabels()[workerv1.LabelRoleKind] {
		case "prefill", "decode", "encode":
			return true
		}
		return false
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("transfer_pairing").
		For(&workerv1.ModelDeployment{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(toDeployment), builder.WithPredicates(ofThePair)).
		Complete(r)
}

// Reconcile routes one deployment's Pods: nothing unless the deployment renders vLLM-Ascend's leg.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	md := &workerv1.ModelDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, md); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	shared, err := r.sharesTransfer(ctx, md)
	if err != nil || !shared {
		return reconcile.Result{}, err
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(md.Namespace), client.MatchingFields{index.PodDeployment: md.Name},
		client.MatchingLabels(naming.Managed())); err != nil {
		return reconcile.Result{}, err
	}
	members := make([]Member, 0, len(pods.Items))
	byName := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		byName[p.Name] = p
		members = append(members, memberOf(p))
	}
	d := Decide(members)
	// Unrouted first and confirmed by the API server before anything is routed: the router's watch
	// sees the changes in that order, so it never selects two configurations at once.
	switched := false
	for _, name := range d.Unroute {
		if err := r.label(ctx, byName[name], nil); err != nil {
			return reconcile.Result{}, err
		}
		switched = switched || byName[name].Labels[workerv1.LabelRoleKind] != "encode"
	}
	routed := "true"
	for _, name := range d.Route {
		if err := r.label(ctx, byName[name], &routed); err != nil {
			return reconcile.Result{}, err
		}
	}
	if switched {
		r.Recorder.Eventf(md, nil, corev1.EventTypeNormal, "TransferConfigurationRouted", "Route",
			"the router now selects transfer configuration %q only (%s); %d Pods of other configurations left its endpoints",
			d.Config, d.Message, len(d.Unroute))
	}
	return reconcile.Result{}, nil
}

// sharesTransfer reports whether the deployment renders vLLM-Ascend's leg, read as the render reads
// it: the engine, the router, the roles and their InstanceTypes' manufacturers.
func (r *Reconciler) sharesTransfer(ctx context.Context, md *workerv1.ModelDeployment) (bool, error) {
	if md.Spec.Router == nil || md.Spec.Router.Name != workerv1.RouterLLMD || !engine.DeclaresPair(md.Spec.Roles) {
		return false, nil
	}
	manufacturers := map[string]string{}
	for _, role := range md.Spec.Roles {
		it := &workerv1.InstanceType{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: role.InstanceType}, it); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if it.Status.Detail != nil {
			manufacturers[role.InstanceType] = it.Status.Detail.Manufacturer
		}
	}
	return engine.RendersAscendLeg(md.Spec.Engine.Name, md.Spec.Router, md.Spec.Roles, manufacturers), nil
}

// memberOf reads a Pod as the routing decision does.
func memberOf(p *corev1.Pod) Member {
	m := Member{Name: p.Name, Config: TransferConfiguration(p), Leaving: p.DeletionTimestamp != nil,
		Created: p.CreationTimestamp.Time, Routed: p.Labels[workerv1.LabelTransferRouted] == "true",
		Serving: p.Labels[workerv1.LabelMemberIndex] == "0" || p.Labels[workerv1.LabelServes] == "true"}
	if kind := p.Labels[workerv1.LabelRoleKind]; kind == "prefill" || kind == "decode" {
		m.Half = kind
	}
	m.Ready = qualification.Readiness(p) == corev1.ConditionTrue
	return m
}

// label sets (value) or removes (nil) a Pod's routed label with a merge patch of the label alone.
func (r *Reconciler) label(ctx context.Context, pod *corev1.Pod, value *string) error {
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{workerv1.LabelTransferRouted: value}}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, raw)); err != nil {
		change := "setting " + workerv1.LabelTransferRouted + " on"
		if value == nil {
			change = "removing " + workerv1.LabelTransferRouted + " from"
		}
		return client.IgnoreNotFound(fmt.Errorf("%s Pod %s/%s: %w", change, pod.Namespace, pod.Name, err))
	}
	return nil
}
