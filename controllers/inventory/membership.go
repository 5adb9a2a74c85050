package inventory

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Membership labels every Node NodeMatches picks for an InstanceType with the type's label
// (workerv1.InstanceTypeNodeLabel, "true") and takes it off a Node that stops matching or once the
// type is gone. The type's ResourceFlavor selects that one label: a node is matched through several
// label sources (the override, GPUStack's, GPU feature discovery's, AMD's, first one wins), which no
// set of exact key=value pairs can express. It runs whether or not the inventory counts the types.
type Membership struct {
	Client client.Client
}

// SetupWithManager watches InstanceTypes (created, their spec edited, deleted) and Nodes (created, or
// their labels edited: NodeMatches reads nothing else).
func (m *Membership) SetupWithManager(mgr ctrl.Manager) error {
	allTypes := func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &workerv1.InstanceTypeList{}
		if err := mgr.GetClient().List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the InstanceTypes to label their nodes")
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(list.Items))
		for i := range list.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
		return reqs
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("instancetype_membership").
		For(&workerv1.InstanceType{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(allTypes), builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
			},
			DeleteFunc: func(event.DeleteEvent) bool { return false },
		})).
		Complete(m)
}

// Reconcile puts the type's label on the Nodes it matches and takes it off the others; a type gone
// or being deleted matches none.
func (m *Membership) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	it := &workerv1.InstanceType{}
	if err := m.Client.Get(ctx, req.NamespacedName, it); apierrors.IsNotFound(err) {
		it = nil
	} else if err != nil {
		return reconcile.Result{}, err
	} else if it.DeletionTimestamp != nil {
		it = nil
	}
	nodes := &corev1.NodeList{}
	if err := m.Client.List(ctx, nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing the Nodes: %w", err)
	}
	key := workerv1.InstanceTypeNodeLabel(req.Name)
	for i := range nodes.Items {
		n := &nodes.Items[i]
		want := it != nil && NodeMatches(it, n)
		if has := n.Labels[key] == "true"; has == want {
			continue
		}
		if err := m.label(ctx, n.Name, key, want); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// label sets or removes the key on the Node by a merge patch of that one label, leaving every other
// label to whoever wrote it.
func (m *Membership) label(ctx context.Context, node, key string, on bool) error {
	var value any // null removes the key
	if on {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}})
	if err != nil {
		return err
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	if err := client.IgnoreNotFound(m.Client.Patch(ctx, n, client.RawPatch(types.MergePatchType, patch))); err != nil {
		return fmt.Errorf("labelling Node %s %s=%v: %w", node, key, value, err)
	}
	return nil
}
