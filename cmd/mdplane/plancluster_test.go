package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions"
	"github.com/mdplane/mdplane/internal/plan"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

// TestPlanObservesTheClusterAsThePacerDoes reads a live role whose r1 is still queued (its Pod
// gated, never admitted) and a queue with one GPU free: r1 is replaced first, and its replacement of
// two GPUs waits for capacity, since a queued replica frees no reservation when it leaves.
func TestPlanObservesTheClusterAsThePacerDoes(t *testing.T) {
	ctx := context.Background()
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	engine, err := functions.Engine()
	require.NoError(t, err)
	edited, err := schemacheck.ReadFiles(planEdited, planCluster)
	require.NoError(t, err)
	stored, err := schemacheck.ReadFiles(planStored)
	require.NoError(t, err)
	md, err := theDeployment(edited)
	require.NoError(t, err)
	in, err := planInput(ctx, checker, engine, md, edited, stored)
	require.NoError(t, err)
	require.Empty(t, in.Refusals)

	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme, kueue.AddToScheme} {
		require.NoError(t, add(scheme))
	}
	storedRole := in.Stored.Roles[0]
	objects := []client.Object{storedRole.DeepCopy()}
	for ordinal := range int32(4) {
		replica := &v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("qwen-chat-server-r%d", ordinal),
			UID: types.UID(fmt.Sprintf("uid-%d", ordinal)), Labels: map[string]string{workerv1.LabelInstance: "qwen-chat", workerv1.LabelComponent: "server"}},
			Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "qwen-chat", RoleName: "server", Ordinal: ordinal, Revision: storedRole.Spec.Revision,
				RevisionName: "rev", ConfigDigest: storedRole.Spec.ConfigDigest, RenderVersion: storedRole.Spec.RenderVersion}}
		pod := in.Stored.Pods[ordinal].DeepCopy()
		pod.Name, pod.GenerateName = replica.Name+"-m0", ""
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "internal.mdplane.io/v1alpha1", Kind: "ModelReplica", Name: replica.Name, UID: replica.UID, Controller: ptr.To(true)}}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		admitted := metav1.ConditionTrue
		if ordinal == 1 {
			pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}}
			pod.Status.Conditions = nil
			admitted = metav1.ConditionFalse
		}
		workload := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: workerv1.GroupName("team-a", "qwen-chat", "server", ordinal)},
			Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: admitted, Reason: "Test", LastTransitionTime: metav1.Now()}}}}
		objects = append(objects, replica, pod, workload)
	}
	queue := in.Edited.QueueName()
	require.NotEmpty(t, queue)
	objects = append(objects,
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: queue}, Spec: kueue.LocalQueueSpec{ClusterQueue: "gpus"}},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "gpus"},
			Spec: kueue.ClusterQueueSpec{ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"},
				Flavors: []kueue.FlavorQuotas{{Name: "a10g", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("7")}}}}}}},
			Status: kueue.ClusterQueueStatus{FlavorsUsage: []kueue.FlavorUsage{{Name: "a10g", Resources: []kueue.ResourceUsage{{Name: "nvidia.com/gpu", Total: resource.MustParse("6")}}}}}})
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objects...).WithStatusSubresource(&kueue.ClusterQueue{}, &kueue.Workload{}).Build()
	s := &clusterState{client: c, namespace: "team-a", name: "qwen-chat"}
	require.NoError(t, s.observe(ctx, &in))

	p := plan.Make(in)
	require.False(t, p.Offline)
	require.Len(t, p.Roles, 1)
	r := p.Roles[0]
	assert.Equal(t, []int32{1, 3, 2, 0}, r.Order, "the queued replica first, then highest first")
	q := r.Quota.Free["nvidia.com/gpu"]
	assert.Equal(t, "1", q.String())
	require.NotNil(t, r.Quota.WaitsForCapacity)
	assert.True(t, *r.Quota.WaitsForCapacity, "two GPUs needed, one free, and r1 held none")
	assert.Contains(t, p.Warnings, "role server: the rollout will wait for capacity (nvidia.com/gpu: needs 2, 1 free with the departing replica's (r1))")
}
