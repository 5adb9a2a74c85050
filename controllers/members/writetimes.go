package members

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

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
