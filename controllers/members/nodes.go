package members

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/internal/replicas"
)

// lostNode is replicas.LostNode of the members, reading the nodes they are bound to from the cache.
func (r *Reconciler) lostNode(ctx context.Context, members []*corev1.Pod) (string, error) {
	nodes := map[string]*corev1.Node{}
	for _, p := range members {
		name := p.Spec.NodeName
		if _, read := nodes[name]; read || name == "" {
			continue
		}
		node := &corev1.Node{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, node); {
		case apierrors.IsNotFound(err):
			nodes[name] = nil
		case err != nil:
			return "", err
		default:
			nodes[name] = node
		}
	}
	return replicas.LostNode(members, nodes), nil
}

// nodeReplicas maps a node to the replicas whose members are bound to it.
func (r *Reconciler) nodeReplicas(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.MatchingFields{index.PodNode: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var out []reconcile.Request
	for i := range pods.Items {
		owner := metav1.GetControllerOf(&pods.Items[i])
		if owner == nil || owner.Kind != v1alpha1.ModelReplicaKind {
			continue
		}
		key := types.NamespacedName{Namespace: pods.Items[i].Namespace, Name: owner.Name}
		if !seen[key] {
			seen[key] = true
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// nodeReadinessChanged passes a node's creation and deletion and a change of its Ready condition's
// status; a node's heartbeats and the rest of its status pass nothing.
func nodeReadinessChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return nodeReady(e.ObjectOld) != nodeReady(e.ObjectNew)
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// nodeReady is the status of a node's Ready condition, "" without one.
func nodeReady(o client.Object) corev1.ConditionStatus {
	node, ok := o.(*corev1.Node)
	if !ok {
		return ""
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}
