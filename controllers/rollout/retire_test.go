package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/snapshot"
)

// gauges stands in for the members' /metrics: the body each member answers with.
type gauges map[string]string

func (g gauges) Scrape(_ context.Context, targets []snapshot.Target) []snapshot.Read {
	var out []snapshot.Read
	for _, t := range targets {
		f, err := snapshot.Parse(strings.NewReader(g[t.Pod.Name]))
		r := snapshot.Read{Target: t, Families: f}
		if err != nil {
			r.Err = err.Error()
		}
		out = append(out, r)
	}
	return out
}

const idle = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"

// retiring is a pacer on a fake cluster with a clock the test moves.
type retiring struct {
	t     *testing.T
	c     client.Client
	p     *Pacer
	clock time.Time
	rec   *events.FakeRecorder
}

func newRetiring(t *testing.T, drain gauges, objs ...client.Object) *retiring {
	md := deployment()
	md.UID = "md-uid"
	md.Spec.Engine.Name = workerv1.EngineVLLM
	r := &retiring{t: t, c: fakecluster.Builder(append(objs, md)...).Build(), clock: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), rec: events.NewFakeRecorder(50)}
	r.p = &Pacer{Client: r.c, Recorder: r.rec, Scraper: drain, Now: func() time.Time { return r.clock }}
	return r
}

// pass runs one reconcile of the role after the clock moved by d, and returns the stored operation.
func (r *retiring) pass(d time.Duration) *workerv1.Retirement {
	r.t.Helper()
	r.clock = r.clock.Add(d)
	_, err := r.p.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server"}})
	require.NoError(r.t, err)
	return r.record()
}

// record is the operation the deployment's record ConfigMap holds, as a restarted pacer reads it.
func (r *retiring) record() *workerv1.Retirement {
	r.t.Helper()
	md := &workerv1.ModelDeployment{}
	require.NoError(r.t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md"}, md))
	op, err := retirement.NewBook().Load(ctx, r.c, md)
	require.NoError(r.t, err)
	return op
}

func (r *retiring) gone(obj client.Object, name string) bool { return !exists(r.t, r.c, obj, name) }

// selective is the role's Service with its eligibility term active.
func selective() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns,
		Annotations: map[string]string{workerv1.AnnotationEndpointEligibility: workerv1.EndpointEligibilityActive}}}
}

func servingSlice(pod string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "md-server-x", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "md-server"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: pod, UID: types.UID(pod)}}}}
}

func servedPod(p *corev1.Pod) {
	p.Labels[workerv1.LabelServes] = "true"
	p.Annotations = map[string]string{"prometheus.io/scrape": "true", "prometheus.io/path": "/metrics", "prometheus.io/port": "8000"}
}

// TestScaleDownRetiresSeatedReplicas follows one scale-down through the protocol, one row per rule.
func TestScaleDownRetiresSeatedReplicas(t *testing.T) {
	t.Run("the admitting pass deletes nothing and reserves the highest seated ordinal", func(t *testing.T) {
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b"), standing(2, "b")), modelRole(1, "b", nil))...)
		op := r.pass(0)
		require.NotNil(t, op)
		assert.Equal(t, workerv1.RetirementAdmitted, op.State)
		assert.Equal(t, int32(2), op.ReplicaOrdinal)
		assert.Equal(t, []string{"md-server-r2-b-m0"}, op.TargetMemberUIDs)
		assert.Equal(t, "wl-2", op.TargetWorkloadUID)
		assert.False(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r2-b"))
		assert.False(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r1-b"), "one operation at a time: r1 waits")
	})
	t.Run("without the eligibility term the members are deleted behind their preStop drain, then the release settles it", func(t *testing.T) {
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b")), modelRole(1, "b", nil))...)
		r.pass(0)
		op := r.pass(time.Second)
		require.NotNil(t, op)
		assert.Equal(t, workerv1.RetirementDeleting, op.State)
		assert.Contains(t, op.Reason, "the preStop hook drains each as it is deleted")
		assert.True(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r1-b"))
		assert.True(t, r.gone(&corev1.Pod{}, "md-server-r1-b-m0"))
		assert.True(t, r.gone(&kueue.Workload{}, workerv1.GroupName(ns, "md", "server", 1)))
		assert.Nil(t, r.pass(time.Second), "Completed is never stored: the field is cleared in the pass that observes the release")
		ev := fakecluster.Events(r.rec)
		assert.Contains(t, strings.Join(ev, "\n"), "Warning ReplicaLeaving replica r1 of role server is leaving (the role was scaled to 1;")
		assert.Contains(t, strings.Join(ev, "\n"), "Normal Retirement replica r1 of role server is retired")
	})
	t.Run("an operation that ends hands over to the next seated replica in the same write", func(t *testing.T) {
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b"), standing(2, "b")), modelRole(1, "b", nil))...)
		r.pass(0)
		assert.Equal(t, workerv1.RetirementDeleting, r.pass(time.Second).State)
		op := r.pass(time.Second)
		require.NotNil(t, op, "r2 retired, r1 admitted in its place")
		assert.Equal(t, int32(1), op.ReplicaOrdinal)
		assert.Equal(t, workerv1.RetirementAdmitted, op.State)
		assert.False(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r1-b"), "its admitting pass deletes nothing")
	})
	t.Run("a restarted pacer takes the operation up where its record left it", func(t *testing.T) {
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b"), standing(2, "b")), modelRole(1, "b", nil))...)
		r.pass(0)
		assert.Equal(t, workerv1.RetirementDeleting, r.pass(time.Second).State)
		r.p = &Pacer{Client: r.c, Recorder: r.rec, Now: r.p.Now} // a new leader: an empty book
		op := r.pass(time.Second)
		require.NotNil(t, op)
		assert.Equal(t, int32(1), op.ReplicaOrdinal, "r2's operation, read from the record, ended and r1 was admitted")
		assert.NotContains(t, strings.Join(fakecluster.Events(r.rec), "\n"), "terminated outside")
	})
	t.Run("the operation is kept off the ModelRole, which Crossplane composes", func(t *testing.T) {
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b")), modelRole(1, "b", nil))...)
		require.NotNil(t, r.pass(0))
		role := &v1alpha1.ModelRole{}
		require.NoError(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-server"}, role))
		assert.Empty(t, role.Annotations, "each step written on a composed object would wake the deployment in Crossplane")
		cm := &corev1.ConfigMap{}
		require.NoError(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "retirement-md-uid"}, cm))
		assert.True(t, metav1.IsControlledBy(cm, &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{UID: "md-uid"}}))
	})
	t.Run("a record that holds no operation is dropped and said, and the scale-down admitted again", func(t *testing.T) {
		bad := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "retirement-md-uid", Namespace: ns}, Data: map[string]string{retirement.OperationKey: "{"}}
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b")), modelRole(1, "b", nil), bad)...)
		_, err := r.p.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server"}})
		require.NoError(t, err)
		assert.Contains(t, strings.Join(fakecluster.Events(r.rec), "\n"), "Warning RetirementUnreadable ConfigMap team-a/retirement-md-uid key operation is not a retirement operation")
		op := r.record()
		require.NotNil(t, op, "admitted in the same pass")
		assert.Equal(t, workerv1.RetirementAdmitted, op.State)
	})
	t.Run("with the eligibility term: withdrawn from the EndpointSlices, drained, then deleted", func(t *testing.T) {
		r1 := replicaAt(1, "b")
		drain := gauges{"md-server-r1-b-m0": "vllm:num_requests_running 2\nvllm:num_requests_waiting 0\n"}
		member := memberOf(r1, servedPod)
		member.Labels[workerv1.LabelEndpointEligible] = "true"
		r := newRetiring(t, drain, append(objects(standing(0, "b"), []client.Object{r1, member, groupOf(1, true)}),
			modelRole(1, "b", nil), selective(), servingSlice(member.Name))...)
		r.pass(0)
		op := r.pass(time.Second)
		assert.Equal(t, workerv1.RetirementAdmitted, op.State)
		assert.Equal(t, "the members still carry the endpoint-eligibility label: md-server-r1-b-m0", op.Reason)

		unlabel := &corev1.Pod{}
		require.NoError(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: member.Name}, unlabel))
		delete(unlabel.Labels, workerv1.LabelEndpointEligible)
		require.NoError(t, r.c.Update(ctx, unlabel))
		op = r.pass(time.Second)
		assert.Equal(t, workerv1.RetirementDisqualified, op.State)
		assert.Equal(t, "an EndpointSlice still serves md-server-r1-b-m0", op.Reason)

		require.NoError(t, r.c.Delete(ctx, servingSlice(member.Name)))
		op = r.pass(time.Second)
		assert.Equal(t, workerv1.RetirementDraining, op.State)
		assert.Equal(t, "md-server-r1-b-m0 is busy: vllm:num_requests_running is 2", op.Reason)
		assert.False(t, r.gone(&corev1.Pod{}, member.Name), "a busy member is not deleted")

		drain[member.Name] = idle
		op = r.pass(time.Second)
		assert.Equal(t, workerv1.RetirementDeleting, op.State)
		assert.True(t, r.gone(&corev1.Pod{}, member.Name))
	})
	t.Run("a spent drain budget aborts and retains the replica; a retry directive starts it again and is removed", func(t *testing.T) {
		r1 := replicaAt(1, "b")
		member := memberOf(r1, servedPod)
		r := newRetiring(t, gauges{member.Name: "vllm:num_requests_running 1\n"}, append(objects(standing(0, "b"), []client.Object{r1, member, groupOf(1, true)}),
			modelRole(1, "b", nil), selective())...)
		r.pass(0)
		assert.Equal(t, workerv1.RetirementDraining, r.pass(time.Second).State)
		op := r.pass(240 * time.Second)
		assert.Equal(t, workerv1.RetirementAborted, op.State)
		assert.Equal(t, "md-server-r1-b-m0 is busy: vllm:num_requests_running is 1; members, workload and capacity are retained", op.Reason)
		assert.False(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r1-b"))
		assert.Equal(t, workerv1.RetirementAborted, r.pass(time.Hour).State, "Aborted is terminal until new intent")

		md := &workerv1.ModelDeployment{}
		require.NoError(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md"}, md))
		md.Annotations = map[string]string{workerv1.AnnotationRetirementRetry: "server:1:first"}
		require.NoError(t, r.c.Update(ctx, md))
		op = r.pass(time.Second)
		assert.Equal(t, "first", op.LastConsumedRetryToken)
		assert.NotEqual(t, workerv1.RetirementAborted, op.State)
		require.NoError(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md"}, md))
		assert.NotContains(t, md.Annotations, workerv1.AnnotationRetirementRetry, "a consumed directive is removed")
	})
	t.Run("a second role of the deployment waits while one holds the operation", func(t *testing.T) {
		other := modelRole(1, "b", nil)
		other.Name, other.Spec.RoleName = "md-decode", "decode"
		other.Labels = naming.RoleLabels("md", "decode")
		record := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "retirement-md-uid", Namespace: ns},
			Data: map[string]string{retirement.OperationKey: `{"roleName":"decode","replicaOrdinal":3,"state":"Aborted"}`}}
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b")), modelRole(1, "b", nil), other, record)...)
		r.pass(0)
		assert.Equal(t, "decode", r.record().RoleName, "held: one operation per deployment, a retained (Aborted) one included")
		assert.False(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r1-b"))
	})
	t.Run("a replica scaled back in before it is deleted stays", func(t *testing.T) {
		r := newRetiring(t, nil, append(objects(standing(0, "b"), standing(1, "b")), modelRole(1, "b", nil))...)
		r.pass(0)
		role := &v1alpha1.ModelRole{}
		require.NoError(t, r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-server"}, role))
		role.Spec.Replicas = 2
		require.NoError(t, r.c.Update(ctx, role))
		assert.Nil(t, r.pass(time.Second))
		assert.False(t, r.gone(&v1alpha1.ModelReplica{}, "md-server-r1-b"))
	})
}
