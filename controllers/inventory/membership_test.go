package inventory

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

func h20Type() *workerv1.InstanceType {
	it := a10gType()
	it.Name, it.Spec.AcceleratorGroup = "gpustack-nvidia-h20-linux-amd64", "nvidia-h20"
	return it
}

// typeLabels are the InstanceType labels the named node carries, by type name.
func typeLabels(t *testing.T, c client.Client, node string, types ...*workerv1.InstanceType) []string {
	t.Helper()
	n := &corev1.Node{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: node}, n))
	var out []string
	for _, it := range types {
		if v, ok := n.Labels[workerv1.InstanceTypeNodeLabel(it.Name)]; ok {
			require.Equal(t, "true", v)
			out = append(out, it.Name)
		}
	}
	return out
}

func TestMembership(t *testing.T) {
	a10g, h20t, cpu := a10gType(), h20Type(), cpuType()
	all := []*workerv1.InstanceType{a10g, h20t, cpu}
	arm := func(n *corev1.Node) { n.Labels[corev1.LabelArchStable] = "arm64" }
	staleA10G := labelled(workerv1.InstanceTypeNodeLabel(a10g.Name), "true")
	cases := []struct {
		rule  string
		node  corev1.Node
		types []*workerv1.InstanceType // the types that exist
		want  []string
	}{
		{rule: "a node GPU feature discovery labels NVIDIA-A10G gets the A10G type's label, and the CPU type's of its os and arch",
			node: gpuNode("gfd-a10g", "8"), types: all, want: []string{a10g.Name, cpu.Name}},
		{rule: "near miss: a node labelled NVIDIA-H20 gets the H20 type's label, not the A10G type's",
			node: gpuNode("gfd-h20", "8", h20), types: all, want: []string{h20t.Name, cpu.Name}},
		{rule: "the administrator's override wins over GPU feature discovery",
			node: gpuNode("override", "8", labelled(workerv1.LabelAcceleratorGroup, "nvidia-h20")), types: all, want: []string{h20t.Name, cpu.Name}},
		{rule: "near miss: an arm64 node of the same product gets no amd64 type's label",
			node: gpuNode("arm", "8", arm), types: all},
		{rule: "a node that stops matching (relabelled NVIDIA-H20) loses the A10G type's label",
			node: gpuNode("was-a10g", "8", h20, staleA10G), types: all, want: []string{h20t.Name, cpu.Name}},
		{rule: "a type that is gone takes its label off its nodes",
			node: gpuNode("orphan", "8", staleA10G), types: []*workerv1.InstanceType{h20t, cpu}, want: []string{cpu.Name}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			objs := []client.Object{&tc.node}
			for _, it := range tc.types {
				objs = append(objs, it.DeepCopy())
			}
			c := fakecluster.Builder(objs...).Build()
			m := &Membership{Client: c}
			for _, it := range all { // every type, existing or gone, is reconciled
				_, err := m.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: it.Name}})
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, typeLabels(t, c, tc.node.Name, all...))
			n := &corev1.Node{}
			require.NoError(t, c.Get(context.Background(), client.ObjectKey{Name: tc.node.Name}, n))
			assert.Equal(t, tc.node.Labels[labelNVIDIAProduct], n.Labels[labelNVIDIAProduct], "the other labels stay as their writers left them")
		})
	}
}

func TestInstanceTypeNodeLabel(t *testing.T) {
	long := strings.Repeat("a", 40) + "-nvidia-h20-linux-amd64-with-a-long-suffix"
	cases := []struct {
		rule, name, want string
	}{
		{rule: "a name that fits a label key's name part is the name", name: "gpustack-nvidia-h20-linux-amd64",
			want: "instancetype.worker.gpustack.ai/gpustack-nvidia-h20-linux-amd64"},
		{rule: "near miss: a name of exactly 63 characters still fits", name: strings.Repeat("b", 63),
			want: "instancetype.worker.gpustack.ai/" + strings.Repeat("b", 63)},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, workerv1.InstanceTypeNodeLabel(tc.name))
		})
	}
	t.Run("a longer name is cut and hashed into a valid key of its own", func(t *testing.T) {
		key := workerv1.InstanceTypeNodeLabel(long)
		assert.Empty(t, k8svalidation.IsQualifiedName(key))
		assert.True(t, strings.HasPrefix(key, workerv1.LabelInstanceTypePrefix+long[:40]))
		other := workerv1.InstanceTypeNodeLabel(long + "x")
		assert.NotEqual(t, key, other, "two long names sharing their start")
		assert.Empty(t, k8svalidation.IsQualifiedName(workerv1.InstanceTypeNodeLabel(strings.Repeat("c", 45)+"-"+strings.Repeat("d", 30))),
			"a cut ending in a dash is trimmed")
	})
}
