package preemptor

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// TestDescribe: a preemptor is named by what it belongs to, as far as it is known.
func TestDescribe(t *testing.T) {
	deploymentGroup := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "big-group", Namespace: "team-b", UID: "md-uid"},
		Spec: kueue.WorkloadSpec{PriorityClassRef: kueue.NewWorkloadPriorityClassRef("serving-high"), Priority: ptr.To[int32](1000)}}
	member := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big-server-0", Namespace: "team-b",
		Labels: map[string]string{workerv1.LabelPodGroupName: "big-group", workerv1.LabelInstance: "big"}}}
	job := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "job-train-1", Namespace: "batch", UID: "job-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "train", UID: "j", Controller: ptr.To(true)}}}}
	bare := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "batch", UID: "bare-uid"}}
	c := fakecluster.Builder(deploymentGroup, member, job, bare).Build()
	for _, row := range []struct{ rule, uid, want string }{
		{"a deployment's group is named with its priority and deployment", "md-uid",
			"Workload team-b/big-group (priority class serving-high, priority 1000) of ModelDeployment team-b/big"},
		{"another workload is named with its controller", "job-uid", "Workload batch/job-train-1 of Job batch/train"},
		{"a workload of no controller is named alone", "bare-uid", "Workload batch/bare"},
		{"a preemptor since gone is named by its UID", "gone-uid", "Workload UID gone-uid (since gone)"},
		{"no UID names nobody", "", ""},
	} {
		t.Run(row.rule, func(t *testing.T) {
			who, err := Describe(context.Background(), c, row.uid)
			require.NoError(t, err)
			assert.Equal(t, row.want, who)
		})
	}
}

// TestOf: the group's Workload is read first, then the members Kueue stopped; near miss: a group
// nobody preempted says nothing.
func TestOf(t *testing.T) {
	c := fakecluster.Builder().Build()
	preempted := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption},
		{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InClusterQueueReason,
			Message: "Preempted to accommodate a workload (UID: gone, JobUID: UNKNOWN) due to prioritization in the ClusterQueue"}}}}
	stopped := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: "TerminationTarget", Status: corev1.ConditionTrue,
		Reason: "WorkloadEvictedDueToPreempted", Message: "Preempted to accommodate a workload (UID: gone, JobUID: UNKNOWN) due to prioritization in the ClusterQueue"}}}}
	want := "Kueue preempted this replica's group for Workload UID gone (since gone): it has a higher priority in the same ClusterQueue (reason InClusterQueue)"
	for _, row := range []struct {
		rule    string
		wl      *kueue.Workload
		members []*corev1.Pod
		want    string
		ok      bool
	}{
		{"read from the Workload", preempted, nil, want, true},
		{"read from a stopped member when the Workload is gone", nil, []*corev1.Pod{{}, stopped}, want, true},
		{"near miss: nobody preempted the group", &kueue.Workload{}, []*corev1.Pod{{}}, "", false},
	} {
		t.Run(row.rule, func(t *testing.T) {
			text, ok, err := Of(context.Background(), c, row.wl, row.members)
			require.NoError(t, err)
			assert.Equal(t, row.ok, ok)
			assert.Equal(t, row.want, text)
		})
	}
}
