package members

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// change is the kind of a replica's unwritten status change, which decides how long it waits.
type change int

const (
	// firstReport is a replica's first report (its members exist): written once the replica has
	// existed settleInterval (firstReportWait), so a replica admitted at once (a rollout's
	// replacement, a scale-up within quota) reports its members and its reservation in one write.
	firstReport change = iota
	// roleChange changes what the replica's role reads: written once it has stood settleInterval,
	// and at least reportInterval after the replica's last write.
	roleChange
	// detailChange changes only details a person reads: written detailInterval after it was first
	// seen, unless a role change carries it sooner.
	detailChange
	// preemptionReport is who Kueue preempted the replica's group for, first seen: written at once,
	// since Kueue's word on it goes with the preempted Pods and, once written, the status keeps it.
	preemptionReport
)

// writeTimes remembers when each replica's status was last written, and since when its unwritten
// changes have waited: those its role reads, and those of details alone.
type writeTimes struct {
	mu      sync.Mutex
	last    map[types.UID]time.Time
	changes map[types.UID]time.Time
	details map[types.UID]time.Time
	now     func() time.Time
}

func newWriteTimes() *writeTimes {
	return &writeTimes{last: map[types.UID]time.Time{}, changes: map[types.UID]time.Time{}, details: map[types.UID]time.Time{}, now: time.Now}
}

// wait is how long until replica's change of kind may be written, 0 when now: its hold since it was
// first seen (settleInterval for a role change, detailInterval for details), and its interval since
// the replica's last write (reportInterval, detailInterval).
func (w *writeTimes) wait(replica types.UID, kind change) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	var hold, interval time.Duration
	var since map[types.UID]time.Time
	switch kind {
	case roleChange:
		hold, interval, since = settleInterval, reportInterval, w.changes
	case detailChange:
		hold, interval, since = detailInterval, detailInterval, w.details
		delete(w.changes, replica) // a role change seen before has been undone
	default:
		return 0
	}
	seen, ok := since[replica]
	if !ok {
		since[replica], seen = now, now
	}
	left := hold - now.Sub(seen)
	if at, ok := w.last[replica]; ok {
		left = max(left, interval-now.Sub(at))
	}
	return max(left, 0)
}

// firstReportWait is how long the first report of a replica created at created waits: until the
// replica has existed settleInterval. It counts from the replica's creation, not from when this
// process first saw it, so a restarted controller does not hold a report back again.
func (w *writeTimes) firstReportWait(created time.Time) time.Duration {
	return max(settleInterval-w.now().Sub(created), 0)
}

// settled forgets the changes that are no longer pending (the status caught up with them).
func (w *writeTimes) settled(replica types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.changes, replica)
	delete(w.details, replica)
}

// wrote records a write of replica's status now, and forgets what is too old to hold anything back
// (a replica deleted since would otherwise stay remembered).
func (w *writeTimes) wrote(replica types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for _, m := range []map[types.UID]time.Time{w.last, w.changes, w.details} {
		for uid, at := range m {
			if now.Sub(at) > 2*detailInterval {
				delete(m, uid)
			}
		}
	}
	delete(w.changes, replica)
	delete(w.details, replica)
	w.last[replica] = now
}
