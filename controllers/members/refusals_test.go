package members

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// baselineRefusal is the API server's answer to a member under a namespace enforcing Pod Security
// baseline.
var baselineRefusal = apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "md-server-r1-m0",
	fmt.Errorf(`violates PodSecurity "baseline:latest": hostPath volumes (volume "gpustack-compile-cache")`))

// recordedEvent is an event with the object it was recorded on.
type recordedEvent struct {
	regarding       runtime.Object
	eventtype, note string
	reason          string
}

// eventLog records events with what they regard (events.FakeRecorder keeps only their text).
type eventLog struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, recordedEvent{regarding: regarding, eventtype: eventtype, reason: reason, note: fmt.Sprintf(note, args...)})
}

// refusingCluster is a fake cluster whose API server answers each member Pod create with
// *answer (nil: accepted), counting the creates; the replica's role is controlled by deployment md.
type refusingCluster struct {
	r       *Reconciler
	c       client.Client
	log     *eventLog
	answer  *error
	creates *int
	now     *time.Time
}

func newRefusingCluster(t *testing.T, answer error) *refusingCluster {
	t.Helper()
	role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.ModelDeploymentKind,
			Name: "md", UID: "md-uid", Controller: ptr.To(true)}}},
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Revision: "rev1", Size: 1}}
	rep := replica(1)
	rep.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelRoleKind,
		Name: "md-server", UID: "role-uid", Controller: ptr.To(true)}}
	rc := &refusingCluster{log: &eventLog{}, answer: &answer, creates: new(int), now: ptr.To(time.Now())}
	rc.c = fakecluster.Builder(rep, role, revision(t, "rev1", 1)).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				*rc.creates++
				if *rc.answer != nil {
					return *rc.answer
				}
			}
			return c.Create(ctx, obj, opts...)
		},
	}).Build()
	reported, clock := newWriteTimes(), time.Now()
	reported.now = func() time.Time { clock = clock.Add(time.Hour); return clock }
	refused := newRefusals()
	refused.now = func() time.Time { return *rc.now }
	rc.r = &Reconciler{Client: rc.c, Recorder: rc.log, expected: expectations.New(), reported: reported, probes: newProbes(), refused: refused}
	return rc
}

// podsCreated is the replica's PodsCreated condition as the API server holds it.
func (rc *refusingCluster) podsCreated(t *testing.T) xpv2.Condition {
	t.Helper()
	got := &v1alpha1.ModelReplica{}
	require.NoError(t, rc.c.Get(ctx, client.ObjectKeyFromObject(replica(1)), got))
	return got.Status.GetCondition(v1alpha1.PodsCreatedConditionType)
}

func TestRefusedCreates(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "md-server-r1-m0",
		fmt.Errorf("exceeded quota: gpus, requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"))
	webhook := apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "md-server-r1-m0", nil)
	for _, tc := range []struct {
		name    string
		answer  error
		refused bool
	}{
		{name: "Pod Security refusing the member is a refusal", answer: baselineRefusal, refused: true},
		{name: "a ResourceQuota refusing it is one", answer: quota, refused: true},
		{name: "a webhook finding it invalid is one", answer: webhook, refused: true},
		{name: "near miss: the name still held (AlreadyExists) is none", answer: apierrors.NewAlreadyExists(schema.GroupResource{Resource: "pods"}, "md-server-r1-m0")},
		{name: "near miss: throttling is none", answer: apierrors.NewTooManyRequests("slow down", 1)},
		{name: "near miss: an API server failing is none", answer: apierrors.NewInternalError(fmt.Errorf("etcd unavailable"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := newRefusingCluster(t, tc.answer)
			_, err := rc.r.Reconcile(ctx, reconcileRequest())
			c := rc.podsCreated(t)
			if !tc.refused {
				assert.NotEqual(t, corev1.ConditionFalse, c.Status, "PodsCreated is not False: %s", c.Message)
				assert.Empty(t, rc.log.events, "no event")
				return
			}
			require.NoError(t, err, "a refusal is reported, not failed")
			assert.Equal(t, corev1.ConditionFalse, c.Status)
			assert.Equal(t, v1alpha1.PodRefusedReason, c.Reason)
			assert.Equal(t, tc.answer.Error(), c.Message, "the API server's own message")
			require.Len(t, rc.log.events, 1)
			e := rc.log.events[0]
			assert.Equal(t, corev1.EventTypeWarning, e.eventtype)
			assert.Equal(t, string(v1alpha1.PodRefusedReason), e.reason)
			assert.Equal(t, "role server replica 1: "+tc.answer.Error(), e.note)
			ref, ok := e.regarding.(*corev1.ObjectReference)
			require.True(t, ok, "recorded on the deployment, not on %T", e.regarding)
			assert.Equal(t, corev1.ObjectReference{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.ModelDeploymentKind,
				Namespace: ns, Name: "md", UID: "md-uid"}, *ref)
		})
	}
}

func TestRefusalClears(t *testing.T) {
	t.Run("a refused create is retried after a backoff, not at once", func(t *testing.T) {
		rc := newRefusingCluster(t, baselineRefusal)
		first, err := rc.r.Reconcile(ctx, reconcileRequest())
		require.NoError(t, err)
		assert.Equal(t, refusalRetry, first.RequeueAfter)
		again, err := rc.r.Reconcile(ctx, reconcileRequest())
		require.NoError(t, err)
		assert.Equal(t, 1, *rc.creates, "the status write's own event does not retry the create")
		assert.Equal(t, refusalRetry, again.RequeueAfter)

		*rc.now = rc.now.Add(refusalRetry)
		second, err := rc.r.Reconcile(ctx, reconcileRequest())
		require.NoError(t, err)
		assert.Equal(t, 2, *rc.creates)
		assert.Equal(t, 2*refusalRetry, second.RequeueAfter, "each refusal in a row doubles the wait")
	})
	t.Run("the next accepted create clears the condition", func(t *testing.T) {
		rc := newRefusingCluster(t, baselineRefusal)
		_, err := rc.r.Reconcile(ctx, reconcileRequest())
		require.NoError(t, err)
		require.Equal(t, corev1.ConditionFalse, rc.podsCreated(t).Status)

		*rc.answer = nil
		*rc.now = rc.now.Add(refusalRetry)
		_, err = rc.r.Reconcile(ctx, reconcileRequest()) // creates the member
		require.NoError(t, err)
		assert.Len(t, podsOf(t, rc.c), 1)
		_, err = rc.r.Reconcile(ctx, reconcileRequest()) // its event brings the replica back, to be reported
		require.NoError(t, err)
		c := rc.podsCreated(t)
		assert.Equal(t, corev1.ConditionTrue, c.Status)
		assert.Equal(t, v1alpha1.PodsCreatedReason, c.Reason)
		assert.Equal(t, 0*time.Second, rc.r.refused.wait(replica(1).UID), "the backoff is forgotten")
	})
	t.Run("near miss: a replica never refused reports PodsCreated True with its members", func(t *testing.T) {
		rc := newRefusingCluster(t, nil)
		for range 2 {
			_, err := rc.r.Reconcile(ctx, reconcileRequest())
			require.NoError(t, err)
		}
		assert.Equal(t, corev1.ConditionTrue, rc.podsCreated(t).Status)
		assert.Empty(t, rc.log.events)
	})
}

func TestRefusalBackoff(t *testing.T) {
	r := newRefusals()
	now := time.Now()
	r.now = func() time.Time { return now }
	var got []time.Duration
	for range 8 {
		got = append(got, r.refused("uid"))
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute}, got)
	r.forget("uid")
	assert.Equal(t, time.Second, r.refused("uid"), "an accepted create starts the backoff over")
}

func reconcileRequest() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server-r1-abcde"}}
}
