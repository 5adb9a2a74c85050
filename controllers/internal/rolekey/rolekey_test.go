package rolekey

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// recordingQueue records when each Add and AddAfter would queue its request, on the test's clock.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	now    *time.Time
	queued []time.Duration // since t0
}

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)

func (q *recordingQueue) Add(reconcile.Request) { q.queued = append(q.queued, q.now.Sub(t0)) }
func (q *recordingQueue) AddAfter(_ reconcile.Request, d time.Duration) {
	q.queued = append(q.queued, q.now.Add(d).Sub(t0))
}

func TestCoalescedQueuesARoleAtMostOncePerGap(t *testing.T) {
	now := t0
	c := Coalesced(handler.EnqueueRequestsFromMapFunc(Requests), time.Second).(*coalesced)
	c.now = func() time.Time { return now }
	q := &recordingQueue{now: &now}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Labels: map[string]string{workerv1.LabelInstance: "md", workerv1.LabelComponent: "server"}}}
	eventAt := func(at time.Duration) {
		now = t0.Add(at)
		c.Create(context.Background(), event.CreateEvent{Object: pod}, q)
	}
	for _, at := range []time.Duration{0, 100 * time.Millisecond, 900 * time.Millisecond, 1500 * time.Millisecond, 5 * time.Second} {
		eventAt(at)
	}
	assert.Equal(t, []time.Duration{
		0,                        // a lone event: at once
		time.Second, time.Second, // events within the gap: one request, a gap after the first
		2 * time.Second, // an event after it was queued: the next gap
		5 * time.Second, // after a quiet gap: at once again
	}, q.queued)
}
