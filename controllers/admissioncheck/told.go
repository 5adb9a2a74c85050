package admissioncheck

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// told remembers the check state last written on each Workload, with the resourceVersion the
// Workload had when that write was decided. A judgment that reads a Workload still at that version
// has not seen the write yet (the cache trails the API server by the watch), and without this would
// write the same state again: at 500 groups, one more write for most members of a set assembling.
type told struct {
	mu sync.Mutex
	by map[types.NamespacedName]toldState
}

type toldState struct {
	resourceVersion string
	state           kueue.CheckState
	message         string
	at              time.Time
}

// toldFor is how long a remembered write is kept for a Workload that is not read again (deleted).
const toldFor = time.Minute

// covers reports whether w writes what was last written on its Workload, which the cache has not
// shown since: the Workload is at the version the write was decided at.
func (t *told) covers(w write) bool {
	if w.check == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	key := types.NamespacedName{Namespace: w.workload.Namespace, Name: w.workload.Name}
	last, ok := t.by[key]
	if !ok {
		return false
	}
	if last.resourceVersion != w.workload.ResourceVersion {
		delete(t.by, key) // the cache has moved on: what it shows decides
		return false
	}
	return last.state == w.check.State && sameWait(last.message, w.check.Message)
}

// wrote remembers w, written at now, and forgets what is older than toldFor.
func (t *told) wrote(w write, now time.Time) {
	if w.check == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = map[types.NamespacedName]toldState{}
	}
	for key, s := range t.by {
		if now.Sub(s.at) > toldFor {
			delete(t.by, key)
		}
	}
	t.by[types.NamespacedName{Namespace: w.workload.Namespace, Name: w.workload.Name}] = toldState{
		resourceVersion: w.workload.ResourceVersion, state: w.check.State, message: w.check.Message, at: now}
}
