package rolemetrics_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/rolemetrics"
	"github.com/mdplane/mdplane/internal/replicas"
)

func role(namespace, deployment, name string, declared int32, status v1alpha1.ModelRoleStatus) v1alpha1.ModelRole {
	r := v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: deployment + "-" + name}, Status: status}
	r.Spec.DeploymentName, r.Spec.RoleName, r.Spec.Replicas = deployment, name, declared
	return r
}

func replica(namespace, deployment, roleName string, ordinal int32, quota string, deleting bool) v1alpha1.ModelReplica {
	r := v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: deployment + "-" + roleName + "-" + strconv.Itoa(int(ordinal))}}
	r.Spec.DeploymentName, r.Spec.RoleName, r.Spec.Ordinal = deployment, roleName, ordinal
	r.Status.Quota = quota
	if deleting {
		r.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		r.Finalizers = []string{"test"}
	}
	return r
}

// One row per role, one rule per field.
func TestRows(t *testing.T) {
	roles := []v1alpha1.ModelRole{
		role("team-a", "chat", "prefill", 3, v1alpha1.ModelRoleStatus{Ready: ptr.To[int32](2), UpToDate: ptr.To[int32](1), QuotaReserved: ptr.To[int32](3),
			Replacement: &v1alpha1.Replacement{Ordinal: ptr.To[int32](1)}}),
		role("team-a", "chat", "decode", 1, v1alpha1.ModelRoleStatus{Retirement: &workerv1.Retirement{}}),
		role("team-b", "chat", "prefill", 2, v1alpha1.ModelRoleStatus{Replacement: &v1alpha1.Replacement{}}),
	}
	all := []v1alpha1.ModelReplica{
		replica("team-a", "chat", "prefill", 0, replicas.QuotaReserved, false),
		replica("team-a", "chat", "prefill", 1, replicas.QuotaParked, false),
		replica("team-a", "chat", "prefill", 2, replicas.QuotaParked, true), // being deleted: neither standing nor parked
		replica("team-a", "chat", "decode", 0, replicas.QuotaPending, false),
		replica("team-b", "chat", "prefill", 0, replicas.QuotaReserved, false), // another namespace's deployment of the name
	}
	rows := rolemetrics.Rows(roles, all)
	require.Len(t, rows, 3)
	for _, tc := range []struct {
		rule      string
		got, want int
	}{
		{"declared is the role's replica count", rows[0].Declared, 3},
		{"standing counts the role's replicas not being deleted", rows[0].Standing, 2},
		{"parked counts the standing replicas whose Workload is parked", rows[0].Parked, 1},
		{"ready, up to date and holding quota are the role's reported counts", rows[0].Ready + rows[0].UpToDate*10 + rows[0].QuotaReserved*100, 2 + 10 + 300},
		{"a replacement with an ordinal is in flight", rows[0].Replacing, 1},
		{"an empty replacement is not", rows[2].Replacing, 0},
		{"a retirement is in flight", rows[1].Retiring, 1},
		{"a role without one retires nothing", rows[0].Retiring, 0},
		{"an absent count is zero", rows[1].Ready, 0},
		{"replicas count in their own namespace only", rows[2].Standing, 1},
	} {
		t.Run(tc.rule, func(t *testing.T) { assert.Equal(t, tc.want, tc.got) })
	}
}

// The collector exports every gauge of every role, labelled by namespace, deployment and role.
func TestCollectorExportsEveryGaugeOfEveryRole(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	r := role("team-a", "chat", "server", 2, v1alpha1.ModelRoleStatus{Ready: ptr.To[int32](2)})
	rep := replica("team-a", "chat", "server", 0, replicas.QuotaReserved, false)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&r, &rep).Build()
	collector := &rolemetrics.Collector{Reader: c, Timeout: time.Second}
	assert.Equal(t, 8, testutil.CollectAndCount(collector))
	want := `
# HELP mdplane_role_replicas_ready Replicas of the role whose every member is Ready.
# TYPE mdplane_role_replicas_ready gauge
mdplane_role_replicas_ready{deployment="chat",namespace="team-a",role="server"} 2
# HELP mdplane_role_replicas_standing Replicas of the role that exist and are not being deleted.
# TYPE mdplane_role_replicas_standing gauge
mdplane_role_replicas_standing{deployment="chat",namespace="team-a",role="server"} 1
`
	assert.NoError(t, testutil.CollectAndCompare(collector, strings.NewReader(want), "mdplane_role_replicas_ready", "mdplane_role_replicas_standing"))
}

// A replica's report is timed once for its admission and once for its Ready, from its creation.
func TestReplicaReportsAreTimedOnTheirFirstAdmissionAndReady(t *testing.T) {
	created := time.Unix(1000, 0)
	ready := v1alpha1.ModelReplicaStatus{Size: ptr.To[int32](2), Members: ptr.To[int32](2), ReadyMembers: ptr.To[int32](2), Admitted: ptr.To(true)}
	admitted := v1alpha1.ModelReplicaStatus{Size: ptr.To[int32](2), Members: ptr.To[int32](2), ReadyMembers: ptr.To[int32](1), Admitted: ptr.To(true)}
	for _, tc := range []struct {
		rule             string
		was, is          v1alpha1.ModelReplicaStatus
		admitted, readys uint64
	}{
		{"first admitted: time to admitted", v1alpha1.ModelReplicaStatus{}, admitted, 1, 0},
		{"admitted again: nothing", admitted, admitted, 0, 0},
		{"first Ready: time to Ready", admitted, ready, 0, 1},
		{"admitted and Ready at once: both", v1alpha1.ModelReplicaStatus{}, ready, 1, 1},
		{"Ready again: nothing", ready, ready, 0, 0},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			a0, r0 := histogramCount(t, "mdplane_replica_time_to_admitted_seconds"), histogramCount(t, "mdplane_replica_time_to_ready_seconds")
			rolemetrics.ObserveReplicaReport(created, tc.was, tc.is, created.Add(30*time.Second))
			assert.Equal(t, tc.admitted, histogramCount(t, "mdplane_replica_time_to_admitted_seconds")-a0)
			assert.Equal(t, tc.readys, histogramCount(t, "mdplane_replica_time_to_ready_seconds")-r0)
		})
	}
}

// histogramCount is how many observations the histogram of the name holds.
func histogramCount(t *testing.T, name string) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no histogram %s registered", name)
	return 0
}
