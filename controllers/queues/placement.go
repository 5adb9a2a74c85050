package queues

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/inventory"
)

// maxFlavorTolerations is how many tolerations a ResourceFlavor holds.
const maxFlavorTolerations = 8

// TransientTaints are taints set on a node for a while by Kubernetes itself (its conditions: not
// ready, unreachable, cordoned, under pressure, not yet initialized by its cloud provider), by
// autoscalers (a node to be deleted, a deletion candidate, a node not yet started or registered) and by
// lifecycle agents (a node about to terminate, a node Cluster API has not yet initialized). A type's
// Pods keep off such a node as any Pod does, and the flavor does not follow such a taint coming and
// going. A key ending in / matches every key it begins.
var TransientTaints = []string{
	"node.kubernetes.io/",
	"node.cloudprovider.kubernetes.io/",
	"ToBeDeletedByClusterAutoscaler",
	"DeletionCandidateOfClusterAutoscaler",
	"ignore-taint.cluster-autoscaler.kubernetes.io/",
	"startup-taint.cluster-autoscaler.kubernetes.io/",
	"status-taint.cluster-autoscaler.kubernetes.io/",
	"karpenter.sh/disrupted",
	"karpenter.sh/disruption",
	"karpenter.sh/unregistered",
	"cloud.google.com/impending-node-termination",
	"node.cluster.x-k8s.io/uninitialized",
}

// flavor is the type's ResourceFlavor: it selects the Nodes labelled as the type's and tolerates
// their taints, which Kueue's admission adds to the Pods it admits through it. Without a topology it
// is named after the type; with one (topologyName not empty) Kueue keeps its spec immutable, so it
// is named after the type and a hash of its spec, and a change of the nodes' taints is a new flavor.
func (r *Reconciler) flavor(ctx context.Context, it *workerv1.InstanceType, topologyName string, transient []string) (*kueueac.ResourceFlavorApplyConfiguration, string, error) {
	key := workerv1.InstanceTypeNodeLabel(it.Name)
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return nil, "", fmt.Errorf("listing the Nodes of InstanceType %s: %w", it.Name, err)
	}
	// The type's nodes are those labelled as its own and those the inventory counts but the
	// label has not reached yet: the type's capacity, and so its queue's quota, grows with a node as
	// soon as the node matches, and a replica admitted then must tolerate that node's taints.
	var own []corev1.Node
	for i := range nodes.Items {
		if n := &nodes.Items[i]; n.Labels[key] == "true" || inventory.NodeMatches(it, n) {
			own = append(own, *n)
		}
	}
	// An autoscaled pool's declared taints count as a node's: before its first node exists, the
	// Pods (and the templates the autoscaler simulates) must already tolerate them.
	poolTaints, err := it.NodePoolTaints()
	if err != nil {
		return nil, "", err
	}
	if len(poolTaints) > 0 {
		own = append(own, corev1.Node{Spec: corev1.NodeSpec{Taints: poolTaints}})
	}
	tolerations, dropped := Tolerations(own, transient)
	if len(dropped) > 0 {
		ctrl.LoggerFrom(ctx).Info("the type's nodes carry more taints than a ResourceFlavor can tolerate: its Pods cannot reach the nodes tainted so; give the nodes fewer distinct taint keys",
			"instanceType", it.Name, "untolerated", dropped)
	}
	nodeLabels := map[string]string{key: "true"}
	spec := kueueac.ResourceFlavorSpec().WithNodeLabels(nodeLabels)
	for _, t := range tolerations {
		ac := corev1ac.Toleration().WithKey(t.Key).WithOperator(t.Operator).WithEffect(t.Effect)
		if t.Value != "" {
			ac.WithValue(t.Value)
		}
		spec.WithTolerations(ac)
	}
	name := it.Name
	if topologyName != "" {
		spec.WithTopologyName(kueue.TopologyReference(topologyName))
		name = hashedName(it.Name, struct {
			NodeLabels   map[string]string
			Tolerations  []corev1.Toleration
			TopologyName string
		}{nodeLabels, tolerations, topologyName})
	}
	return kueueac.ResourceFlavor(name).WithLabels(ownedLabels(it.Name)).WithSpec(spec), name, nil
}

// Tolerations tolerate the NoSchedule and NoExecute taints of the nodes, but the transient ones
// (TransientTaints, and the administrator's transient keys and prefixes): Equal to a taint's value,
// Exists for a taint without one; each once,
// sorted by key, value and effect, so that the same nodes always give the same flavor. Past the
// eight a ResourceFlavor holds, the taints are tolerated by key alone (Exists, any value and effect);
// the keys past eight even then are returned as dropped.
func Tolerations(nodes []corev1.Node, transient []string) (tolerations []corev1.Toleration, dropped []string) {
	var out []corev1.Toleration
	for i := range nodes {
		for _, t := range nodes[i].Spec.Taints {
			if (t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectNoExecute) || isTransient(t.Key, TransientTaints) || isTransient(t.Key, transient) {
				continue
			}
			tol := corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists, Effect: t.Effect}
			if t.Value != "" {
				tol.Operator, tol.Value = corev1.TolerationOpEqual, t.Value
			}
			out = append(out, tol)
		}
	}
	out = sortedUnique(out)
	if len(out) <= maxFlavorTolerations {
		return out, nil
	}
	byKey := make([]corev1.Toleration, 0, len(out))
	for _, t := range out {
		byKey = append(byKey, corev1.Toleration{Key: t.Key, Operator: corev1.TolerationOpExists})
	}
	byKey = sortedUnique(byKey)
	if len(byKey) <= maxFlavorTolerations {
		return byKey, nil
	}
	for _, t := range byKey[maxFlavorTolerations:] {
		dropped = append(dropped, t.Key)
	}
	return byKey[:maxFlavorTolerations], dropped
}

// isTransient reports whether a taint key is one of keys, or begins with one of them that ends in /.
func isTransient(key string, keys []string) bool {
	for _, k := range keys {
		if key == k || (strings.HasSuffix(k, "/") && strings.HasPrefix(key, k)) {
			return true
		}
	}
	return false
}

func sortedUnique(ts []corev1.Toleration) []corev1.Toleration {
	slices.SortFunc(ts, func(a, b corev1.Toleration) int {
		return strings.Compare(a.Key+"\x00"+a.Value+"\x00"+string(a.Effect), b.Key+"\x00"+b.Value+"\x00"+string(b.Effect))
	})
	return slices.CompactFunc(ts, func(a, b corev1.Toleration) bool { return a == b })
}

// nodeEvents enqueues the types a Node is labelled as one of, before or after an event that changes
// its labels or its taints: a hashed label names no type, so the types are listed and their labels
// looked for.
func (r *Reconciler) nodeEvents() handler.TypedEventHandler[client.Object, reconcile.Request] {
	enqueue := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], nodes ...client.Object) {
		list := &workerv1.InstanceTypeList{}
		if err := r.Client.List(ctx, list); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "listing the InstanceTypes a Node serves")
			return
		}
		for i := range list.Items {
			key := workerv1.InstanceTypeNodeLabel(list.Items[i].Name)
			for _, n := range nodes {
				if _, ok := n.GetLabels()[key]; ok {
					q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
					break
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			old, new := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			if !equality.Semantic.DeepEqual(old.Labels, new.Labels) || !equality.Semantic.DeepEqual(old.Spec.Taints, new.Spec.Taints) {
				enqueue(ctx, q, old, new)
			}
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, q, e.Object)
		},
	}
}
