package roles_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/controllers/roles"
)

const ns = "team-a"

var ctx = context.Background()

func role(revision string, replicas int32) *v1alpha1.ModelRole {
	return &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns, UID: "role"},
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Replicas: replicas, Size: 1, Revision: revision}}
}

func replica(ordinal int32, revision string, ready bool) *v1alpha1.ModelReplica {
	r := &v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("md-server-r%d-%s", ordinal, revision), Namespace: ns,
		Labels: naming.ReplicaLabels("md", "server", ordinal)},
		Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "md", RoleName: "server", Ordinal: ordinal, Revision: revision,
			RevisionName: naming.RevisionName("md", "server", revision)}}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	r.Status.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: status})
	return r
}

// clock is a settable time.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func reconcileRole(t *testing.T, r *roles.Reporter) (reconcile.Result, *v1alpha1.ModelRole) {
	t.Helper()
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server"}})
	require.NoError(t, err)
	got := &v1alpha1.ModelRole{}
	require.NoError(t, r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-server"}, got))
	return res, got
}

func setReady(t *testing.T, c client.Client, r *v1alpha1.ModelReplica) {
	t.Helper()
	have := &v1alpha1.ModelReplica{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(r), have))
	have.Status.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: corev1.ConditionTrue})
	require.NoError(t, c.Status().Update(ctx, have))
}

// oneTurnsReady is a reporter with a 5 s interval that has written a role of replicas (r0 Ready, r1
// not), whose r1 has then turned Ready.
func oneTurnsReady(t *testing.T, replicas int32) (*roles.Reporter, *clock) {
	t.Helper()
	r1 := replica(1, "b", false)
	c := fakecluster.Builder(role("b", replicas), replica(0, "b", true), r1).Build()
	clk := &clock{now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	r := &roles.Reporter{Client: c, Now: clk.Now, Interval: 5 * time.Second}
	reconcileRole(t, r)
	setReady(t, c, r1)
	return r, clk
}

func TestReporter(t *testing.T) {
	t.Run("writes the role's counts and Ready condition from its replicas", func(t *testing.T) {
		c := fakecluster.Builder(role("b", 2), replica(0, "b", true), replica(1, "a", false)).Build()
		_, got := reconcileRole(t, &roles.Reporter{Client: c})
		assert.EqualValues(t, 1, *got.Status.Ready)
		assert.EqualValues(t, 1, *got.Status.UpToDate)
		ready := got.Status.GetCondition(xpv2.TypeReady)
		assert.Equal(t, corev1.ConditionFalse, ready.Status)
		assert.Equal(t, "1 of 2 replicas are Ready", ready.Message)
	})
	t.Run("counts a slot's reservation from its group's Workload before its replica reports it", func(t *testing.T) {
		reported := func(r *v1alpha1.ModelReplica) *v1alpha1.ModelReplica {
			r.Status.Members, r.Status.Size, r.Status.Quota = ptr.To[int32](1), ptr.To[int32](1), "Pending"
			return r
		}
		reserved := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: workerv1.GroupName(ns, "md", "server", 0)}}
		reserved.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved"}}
		c := fakecluster.Builder(role("b", 2), reported(replica(0, "b", false)), reported(replica(1, "b", false)), reserved).Build()
		_, got := reconcileRole(t, &roles.Reporter{Client: c})
		assert.Equal(t, map[string]int32{"Reserved": 1, "Pending": 1}, got.Status.Quota)
		assert.EqualValues(t, 1, *got.Status.QuotaReserved)
	})
	t.Run("is Ready once every slot holds a Ready replica", func(t *testing.T) {
		c := fakecluster.Builder(role("b", 2), replica(0, "b", true), replica(1, "b", true)).Build()
		_, got := reconcileRole(t, &roles.Reporter{Client: c})
		assert.Equal(t, corev1.ConditionTrue, got.Status.GetCondition(xpv2.TypeReady).Status)
	})
	t.Run("a change of counts alone within the interval of the last write waits for the interval's end", func(t *testing.T) {
		r, clk := oneTurnsReady(t, 3)
		clk.now = clk.now.Add(2 * time.Second)
		res, got := reconcileRole(t, r)
		assert.Equal(t, 3*time.Second, res.RequeueAfter)
		assert.EqualValues(t, 1, *got.Status.Ready, "not written yet")
		clk.now = clk.now.Add(3 * time.Second)
		res, got = reconcileRole(t, r)
		assert.Zero(t, res.RequeueAfter)
		assert.EqualValues(t, 2, *got.Status.Ready)
	})
	t.Run("the role turning Ready is written within the interval, once the milestone gap has passed", func(t *testing.T) {
		r, clk := oneTurnsReady(t, 2)
		clk.now = clk.now.Add(roles.MilestoneGap)
		res, got := reconcileRole(t, r)
		assert.Zero(t, res.RequeueAfter)
		assert.Equal(t, corev1.ConditionTrue, got.Status.GetCondition(xpv2.TypeReady).Status)
	})
	t.Run("milestones arriving together share one write", func(t *testing.T) {
		r, clk := oneTurnsReady(t, 2)
		clk.now = clk.now.Add(roles.MilestoneGap / 4)
		res, got := reconcileRole(t, r)
		assert.Equal(t, roles.MilestoneGap*3/4, res.RequeueAfter)
		assert.Equal(t, corev1.ConditionFalse, got.Status.GetCondition(xpv2.TypeReady).Status, "not written yet")
	})
	t.Run("reports the deployment's retirement operation on the role it targets, not on a sibling", func(t *testing.T) {
		md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: ns, UID: "md-uid"}}
		decode := role("b", 1)
		decode.Name, decode.Spec.RoleName, decode.UID = "md-decode", "decode", "decode"
		c := fakecluster.Builder(md, role("b", 1), decode, replica(0, "b", true)).Build()
		book := retirement.NewBook()
		require.NoError(t, book.Store(ctx, c, md, &workerv1.Retirement{RoleName: "server", ReplicaOrdinal: 1, State: workerv1.RetirementDraining}))
		r := &roles.Reporter{Client: c, Retirements: book}
		_, got := reconcileRole(t, r)
		require.NotNil(t, got.Status.Retirement)
		assert.Equal(t, workerv1.RetirementDraining, got.Status.Retirement.State)
		_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-decode"}})
		require.NoError(t, err)
		sibling := &v1alpha1.ModelRole{}
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-decode"}, sibling))
		assert.Nil(t, sibling.Status.Retirement)
	})
	t.Run("reports the role's replacement from the deployment's record, as a count", func(t *testing.T) {
		md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: ns, UID: "md-uid"}}
		c := fakecluster.Builder(md, role("b", 2), replica(0, "b", true), replica(1, "a", true)).Build()
		clk := &clock{now: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
		book := retirement.NewBook()
		r := &roles.Reporter{Client: c, Retirements: book, Now: clk.Now, Interval: 5 * time.Second}
		_, got := reconcileRole(t, r)
		assert.Nil(t, got.Status.Replacement)
		inFlight := v1alpha1.Replacement{Ordinal: ptr.To[int32](1), Gate: workerv1.ReplacementGateAdmitted}
		require.NoError(t, book.Remember(ctx, c, md, "server", inFlight))
		clk.now = clk.now.Add(time.Second)
		res, got := reconcileRole(t, r)
		assert.Equal(t, 4*time.Second, res.RequeueAfter, "a replacement turning over is not what the role is: it waits for the interval")
		assert.Nil(t, got.Status.Replacement)
		clk.now = clk.now.Add(4 * time.Second)
		_, got = reconcileRole(t, r)
		assert.Equal(t, &inFlight, got.Status.Replacement)
	})
	t.Run("an unchanged role is not written again", func(t *testing.T) {
		c := fakecluster.Builder(role("b", 1), replica(0, "b", true)).Build()
		r := &roles.Reporter{Client: c}
		_, first := reconcileRole(t, r)
		res, again := reconcileRole(t, r)
		assert.Zero(t, res.RequeueAfter)
		assert.Equal(t, first.ResourceVersion, again.ResourceVersion)
	})
}
