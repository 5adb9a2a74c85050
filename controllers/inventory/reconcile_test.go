package inventory

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// boundPods stands in for the bound-Pod cache: the reconciler only lists from it.
type boundPods struct {
	cache.Cache
	c client.Client
}

func (b boundPods) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return b.c.List(ctx, list, opts...)
}

func reconcileType(t *testing.T, c client.Client, name string) *workerv1.InstanceType {
	t.Helper()
	r := &Reconciler{Client: c, Pods: boundPods{c: c}, Clock: clocktesting.NewFakePassiveClock(time.Unix(100, 0))}
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
	c := fakecluster.Builder(it, &n0, &n1, &busy).
		WithIndex(&corev1.Pod{}, podNode, func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()

	got := reconcileType(t, c, it.Name)
	assert.Equal(t, int64(12), got.Status.Accelerator.Capacity.Value(), "every card of the type's nodes")
	assert.Equal(t, int64(9), got.Status.Accelerator.Remaining.Value(), "less what bound Pods request")
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
