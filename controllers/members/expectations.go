package members

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// expectationTTL bounds how long a create the cache has not shown yet holds back another create of
// the same member: past it, a create that was lost (its watch event never came) is retried.
const expectationTTL = time.Minute

// expectations remembers the members created and not yet seen in the cache, per replica, so that a
// reconcile running on a cache that lags its own writes does not create a member twice (a size-1
// member has a generated name, so the API server would not refuse the second one).
type expectations struct {
	mu      sync.Mutex
	pending map[types.UID]map[int32]time.Time
	now     func() time.Time
}

func newExpectations() *expectations {
	return &expectations{pending: map[types.UID]map[int32]time.Time{}, now: time.Now}
}

// created records that member m of replica was just created.
func (e *expectations) created(replica types.UID, m int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid, members := range e.pending { // expired ones: of a replica deleted before the cache showed them
		for member, at := range members {
			if e.now().Sub(at) > expectationTTL {
				delete(members, member)
			}
		}
		if len(members) == 0 {
			delete(e.pending, uid)
		}
	}
	if e.pending[replica] == nil {
		e.pending[replica] = map[int32]time.Time{}
	}
	e.pending[replica][m] = e.now()
}

// awaiting reports whether a create of member m is still on its way to the cache; seen says the
// cache shows the member, which settles the expectation.
func (e *expectations) awaiting(replica types.UID, m int32, seen bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.pending[replica][m]
	if !ok {
		return false
	}
	if seen || e.now().Sub(at) > expectationTTL {
		delete(e.pending[replica], m)
		if len(e.pending[replica]) == 0 {
			delete(e.pending, replica)
		}
		return false
	}
	return true
}

// writeTimes remembers when each replica's status was last written.
type writeTimes struct {
	mu   sync.Mutex
	last map[types.UID]time.Time
	now  func() time.Time
}

func newWriteTimes() *writeTimes {
	return &writeTimes{last: map[types.UID]time.Time{}, now: time.Now}
}

// wait is how long until replica may be written again, interval after its last write; 0 when it
// may be written now. Entries older than the interval are dropped as they are met.
func (w *writeTimes) wait(replica types.UID, interval time.Duration) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.last[replica]
	if !ok {
		return 0
	}
	if left := interval - w.now().Sub(at); left > 0 {
		return left
	}
	delete(w.last, replica)
	return 0
}

// wrote records a write of replica's status now, and forgets the writes too old to hold anything
// back (a replica deleted since would otherwise stay remembered).
func (w *writeTimes) wrote(replica types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for uid, at := range w.last {
		if now.Sub(at) > detailInterval {
			delete(w.last, uid)
		}
	}
	w.last[replica] = now
}
