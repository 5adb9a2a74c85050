package queues

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

func tainted(name string, taints ...corev1.Taint) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Taints: taints}}
}

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func equal(key, value string, effect corev1.TaintEffect) corev1.Toleration {
	return corev1.Toleration{Key: key, Operator: corev1.TolerationOpEqual, Value: value, Effect: effect}
}

func TestTolerations(t *testing.T) {
	gpu := taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)
	cases := []struct {
		rule    string
		nodes   []corev1.Node
		want    []corev1.Toleration
		dropped []string
	}{
		{rule: "a tainted node's NoSchedule taint is tolerated, Equal to its value",
			nodes: []corev1.Node{tainted("pool-0", gpu)}, want: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
		{rule: "near miss: an untainted node needs no toleration", nodes: []corev1.Node{tainted("plain")}},
		{rule: "a NoExecute taint without a value is tolerated by Exists",
			nodes: []corev1.Node{tainted("pool-0", taint("dedicated", "", corev1.TaintEffectNoExecute))},
			want:  []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
		{rule: "near miss: a PreferNoSchedule taint keeps no Pod off, and is not tolerated",
			nodes: []corev1.Node{tainted("pool-0", taint("spot", "true", corev1.TaintEffectPreferNoSchedule))}},
		{rule: "Kubernetes' own node-condition taints are not tolerated",
			nodes: []corev1.Node{tainted("sick", taint(corev1.TaintNodeNotReady, "", corev1.TaintEffectNoExecute),
				taint(corev1.TaintNodeUnschedulable, "", corev1.TaintEffectNoSchedule), taint("node.cloudprovider.kubernetes.io/uninitialized", "true", corev1.TaintEffectNoSchedule))}},
		{rule: "near miss: a taint merely named like a node key is tolerated",
			nodes: []corev1.Node{tainted("pool-0", taint("example.com/node.kubernetes.io", "x", corev1.TaintEffectNoSchedule))},
			want:  []corev1.Toleration{equal("example.com/node.kubernetes.io", "x", corev1.TaintEffectNoSchedule)}},
		{rule: "the union over the type's nodes, each once, sorted",
			nodes: []corev1.Node{tainted("pool-1", taint("zone", "b", corev1.TaintEffectNoSchedule), gpu), tainted("pool-0", gpu, taint("zone", "a", corev1.TaintEffectNoSchedule))},
			want: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule),
				equal("zone", "a", corev1.TaintEffectNoSchedule), equal("zone", "b", corev1.TaintEffectNoSchedule)}},
		{rule: "past eight, the taints are tolerated by key alone",
			nodes: nodesTainted(9, func(i int) corev1.Taint { return taint("zone", fmt.Sprint(i), corev1.TaintEffectNoSchedule) }),
			want:  []corev1.Toleration{{Key: "zone", Operator: corev1.TolerationOpExists}}},
		{rule: "past eight keys, the keys beyond are dropped and named",
			nodes: nodesTainted(9, func(i int) corev1.Taint { return taint(fmt.Sprintf("k%d", i), "", corev1.TaintEffectNoSchedule) }),
			want: func() []corev1.Toleration {
				var out []corev1.Toleration
				for i := range 8 {
					out = append(out, corev1.Toleration{Key: fmt.Sprintf("k%d", i), Operator: corev1.TolerationOpExists})
				}
				return out
			}(), dropped: []string{"k8"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, dropped := Tolerations(tc.nodes)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.dropped, dropped)
		})
	}
}

func nodesTainted(n int, taintOf func(int) corev1.Taint) []corev1.Node {
	out := make([]corev1.Node, 0, n)
	for i := range n {
		out = append(out, tainted(fmt.Sprintf("n%d", i), taintOf(i)))
	}
	return out
}

// typeNode is a node labelled as one of the type's, with taints.
func typeNode(name, instanceType string, taints ...corev1.Taint) *corev1.Node {
	n := tainted(name, taints...)
	n.Labels = map[string]string{workerv1.InstanceTypeNodeLabel(instanceType): "true"}
	return &n
}

func TestFlavorPlacesOnTheTypesNodes(t *testing.T) {
	const typeName = "gpustack-nvidia-a10g-linux-amd64"
	key := workerv1.InstanceTypeNodeLabel(typeName)
	gpu := taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)
	cases := []struct {
		rule        string
		nodes       []client.Object
		tolerations []corev1.Toleration
	}{
		{rule: "the flavor selects the type's label and tolerates its tainted node's taint",
			nodes:       []client.Object{typeNode("a10g-0", typeName, gpu), typeNode("a10g-1", typeName)},
			tolerations: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
		{rule: "near miss: another type's tainted node adds no toleration",
			nodes: []client.Object{typeNode("a10g-0", typeName), typeNode("h20-0", "gpustack-nvidia-h20-linux-amd64", gpu)}},
		{rule: "with no node yet the flavor still selects the type's label", nodes: nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(append(tc.nodes, a10g())...).Build()
			r := &Reconciler{Client: c}
			_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: typeName}})
			require.NoError(t, err)
			rf := &kueue.ResourceFlavor{}
			require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: typeName}, rf))
			assert.Equal(t, map[string]string{key: "true"}, rf.Spec.NodeLabels)
			assert.Equal(t, tc.tolerations, rf.Spec.Tolerations)
			assert.Nil(t, rf.Spec.TopologyName, "no topology: nodeLabels and tolerations stay mutable")

			_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: typeName}})
			require.NoError(t, err)
			again := &kueue.ResourceFlavor{}
			require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: typeName}, again))
			assert.Equal(t, rf.Spec, again.Spec, "the same nodes give the same flavor")
		})
	}
}
