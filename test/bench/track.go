// Package bench measures how fast the test stack (package cluster) turns a large ModelDeployment into
// running Pods, and what it costs in API writes: the phases mdplane-bench-scale runs and the table it
// prints (docs/performance.md).
package bench

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// admissionGate is the scheduling gate Kueue's webhook puts on the Pods it manages.
const admissionGate = "kueue.x-k8s.io/admission"

// podTimes is what the tracker knows of one Pod: timestamps the API server recorded and the moment
// the watch first saw it without Kueue's gate (a gate's removal leaves no timestamp on the object).
type podTimes struct {
	created, scheduled, ready time.Time
	ungated                   time.Time
}

// tracker watches the Pods of a namespace and keeps every Pod it has seen, deleted ones included.
type tracker struct {
	mu      sync.Mutex
	pods    map[string]*podTimes // by UID
	live    map[string]bool      // UIDs not deleted yet
	stop    chan struct{}
	stopped sync.Once
}

// track starts watching the Pods of namespace.
func track(ctx context.Context, cs kubernetes.Interface, namespace string) (*tracker, error) {
	t := &tracker{pods: map[string]*podTimes{}, live: map[string]bool{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { t.observe(obj) },
		UpdateFunc: func(_, obj any) { t.observe(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				t.mu.Lock()
				delete(t.live, string(p.UID))
				t.mu.Unlock()
			}
		},
	}); err != nil {
		return nil, err
	}
	factory.Start(t.stop)
	synced := make(chan struct{})
	go func() { cache.WaitForCacheSync(t.stop, inf.HasSynced); close(synced) }()
	select {
	case <-synced:
	case <-ctx.Done():
		t.close()
		return nil, ctx.Err()
	}
	return t, nil
}

func (t *tracker) close() { t.stopped.Do(func() { close(t.stop) }) }

func (t *tracker) observe(obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	uid := string(p.UID)
	pt := t.pods[uid]
	if pt == nil {
		pt = &podTimes{created: p.CreationTimestamp.Time}
		t.pods[uid] = pt
		t.live[uid] = true
	}
	if pt.ungated.IsZero() && !slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == admissionGate }) {
		pt.ungated = now
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodScheduled:
			pt.scheduled = c.LastTransitionTime.Time
		case corev1.PodReady:
			pt.ready = c.LastTransitionTime.Time
		}
	}
}

// counts is how many Pods have reached each step, and when the last of them did.
type counts struct {
	created, live, ungated, scheduled, ready           int
	lastCreated, lastUngated, lastScheduled, lastReady time.Time
}

func (t *tracker) counts() counts {
	t.mu.Lock()
	defer t.mu.Unlock()
	var c counts
	latest := func(last *time.Time, at time.Time) {
		if at.After(*last) {
			*last = at
		}
	}
	for uid, p := range t.pods {
		c.created++
		latest(&c.lastCreated, p.created)
		if !t.live[uid] {
			continue
		}
		c.live++
		if !p.ungated.IsZero() {
			c.ungated++
			latest(&c.lastUngated, p.ungated)
		}
		if !p.scheduled.IsZero() {
			c.scheduled++
			latest(&c.lastScheduled, p.scheduled)
		}
		if !p.ready.IsZero() {
			c.ready++
			latest(&c.lastReady, p.ready)
		}
	}
	return c
}
