package queues

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

const rack, zone = "topology.gpustack.ai/rack", "topology.kubernetes.io/zone"

func withLevels(value string) *workerv1.InstanceType {
	it := a10g()
	it.Annotations = map[string]string{AnnotationTopologyLevels: value}
	return it
}

func TestTopologyLevels(t *testing.T) {
	manyLevels := make([]string, maxTopologyLevels)
	for i := range manyLevels {
		manyLevels[i] = fmt.Sprintf("example.com/level-%d", i)
	}
	for _, row := range []struct {
		rule   string
		it     *workerv1.InstanceType
		levels []string
		err    string
	}{
		{rule: "without the annotation there is no topology", it: a10g()},
		{rule: "the listed keys, widest first, then the hostname", it: withLevels(zone + ", " + rack), levels: []string{zone, rack, corev1.LabelHostname}},
		{rule: "a listed hostname is taken as the last level", it: withLevels(rack + "," + corev1.LabelHostname), levels: []string{rack, corev1.LabelHostname}},
		{rule: "refused: the hostname above another level", it: withLevels(corev1.LabelHostname + "," + rack), err: "can only be the last level"},
		{rule: "refused: a key that is no label key", it: withLevels("rack name"), err: `level "rack name" is not a node label key`},
		{rule: "refused: an empty level", it: withLevels(rack + ","), err: `level "" is not a node label key`},
		{rule: "refused: a key listed twice", it: withLevels(rack + "," + rack), err: "listed twice"},
		{rule: "refused: only the hostname", it: withLevels(corev1.LabelHostname), err: "names no level above the node"},
		{rule: "refused: more levels than a Topology holds", it: withLevels(strings.Join(manyLevels, ",")), err: "more than the 16 a Kueue Topology holds"},
		{rule: "near miss: as many as a Topology holds, the hostname included", it: withLevels(strings.Join(manyLevels[1:], ",")),
			levels: append(append([]string{}, manyLevels[1:]...), corev1.LabelHostname)},
	} {
		t.Run(row.rule, func(t *testing.T) {
			levels, err := TopologyLevels(row.it)
			if row.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), row.err)
				assert.Contains(t, err.Error(), AnnotationTopologyLevels, "the error names the annotation")
				assert.Contains(t, err.Error(), "or remove the annotation", "and the way out")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, row.levels, levels)
		})
	}
}

// queueObjects reconciles the type and returns its ClusterQueue's flavor, that flavor, and the names
// of every flavor and Topology there are.
func queueObjects(t *testing.T, c client.Client) (*kueue.ResourceFlavor, []string, []string) {
	t.Helper()
	_, err := (&Reconciler{Client: c}).Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: a10g().Name}})
	require.NoError(t, err)
	cq := &kueue.ClusterQueue{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: a10g().Name}, cq))
	require.Len(t, cq.Spec.ResourceGroups, 1)
	require.Len(t, cq.Spec.ResourceGroups[0].Flavors, 1)
	rf := &kueue.ResourceFlavor{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: string(cq.Spec.ResourceGroups[0].Flavors[0].Name)}, rf), "the queue's flavor exists")
	flavors := &kueue.ResourceFlavorList{}
	require.NoError(t, c.List(context.Background(), flavors))
	topologies := &kueue.TopologyList{}
	require.NoError(t, c.List(context.Background(), topologies))
	var fnames, tnames []string
	for _, f := range flavors.Items {
		fnames = append(fnames, f.Name)
	}
	for _, tp := range topologies.Items {
		tnames = append(tnames, tp.Name)
	}
	return rf, fnames, tnames
}

func TestTopologyAwareFlavor(t *testing.T) {
	typeName := a10g().Name
	node := func() *corev1.Node { return typeNode("a10g-0", typeName) }

	t.Run("a type without the annotation keeps the flavor named after it, and no Topology", func(t *testing.T) {
		rf, flavors, topologies := queueObjects(t, fakecluster.Builder(a10g(), node()).Build())
		assert.Equal(t, typeName, rf.Name)
		assert.Nil(t, rf.Spec.TopologyName)
		assert.Equal(t, []string{typeName}, flavors)
		assert.Empty(t, topologies)
	})

	t.Run("a type with it gets a Topology of its levels and the hostname, and a hashed flavor naming it", func(t *testing.T) {
		c := fakecluster.Builder(withLevels(zone+","+rack), node()).Build()
		rf, flavors, topologies := queueObjects(t, c)
		require.NotNil(t, rf.Spec.TopologyName)
		assert.Regexp(t, "^"+typeName+"-[0-9a-f]{8}$", rf.Name)
		assert.Equal(t, []string{rf.Name}, flavors)
		assert.Equal(t, []string{string(*rf.Spec.TopologyName)}, topologies)
		assert.Equal(t, map[string]string{workerv1.InstanceTypeNodeLabel(typeName): "true"}, rf.Spec.NodeLabels, "TAS needs the flavor's nodeLabels")
		tp := &kueue.Topology{}
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: topologies[0]}, tp))
		var levels []string
		for _, l := range tp.Spec.Levels {
			levels = append(levels, l.NodeLabel)
		}
		assert.Equal(t, []string{zone, rack, corev1.LabelHostname}, levels)

		again, _, _ := queueObjects(t, c)
		assert.Equal(t, rf.Name, again.Name, "the same nodes give the same flavor")
	})

	t.Run("with a topology, a change of the nodes' taints is a new flavor, and the replaced one is deleted", func(t *testing.T) {
		c := fakecluster.Builder(withLevels(rack), node()).Build()
		before, _, _ := queueObjects(t, c)
		n := &corev1.Node{}
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: "a10g-0"}, n))
		n.Spec.Taints = []corev1.Taint{taint("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}
		require.NoError(t, c.Update(context.Background(), n))
		after, flavors, topologies := queueObjects(t, c)
		assert.NotEqual(t, before.Name, after.Name)
		assert.Equal(t, []corev1.Toleration{equal("nvidia.com/gpu", "present", corev1.TaintEffectNoSchedule)}, after.Spec.Tolerations)
		assert.Equal(t, []string{after.Name}, flavors, "the replaced flavor, which no ClusterQueue refers to, is gone")
		assert.Len(t, topologies, 1, "the Topology stays: the new flavor names it")
	})

	t.Run("near miss: a flavor a ClusterQueue still refers to stays", func(t *testing.T) {
		c := fakecluster.Builder(withLevels(rack), node()).Build()
		before, _, _ := queueObjects(t, c)
		other := &kueue.ClusterQueue{}
		other.Name = "platform"
		other.Spec.ResourceGroups = []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
			Flavors: []kueue.FlavorQuotas{{Name: kueue.ResourceFlavorReference(before.Name), Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu"}}}}}}
		require.NoError(t, c.Create(context.Background(), other))
		it := &workerv1.InstanceType{}
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: typeName}, it))
		it.Annotations[AnnotationTopologyLevels] = zone + "," + rack
		require.NoError(t, c.Update(context.Background(), it))
		after, flavors, topologies := queueObjects(t, c)
		assert.ElementsMatch(t, []string{before.Name, after.Name}, flavors)
		assert.ElementsMatch(t, []string{string(*before.Spec.TopologyName), string(*after.Spec.TopologyName)}, topologies,
			"new levels are a new Topology; the old one stays while a flavor left names it")
	})

	t.Run("turning topology off goes back to the plain flavor and deletes the Topology", func(t *testing.T) {
		c := fakecluster.Builder(withLevels(rack), node()).Build()
		queueObjects(t, c)
		it := &workerv1.InstanceType{}
		require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: typeName}, it))
		it.Annotations = nil
		require.NoError(t, c.Update(context.Background(), it))
		rf, flavors, topologies := queueObjects(t, c)
		assert.Equal(t, typeName, rf.Name)
		assert.Equal(t, []string{typeName}, flavors)
		assert.Empty(t, topologies)
	})

	t.Run("a bad annotation leaves topology off, and the queue works", func(t *testing.T) {
		rf, flavors, topologies := queueObjects(t, fakecluster.Builder(withLevels(rack+","+rack), node()).Build())
		assert.Equal(t, typeName, rf.Name)
		assert.Nil(t, rf.Spec.TopologyName)
		assert.Equal(t, []string{typeName}, flavors)
		assert.Empty(t, topologies)
	})
}
