package expectations

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TTL bounds how long a create the cache has not shown yet holds back another create of the same
// member: past it, a create that was lost (its watch event never came) is retried.
const TTL = time.Minute

// Creates remembers, per owner, the members created and not yet seen in the cache. Objects with
// generated names need it: the API server would not refuse a second create of the same member.
type Creates struct {
	mu      sync.Mutex
	pending map[types.UID]map[int32]time.Time
	now     func() time.Time
}

// New returns an empty set of expectations.
func New() *Creates {
	return &Creates{pending: map[types.UID]map[int32]time.Time{}, now: time.Now}
}

// Created records that member m of owner was just created.
func (e *Creates) Created(owner types.UID, m int32) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for uid, members := range e.pending { // expired ones: of an owner deleted before the cache showed them
		for member, at := range members {
			if e.now().Sub(at) > TTL {
				delete(members, member)
			}
		}
		if len(members) == 0 {
			delete(e.pending, uid)
		}
	}
	if e.pending[owner] == nil {
		e.pending[owner] = map[int32]time.Time{}
	}
	e.pending[owner][m] = e.now()
}

// Awaiting reports whether a create of member m is still on its way to the cache; seen says the
// cache shows the member, which settles the expectation.
func (e *Creates) Awaiting(owner types.UID, m int32, seen bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	at, ok := e.pending[owner][m]
	if !ok {
		return false
	}
	if seen || e.now().Sub(at) > TTL {
		delete(e.pending[owner], m)
		if len(e.pending[owner]) == 0 {
			delete(e.pending, owner)
		}
		return false
	}
	return true
}

// Deletes remembers the objects deleted whose deletion the cache has not shown yet. A Pod or
// Workload held by a finalizer stays in the cache without its deletionTimestamp for the watch's lag,
// and several controllers delete the members and Workload of a leaving replica: without this, each
// pass on the lagging cache would delete the same object again, one more write each time. Shared by
// the controllers of one process; a nil Deletes remembers nothing.
type Deletes struct {
	mu      sync.Mutex
	deleted map[types.UID]time.Time
	now     func() time.Time
}

// NewDeletes returns an empty memory of deletes.
func NewDeletes() *Deletes {
	return &Deletes{deleted: map[types.UID]time.Time{}, now: time.Now}
}

// Claim reports whether the caller is to delete the object of uid, and if so records the delete as
// issued: false while a delete of it claimed by any controller sharing the memory is within TTL
// (two controllers reacting to one departure at the same moment send one delete). Past TTL, a
// delete whose effect never reached the cache is sent again. A nil Deletes always claims.
func (e *Deletes) Claim(uid types.UID) bool {
	if e == nil {
		return true
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if at, ok := e.deleted[uid]; ok && now.Sub(at) <= TTL {
		return false
	}
	for u, at := range e.deleted {
		if now.Sub(at) > TTL {
			delete(e.deleted, u)
		}
	}
	e.deleted[uid] = now
	return true
}

// Release forgets a claimed delete that failed, so the next pass sends it again.
func (e *Deletes) Release(uid types.UID) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.deleted, uid)
}
