package members

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestProbesAreKeptPerGeneration: a probe runs off the reconcile, its result is kept for the
// membership it was sent to, a result not verified is sent again after probeRetry (the last result
// standing meanwhile), and a replaced member starts over.
func TestProbesAreKeptPerGeneration(t *testing.T) {
	var answers atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		answers.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	require.NoError(t, err)
	member := func(uid string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID("uid-" + uid),
			Annotations: map[string]string{"prometheus.io/port": port}}, Status: corev1.PodStatus{PodIP: host}}
	}
	members := []*corev1.Pod{member("a"), member("b")}
	p := newProbes()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	p.now = func() time.Time { return time.Unix(0, now.Load()) }

	leg, recheck := p.groupForward("r", workerv1.EngineVLLM, members)
	assert.Equal(t, v1alpha1.LegUnknown, leg.State, "in flight")
	assert.Equal(t, probeRecheck, recheck)
	require.Eventually(t, func() bool {
		leg, _ = p.groupForward("r", workerv1.EngineVLLM, members)
		return leg.State == v1alpha1.LegFailed
	}, 5*time.Second, 10*time.Millisecond, "the probe's result is kept")
	seen := answers.Load()
	_, recheck = p.groupForward("r", workerv1.EngineVLLM, members)
	assert.Equal(t, probeRetry, recheck, "sent again after probeRetry")
	assert.Equal(t, seen, answers.Load(), "not sent again before")

	now.Add(int64(probeRetry))
	failed := leg
	leg, recheck = p.groupForward("r", workerv1.EngineVLLM, members)
	assert.Equal(t, failed, leg, "while sent again, the last result stands: a retry writes no status")
	assert.Equal(t, probeRecheck, recheck)
	require.Eventually(t, func() bool { return answers.Load() > seen }, 5*time.Second, 10*time.Millisecond, "sent again")

	replaced := []*corev1.Pod{members[0], member("c")}
	leg, _ = p.groupForward("r", workerv1.EngineVLLM, replaced)
	assert.Contains(t, leg.Reason, "in flight", "a new generation carries nothing over")
}
