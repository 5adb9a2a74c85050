package index

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

type recordingIndexer map[string]client.IndexerFunc

func (r recordingIndexer) IndexField(_ context.Context, _ client.Object, field string, extract client.IndexerFunc) error {
	r[field] = extract
	return nil
}

func TestIndexes(t *testing.T) {
	indexer := recordingIndexer{}
	require.NoError(t, Register(context.Background(), indexer))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Labels:          map[string]string{workerv1.LabelPodGroupName: "gpustack-fnv64-1", workerv1.LabelInstance: "md"},
		OwnerReferences: []metav1.OwnerReference{{UID: "not-the-controller"}, {UID: "replica", Controller: ptr.To(true)}},
	}}
	md := &workerv1.ModelDeployment{Spec: workerv1.ModelDeploymentSpec{Roles: []workerv1.ModelDeploymentRole{
		{Name: "prefill", InstanceType: "h20"}, {Name: "decode", InstanceType: "h20"}, {Name: "router", InstanceType: "cpu"},
	}}}
	cases := []struct {
		rule  string
		field string
		obj   client.Object
		want  []string
	}{
		{"a Pod is found by its pod group", PodGroup, pod, []string{"gpustack-fnv64-1"}},
		{"a Pod is found by its deployment", PodDeployment, pod, []string{"md"}},
		{"a Pod without the label is not indexed, as a label selector does not select it", PodDeployment, &corev1.Pod{}, nil},
		{"a Pod whose label is empty is found by the empty value, as its label selector found it", PodDeployment,
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{workerv1.LabelInstance: ""}}}, []string{""}},
		{"a Pod is found by its controller only", PodController, pod, []string{"replica"}},
		{"a Pod without a controller is not indexed by one", PodController, &corev1.Pod{}, nil},
		{"a Pod is found by its slot: deployment, role and ordinal", PodSlot, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			workerv1.LabelInstance: "md", workerv1.LabelComponent: "decode", workerv1.LabelPodOrdinal: "3"}}}, []string{"md/decode/3"}},
		{"a Pod without a slot's labels is not indexed by one", PodSlot, pod, nil},
		{"a Pod is found by its role: deployment and role", PodRole, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			workerv1.LabelInstance: "md", workerv1.LabelComponent: "decode", workerv1.LabelPodOrdinal: "3"}}}, []string{"md/decode"}},
		{"a Pod without a role label is not indexed by a role", PodRole, pod, nil},
		{"a deployment is found by each type its roles name, once", DeploymentInstanceType, md, []string{"h20", "cpu"}},
		{"a deployment is found by the artifact it names", DeploymentArtifact, &workerv1.ModelDeployment{Spec: workerv1.ModelDeploymentSpec{
			Model: workerv1.ModelDeploymentModel{Name: "m", ArtifactRef: &workerv1.LocalReference{Name: "qwen"}}}}, []string{"qwen"}},
		{"a deployment naming no artifact is not indexed by one", DeploymentArtifact, md, nil},
		{"a role is found by the pod group of each declared slot", RoleGroup, &v1alpha1.ModelRole{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "decode", Replicas: 2}},
			[]string{workerv1.GroupName("team-a", "md", "decode", 0), workerv1.GroupName("team-a", "md", "decode", 1)}},
		{"a Node is found by each name of each image it holds, once", NodeImage, &corev1.Node{Status: corev1.NodeStatus{Images: []corev1.ContainerImage{
			{Names: []string{"r.example.com/m@sha256:aa", "r.example.com/m:v1"}}, {Names: []string{"r.example.com/m@sha256:aa", "vllm:v1"}}}}},
			[]string{"r.example.com/m@sha256:aa", "r.example.com/m:v1", "vllm:v1"}},
		{"a Node holding no image is not indexed", NodeImage, &corev1.Node{}, nil},
		{"a KVCachePool is found by the backend it names", PoolBackend, &workerv1.KVCachePool{Spec: workerv1.KVCachePoolSpec{
			Backends: []string{"mooncake-dram"}}}, []string{"mooncake-dram"}},
		{"a Workload is found by its UID, as Kueue's preemption message names it", WorkloadUID, &kueue.Workload{ObjectMeta: metav1.ObjectMeta{UID: "5f1c"}}, []string{"5f1c"}},
		{"a Workload not stored yet has no UID to be found by", WorkloadUID, &kueue.Workload{}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			require.Contains(t, indexer, tc.field)
			assert.Equal(t, tc.want, indexer[tc.field](tc.obj))
		})
	}
	assert.Len(t, indexer, len(Fields), "every index registered")
}
