package members

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// writeTimes remembers when each replica's status was last written, and since when a detail change
// has waited for its write.
type writeTimes struct {
	mu      sync.Mutex
	last    map[types.UID]time.Time
	details map[types.UID]time.Time
	now     func() time.Time
}

func newWriteTimes() *writeTimes {
	return &writeTimes{last: map[types.UID]time.Time{}, details: map[types.UID]time.Time{}, now: time.Now}
}

// wait is how long until replica's change may be written, 0 when now: interval after its last write
// and, for a change of details alone, detailInterval after that change was first seen, so that it
// rides along with the next change the role reads when one comes sooner. Entries older than the
// interval are dropped as they are met.
func (w *writeTimes) wait(replica types.UID, interval time.Duration, detailOnly bool) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var left time.Duration
	if detailOnly {
		seen, ok := w.details[replica]
		if !ok {
			w.details[replica], seen = now, now
		}
		left = detailInterval - now.Sub(seen)
	}
	if at, ok := w.last[replica]; ok {
		if gap := interval - now.Sub(at); gap > left {
			left = gap
		} else if gap <= 0 {
			delete(w.last, replica)
		}
	}
	return max(left, 0)
}

// settled forgets a detail change that is no longer pending (the status caught up with it).
func (w *writeTimes) settled(replica types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.details, replica)
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
	for uid, at := range w.details {
		if now.Sub(at) > 2*detailInterval {
			delete(w.details, uid)
		}
	}
	delete(w.details, replica)
	w.last[replica] = now
}
