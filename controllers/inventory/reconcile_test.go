package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// boundPods stands in for the cache of the others' bound Pods: the reconciler only lists from it,
// and it holds no Pod of mdplane's.
type boundPods struct {
	cache.Cache
	c client.Client
}

func (b boundPods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return b.c.List(ctx, list, append(opts, client.MatchingLabelsSelector{Selector: othersPods()})...)
}

// managerCache stands in for the manager's cache, which holds mdplane's Pods only.
type managerCache struct {
	client.Client
}

func (m managerCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, pods := list.(*corev1.PodList); pods {
		opts = append(opts, client.MatchingLabels(naming.Managed()))
	}
	return m.Client.List(ctx, list, opts...)
}

func reconcileType(t *testing.T, c client.Client, name string) *workerv1.InstanceType {
	t.Helper()
	r := &Reconciler{Client: managerCache{c}, Pods: boundPods{c: c}, Clock: clocktesting.NewFakePassiveClock(time.Unix(100, 0))}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
	require.NoError(t, err)
	got := &workerv1.InstanceType{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: name}, got))
	return got
}

func TestReconcile(t *testing.T) {
	ctx := context.Background()
	it := a10gType()
	it.Status.Entrance = workerv1.EntranceName(it.Name) // the queues controller's
	n0, n1 := gpuNode("gpu-0", "8"), gpuNode("gpu-1", "4")
	busy := pod("engine-0", "gpu-0", "3", "")
	managed := func(p *corev1.Pod) { p.Labels = naming.DeploymentLabels("chat") }
	member := pod("chat-0", "gpu-1", "1", "", managed)
	waiting := pod("chat-1", "", "4", "", managed)
	c := fakecluster.Builder(it, &n0, &n1, &busy, &member, &waiting).
		WithIndex(&corev1.Pod{}, podNode, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()

	got := reconcileType(t, c, it.Name)
	assert.Equal(t, int64(12), got.Status.Accelerator.Capacity.Value(), "every card of the type's nodes")
	assert.Equal(t, int64(8), got.Status.Accelerator.Remaining.Value(),
		"less what bound Pods request, the others' and mdplane's each counted once, an unbound one not at all")
	assert.Equal(t, int64(5), got.Status.Accelerator.OnceMaxRequest.Value(), "the most one node has free")
	assert.Equal(t, "NVIDIA-A10G", got.Status.Detail.Product)
	assert.Equal(t, workerv1.InstanceTypePhaseActive, got.Status.Phase)
	assert.True(t, meta.IsStatusConditionTrue(got.Status.Conditions, workerv1.InstanceTypeNodesAvailable))
	assert.Equal(t, workerv1.EntranceName(it.Name), got.Status.Entrance, "the entrance is another writer's, and stays")

	again := reconcileType(t, c, it.Name)
	assert.Equal(t, got.ResourceVersion, again.ResourceVersion, "an unchanged count is not written")

	require.NoError(t, c.Delete(ctx, &n0))
	require.NoError(t, c.Delete(ctx, &n1))
	empty := reconcileType(t, c, it.Name)
	assert.Equal(t, int64(0), empty.Status.Accelerator.Capacity.Value())
	assert.Equal(t, workerv1.InstanceTypePhasePreparing, empty.Status.Phase)
	assert.Equal(t, "NVIDIA-A10G", empty.Status.Detail.Product, "the detail last observed stays with the nodes gone")
	cond := meta.FindStatusCondition(empty.Status.Conditions, workerv1.InstanceTypeNodesAvailable)
	require.NotNil(t, cond)
	assert.Equal(t, workerv1.ReasonNoMatchingNodes, cond.Reason)
}

func TestNodeChanged(t *testing.T) {
	base := gpuNode("gpu-0", "8")
	for _, row := range []struct {
		rule    string
		edit    func(*corev1.Node)
		changed bool
	}{
		{"a heartbeat is no change", func(n *corev1.Node) { n.ResourceVersion = "2" }, false},
		{"a cordon is", cordoned, true},
		{"readiness is", notReady, true},
		{"a label is", labelled(labelNVIDIAProduct, "NVIDIA-H20"), true},
		{"what it allocates is", func(n *corev1.Node) { n.Status.Allocatable["nvidia.com/gpu"] = quantityPtr("7").DeepCopy() }, true},
		{"a taint is", func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
		}, true},
	} {
		t.Run(row.rule, func(t *testing.T) {
			n := base.DeepCopy()
			row.edit(n)
			assert.Equal(t, row.changed, NodeChanged(&base, n))
		})
	}
}

func TestCountAgain(t *testing.T) {
	bound := pod("chat-0", "gpu-0", "1", "")
	unbound := pod("chat-0", "", "1", "")
	ended := pod("chat-0", "gpu-0", "1", "", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	deleting := pod("chat-0", "gpu-0", "1", "", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} })
	relabelled := pod("chat-0", "gpu-0", "1", "", func(p *corev1.Pod) { p.Labels = map[string]string{"a": "b"} })
	for _, row := range []struct {
		rule  string
		fire  func(podEvents, podQueue)
		count bool
	}{
		{"a Pod created bound is counted", create(&bound), true},
		{"a Pod created unbound holds nothing yet", create(&unbound), false},
		{"a Pod bound is counted", update(&unbound, &bound), true},
		{"a Pod ended frees its node", update(&bound, &ended), true},
		{"a Pod being deleted is counted again", update(&bound, &deleting), true},
		{"a bound Pod's other changes count nothing", update(&bound, &relabelled), false},
		{"a bound Pod deleted frees its node", remove(&bound), true},
		{"an unbound Pod deleted held nothing", remove(&unbound), false},
	} {
		t.Run(row.rule, func(t *testing.T) {
			called := false
			row.fire(countAgain(func(context.Context, podQueue) { called = true }), nil)
			assert.Equal(t, row.count, called)
		})
	}
}

type podEvents = handler.TypedFuncs[*corev1.Pod, reconcile.Request]

type podQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

func create(p *corev1.Pod) func(podEvents, podQueue) {
	return func(h podEvents, q podQueue) {
		h.Create(context.Background(), event.TypedCreateEvent[*corev1.Pod]{Object: p}, q)
	}
}

func update(old, new *corev1.Pod) func(podEvents, podQueue) {
	return func(h podEvents, q podQueue) {
		h.Update(context.Background(), event.TypedUpdateEvent[*corev1.Pod]{ObjectOld: old, ObjectNew: new}, q)
	}
}

func remove(p *corev1.Pod) func(podEvents, podQueue) {
	return func(h podEvents, q podQueue) {
		h.Delete(context.Background(), event.TypedDeleteEvent[*corev1.Pod]{Object: p}, q)
	}
}

func TestOthersPods(t *testing.T) {
	for _, row := range []struct {
		rule     string
		labels   map[string]string
		selected bool
	}{
		{"mdplane's Pods are the manager's cache's", naming.DeploymentLabels("chat"), false},
		{"a Pod without the label is another's", map[string]string{"app": "chat"}, true},
		{"a Pod naming another app is another's", map[string]string{workerv1.LabelName: "chat"}, true},
	} {
		t.Run(row.rule, func(t *testing.T) {
			assert.Equal(t, row.selected, othersPods().Matches(labels.Set(row.labels)))
		})
	}
}
