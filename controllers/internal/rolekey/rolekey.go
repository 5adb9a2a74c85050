// Package rolekey maps an object labelled for a role (a ModelReplica, a Pod, a revision) to the
// reconcile request of its ModelRole, for the controllers that reconcile roles, and coalesces the
// events of a role's many objects into one request.
package rolekey

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Requests is the request of the ModelRole whose deployment and role o's labels name; none for an
// object without both labels.
func Requests(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[workerv1.LabelInstance] == "" || l[workerv1.LabelComponent] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: naming.RoleNameOf(l)}}}
}

// Coalesced is h queueing each request at most once per gap: at once when the last was queued
// gap ago or more, else when gap has passed. A pass of a role reads every one of its slots; the
// events of its hundreds of Pods, replicas and Workloads coming up, each queued at once, would run
// a pass whenever the queue emptied. A lone event (a replacement admitted, a replica gone) still
// runs its pass at once.
func Coalesced(h handler.EventHandler, gap time.Duration) handler.EventHandler {
	return &coalesced{h: h, gap: gap, last: map[reconcile.Request]time.Time{}, now: time.Now}
}

type coalesced struct {
	h   handler.EventHandler
	gap time.Duration
	now func() time.Time

	mu   sync.Mutex
	last map[reconcile.Request]time.Time // when each request was last queued, or is to be
}

func (c *coalesced) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.h.Create(ctx, e, spaced{q, c})
}

func (c *coalesced) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.h.Update(ctx, e, spaced{q, c})
}

func (c *coalesced) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.h.Delete(ctx, e, spaced{q, c})
}

func (c *coalesced) Generic(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	c.h.Generic(ctx, e, spaced{q, c})
}

// delay is how long a request queued now waits, and records when it will be queued. Requests not
// queued for gap are forgotten, so the memory holds only the roles busy now.
func (c *coalesced) delay(r reconcile.Request) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for req, at := range c.last {
		if now.Sub(at) > c.gap {
			delete(c.last, req)
		}
	}
	next := now
	if at, ok := c.last[r]; ok {
		if at.After(now) {
			return at.Sub(now) // already waiting: this event joins it
		}
		next = at.Add(c.gap)
	}
	if next.Before(now) {
		next = now
	}
	c.last[r] = next
	return next.Sub(now)
}

// spaced is a queue whose Add waits as its coalescing handler says.
type spaced struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	c *coalesced
}

func (q spaced) Add(r reconcile.Request) {
	if d := q.c.delay(r); d > 0 {
		q.AddAfter(r, d)
		return
	}
	q.TypedRateLimitingInterface.Add(r)
}
