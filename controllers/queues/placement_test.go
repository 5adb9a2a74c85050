package queues

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/settings"
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
		rule      string
		nodes     []corev1.Node
		transient []string // the administrator's
		want      []corev1.Toleration
		dropped   []string
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
		{rule: "autoscalers' and lifecycle agents' taints are not tolerated",
			nodes: []corev1.Node{tainted("leaving", taint("ToBeDeletedByClusterAutoscaler", "1764900000", corev1.TaintEffectNoSchedule),
				taint("DeletionCandidateOfClusterAutoscaler", "1764900000", corev1.TaintEffectPreferNoSchedule),
				taint("karpenter.sh/disrupted", "", corev1.TaintEffectNoSchedule), taint("karpenter.sh/disruption", "disrupting", corev1.TaintEffectNoSchedule),
				taint("karpenter.sh/unregistered", "", corev1.TaintEffectNoExecute), taint("cloud.google.com/impending-node-termination", "", corev1.TaintEffectNoSchedule),
				taint("node.cluster.x-k8s.io/uninitialized", "", corev1.TaintEffectNoSchedule),
				taint("startup-taint.cluster-autoscaler.kubernetes.io/gpu-driver", "true", corev1.TaintEffectNoSchedule),
				taint("ignore-taint.cluster-autoscaler.kubernetes.io/cni", "true", corev1.TaintEffectNoSchedule),
				taint("status-taint.cluster-autoscaler.kubernetes.io/gpu-health", "degraded", corev1.TaintEffectNoExecute))}},
		{rule: "near miss: a taint that only begins like an exact transient key is tolerated",
			nodes: []corev1.Node{tainted("pool-0", taint("karpenter.sh/disrupted-pool", "", corev1.TaintEffectNoSchedule))},
			want:  []corev1.Toleration{{Key: "karpenter.sh/disrupted-pool", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}},
		{rule: "the administrator's transient keys and prefixes are not tolerated",
			nodes: []corev1.Node{tainted("pool-0", gpu, taint("example.com/draining", "", corev1.TaintEffectNoSchedule),
				taint("health.example.com/xid-79", "", corev1.TaintEffectNoExecute))},
			transient: []string{"example.com/draining", "health.example.com/"},
			want:      []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
		{rule: "near miss: a taint under another domain than the administrator's prefix is tolerated",
			nodes:     []corev1.Node{tainted("pool-0", taint("example.com/xid-79", "", corev1.TaintEffectNoExecute))},
			transient: []string{"health.example.com/"},
			want:      []corev1.Toleration{{Key: "example.com/xid-79", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}},
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
			got, dropped := Tolerations(tc.nodes, tc.transient)
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

// discovered is a node GPU feature discovery labelled as eight cards of product, not yet labelled as
// any type's, with taints.
func discovered(name, product string, taints ...corev1.Taint) *corev1.Node {
	n := tainted(name, taints...)
	n.Labels = map[string]string{"nvidia.com/gpu.product": product}
	n.Status.Capacity = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8")}
	return &n
}

func TestFlavorPlacesOnTheTypesNodes(t *testing.T) {
	const typeName = "gpustack-nvidia-a10g-linux-amd64"
	key := workerv1.InstanceTypeNodeLabel(typeName)
	gpu := taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)
	cases := []struct {
		rule        string
		nodes       []client.Object
		settings    map[string]any // the mdplane-settings data
		group       string         // the type's accelerator group, for a node it matches by its labels
		tolerations []corev1.Toleration
	}{
		{rule: "the flavor selects the type's label and tolerates its tainted node's taint",
			nodes:       []client.Object{typeNode("a10g-0", typeName, gpu), typeNode("a10g-1", typeName)},
			tolerations: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
		{rule: "near miss: another type's tainted node adds no toleration",
			nodes: []client.Object{typeNode("a10g-0", typeName), typeNode("h20-0", "gpustack-nvidia-h20-linux-amd64", gpu)}},
		{rule: "with no node yet the flavor still selects the type's label", nodes: nil},
		{rule: "a node the type counts before the label reaches it adds its taints",
			nodes: []client.Object{discovered("a10g-new", "NVIDIA-A10G", gpu)},
			group: "nvidia-a10g", tolerations: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
		{rule: "near miss: a node of another group, unlabelled, adds nothing",
			nodes: []client.Object{discovered("h20-new", "NVIDIA-H20", gpu)},
			group: "nvidia-a10g"},
		{rule: "a node leaving under an autoscaler adds no toleration",
			nodes:       []client.Object{typeNode("a10g-0", typeName, gpu, taint("ToBeDeletedByClusterAutoscaler", "1764900000", corev1.TaintEffectNoSchedule))},
			tolerations: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
		{rule: "the transient taints the Settings name add no toleration",
			nodes:       []client.Object{typeNode("a10g-0", typeName, gpu, taint("health.example.com/xid-79", "", corev1.TaintEffectNoExecute))},
			settings:    map[string]any{settings.InstanceTypeTransientTaints: "health.example.com/"},
			tolerations: []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			it := a10g()
			it.Spec.AcceleratorGroup = tc.group
			c := fakecluster.Builder(append(tc.nodes, it)...).Build()
			r := &Reconciler{Client: c, Settings: settingsData(tc.settings)}
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

func TestABadTransientTaintsSettingKeepsTheFlavor(t *testing.T) {
	const typeName = "gpustack-nvidia-a10g-linux-amd64"
	c := fakecluster.Builder(a10g(), typeNode("a10g-0", typeName, taint("health.example.com/xid-79", "", corev1.TaintEffectNoExecute))).Build()
	r := &Reconciler{Client: c, Settings: settingsData(map[string]any{settings.InstanceTypeTransientTaints: "health example"})}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: typeName}})
	require.ErrorContains(t, err, "data[instance-type-transient-taints]")
	require.ErrorContains(t, err, `"health example" is not a taint key`)
	assert.True(t, apierrors.IsNotFound(c.Get(context.Background(), types.NamespacedName{Name: typeName}, &kueue.ResourceFlavor{})),
		"no flavor is written from the built-in taints alone while the Setting is bad")
}

// settingsData reads as the mdplane-settings EnvironmentConfig holding data; nil data reads as no object.
type settingsData map[string]any

func (d settingsData) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if d == nil || key.Name != settings.EnvironmentConfigName {
		return apierrors.NewNotFound(schema.GroupResource{Group: settings.Group, Resource: settings.Resource}, key.Name)
	}
	obj.(*unstructured.Unstructured).Object["data"] = map[string]any(d)
	return nil
}
