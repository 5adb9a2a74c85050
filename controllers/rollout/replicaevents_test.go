package rollout

import (
	"context"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// TestReplicaLeavingOncePerDeparture: a member deleted from outside is told once, by the pass
// whose delete of its replica took — not by a pass reading the replica as it was before that
// delete (the member's Pod events come in a burst), nor once the replica is gone.
func TestReplicaLeavingOncePerDeparture(t *testing.T) {
	r1 := replicaAt(1, "a")
	r1.Finalizers = []string{"foregroundDeletion"} // as the API server holds it while its Pods go
	c := fakecluster.Builder(deployment(), r1, memberOf(r1, leavingPod), groupOf(1, true)).Build()
	before := &v1alpha1.ModelReplica{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(r1), before))
	pass := func(c client.Client) []string {
		t.Helper()
		recorder := events.NewFakeRecorder(10)
		_, err := (&Departures{Client: c, Recorder: recorder}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(r1)})
		require.NoError(t, err)
		return fakecluster.Events(recorder)
	}
	staleCache := interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx2 context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if r, ok := obj.(*v1alpha1.ModelReplica); ok {
				before.DeepCopyInto(r)
				return nil
			}
			return cl.Get(ctx2, key, obj, opts...)
		},
	})

	assert.Len(t, pass(c), 1, "the departure is told")
	assert.Empty(t, pass(staleCache), "a pass reading the replica from before the delete is refused, and tells nothing")
	assert.Empty(t, pass(c), "the replica being deleted tells nothing more")
	require.NoError(t, c.Delete(ctx, memberOf(r1)))
	live := &v1alpha1.ModelReplica{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(r1), live))
	live.Finalizers = nil
	require.NoError(t, c.Update(ctx, live))
	assert.Empty(t, pass(staleCache), "nor does a stale pass once the replica is gone")
}

// TestReplicaRestartedOncePerRise: each rise of a member's restart count is told once — not again
// on the next pass, nor by a restarted controller, nor by a pass reading a cache that has not yet
// seen the count claimed — and a later rise is told again.
func TestReplicaRestartedOncePerRise(t *testing.T) {
	r1 := replicaAt(1, "a")
	member := memberOf(r1, readyPod, restartedPod(1))
	c := fakecluster.Builder(deployment(), r1, member, groupOf(1, true)).Build()
	pass := func(c client.Client) []string {
		t.Helper()
		recorder := events.NewFakeRecorder(10) // a new recorder each pass: a restarted controller remembers nothing
		_, err := (&Departures{Client: c, Recorder: recorder}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(r1)})
		require.NoError(t, err)
		return fakecluster.Events(recorder)
	}
	stale := &corev1.PodList{}
	require.NoError(t, c.List(ctx, stale))

	assert.Len(t, pass(c), 1, "the first restart is told")
	assert.Empty(t, pass(c), "the same count is not told again")

	staleCache := interceptor.NewClient(c, interceptor.Funcs{
		List: func(ctx2 context.Context, cl client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if pods, ok := list.(*corev1.PodList); ok {
				stale.DeepCopyInto(pods)
				return nil
			}
			return cl.List(ctx2, list, opts...)
		},
	})
	assert.Empty(t, pass(staleCache), "a pass reading the Pod as it was before the count was claimed loses the claim")

	live := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(member), live))
	assert.Equal(t, "1", live.Annotations[AnnotationRestartsReported], "the count told is kept on the Pod")
	live.Status.ContainerStatuses[0].RestartCount = 2
	require.NoError(t, c.Status().Update(ctx, live), "the kubelet reports a second restart")
	assert.Equal(t, []string{"Warning ReplicaRestarted replica r1 of role server has restarted 2 time(s) (member md-server-r1-a-m0); the cache blocks it held stay leased for the 30s kv_lease_duration window, then its siblings lose them"},
		pass(c), "a second restart is told")
	assert.Empty(t, pass(c))
}
