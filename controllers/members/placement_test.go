package members

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/internal/replicas"
)

const weightsImage = "registry.example.com/models/qwen2.5-7b@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// node is a Node holding images under the given names.
func node(name string, names ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(names) > 0 {
		n.Status.Images = []corev1.ContainerImage{{Names: names, SizeBytes: 1 << 30}}
	}
	return n
}

// imageSpec is a Pod template whose weights are the image volume, with the affinity it already has.
func imageSpec(reference string, affinity *corev1.Affinity) corev1.PodSpec {
	return corev1.PodSpec{
		Affinity:   affinity,
		Containers: []corev1.Container{{Name: "main", Image: "vllm"}},
		Volumes: []corev1.Volume{
			{Name: "dshm", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: naming.ModelVolume, VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: reference}}},
		},
	}
}

func preferred(names ...string) []corev1.PreferredSchedulingTerm {
	return []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: names}}}}}
}

// TestImagePlacement: a Pod whose weights are an image volume prefers, with one weight-100 term on
// kubernetes.io/hostname, up to 16 of the Nodes whose status.images names the exact reference,
// sorted by name.
func TestImagePlacement(t *testing.T) {
	var many []client.Object
	var first16 []string
	for i := range 20 {
		name := fmt.Sprintf("gpu-%02d", 19-i) // created in reverse order
		many = append(many, node(name, weightsImage))
	}
	for i := range 16 {
		first16 = append(first16, fmt.Sprintf("gpu-%02d", i))
	}
	zone := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}}},
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 10, Preference: corev1.NodeSelectorTerm{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}}},
	}}
	cases := []struct {
		rule  string
		spec  corev1.PodSpec
		nodes []client.Object
		want  *corev1.Affinity
		// lists is whether the Nodes are looked up at all.
		lists bool
	}{
		{
			rule:  "the one Node holding the image is preferred",
			spec:  imageSpec(weightsImage, nil),
			nodes: []client.Object{node("gpu-a", "vllm:v1"), node("gpu-b", "registry.example.com/models/qwen2.5-7b:v1", weightsImage), node("cpu-a")},
			want:  &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred("gpu-b")}},
			lists: true,
		},
		{
			rule:  "the Nodes holding it are named sorted by name",
			spec:  imageSpec(weightsImage, nil),
			nodes: []client.Object{node("gpu-c", weightsImage), node("gpu-a", weightsImage), node("gpu-b", "other@sha256:00"), node("gpu-b2", weightsImage)},
			want:  &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred("gpu-a", "gpu-b2", "gpu-c")}},
			lists: true,
		},
		{
			rule:  "of more than 16 Nodes holding it, the first 16 by name",
			spec:  imageSpec(weightsImage, nil),
			nodes: many,
			want:  &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: preferred(first16...)}},
			lists: true,
		},
		{
			rule:  "no Node holding it gives no term, and no affinity",
			spec:  imageSpec(weightsImage, nil),
			nodes: []client.Object{node("gpu-a", "registry.example.com/models/qwen2.5-7b:v1"), node("gpu-b", weightsImage+"0")},
			want:  nil,
			lists: true,
		},
		{
			rule:  "the term is added to the Pod's own affinity, which is kept",
			spec:  imageSpec(weightsImage, zone.DeepCopy()),
			nodes: []client.Object{node("gpu-a", weightsImage)},
			want: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution:  zone.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution,
				PreferredDuringSchedulingIgnoredDuringExecution: append(zone.DeepCopy().NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, preferred("gpu-a")...),
			}},
			lists: true,
		},
		{
			rule:  "a Pod template without an image volume gets nothing, and no Node is looked up",
			spec:  corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: weightsImage}}},
			nodes: []client.Object{node("gpu-a", weightsImage)},
			want:  nil,
		},
		{
			rule: "an image volume of another name is not the weights",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}, Volumes: []corev1.Volume{
				{Name: "tools", VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: weightsImage}}}}},
			nodes: []client.Object{node("gpu-a", weightsImage)},
			want:  nil,
		},
		{
			rule: "a claim's weights volume gets nothing",
			spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}, Volumes: []corev1.Volume{
				{Name: naming.ModelVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "weights"}}}}},
			nodes: []client.Object{node("gpu-a", weightsImage)},
			want:  nil,
		},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			lists := 0
			c := fakecluster.Builder(tc.nodes...).WithInterceptorFuncs(interceptor.Funcs{
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*corev1.NodeList); ok {
						lists++
					}
					return c.List(ctx, list, opts...)
				},
			}).Build()
			p := newPlacement(c)
			// Two members of one replica: the Nodes are looked up once.
			pods := []*corev1.Pod{{Spec: *tc.spec.DeepCopy()}, {Spec: *tc.spec.DeepCopy()}}
			for _, pod := range pods {
				require.NoError(t, p.place(ctx, pod))
				assert.Equal(t, tc.want, pod.Spec.Affinity)
			}
			assert.Equal(t, map[bool]int{true: 1, false: 0}[tc.lists], lists)
		})
	}
}

// TestImagePlacementAtCreation: the members controller gives a Pod of Image delivery its preferred
// Nodes when it creates it, outside the pod-spec-hash, which stays the revision's.
func TestImagePlacementAtCreation(t *testing.T) {
	data, err := json.Marshal(&v1alpha1.RoleRevision{Revision: "rev1", Size: 2, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: naming.RoleLabels("md", "server"), Annotations: map[string]string{workerv1.AnnotationPodSpecHash: "abc"}},
		Spec:       imageSpec(weightsImage, nil),
	}})
	require.NoError(t, err)
	rev := revision(t, "rev1", 2)
	rev.Data.Raw = data
	r, c, _ := newReconciler(t, writes{}, replica(2), rev, node("gpu-b", weightsImage), node("gpu-a", weightsImage), node("gpu-c"))
	reconcileReplica(t, r)
	decoded, err := replicas.ReadRevision(rev)
	require.NoError(t, err)
	rendered, _ := replicas.Materialize(replica(2), decoded)
	hashes := map[string]string{}
	for _, pod := range rendered {
		assert.Nil(t, pod.Spec.Affinity, "the revision's Pods carry no placement")
		hashes[pod.Name] = pod.Annotations[workerv1.AnnotationPodSpecHash]
	}
	pods := podsOf(t, c)
	require.Len(t, pods, 2)
	for _, pod := range pods {
		require.NotNil(t, pod.Spec.Affinity, pod.Name)
		assert.Equal(t, preferred("gpu-a", "gpu-b"), pod.Spec.Affinity.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, pod.Name)
		assert.Equal(t, hashes[pod.Name], pod.Annotations[workerv1.AnnotationPodSpecHash], "placement is outside the hash")
	}
}

func TestCachedNode(t *testing.T) {
	n := node("gpu-a", weightsImage)
	n.Labels = map[string]string{"kubernetes.io/hostname": "gpu-a"}
	n.Annotations = map[string]string{"big": "value"}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	n.ResourceVersion = "7"
	heartbeat := metav1.Now()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: heartbeat},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}}
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("7")}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
	n.Spec.Unschedulable, n.Spec.PodCIDR = true, "10.244.0.0/24"
	n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}}
	got, err := CachedNode(n)
	require.NoError(t, err)
	assert.Equal(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "gpu-a", ResourceVersion: "7", Labels: n.Labels},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: n.Spec.Taints},
		Status: corev1.NodeStatus{Images: n.Status.Images, Capacity: n.Status.Capacity, Allocatable: n.Status.Allocatable,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}}}, got,
		"labels, images, what it allocates and whether it takes Pods; the Ready condition without its heartbeat")
	pod := &corev1.Pod{}
	got, err = CachedNode(pod)
	require.NoError(t, err)
	assert.Same(t, pod, got, "any other object is kept whole")
}
