package rollout

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// VacancySettle is how long a slot stays empty, once its departed replica's last Pod and group
// Workload are gone, before the pacer fills it. Kueue v0.17, reconciling a group whose Workload the
// reaper deleted while its Pods were still held by its finalizer, releases them and builds a new
// Workload from them (ConstructComposableWorkload), which the garbage collector removes a moment
// later, its owners gone. A replacement created meanwhile joins that Workload, is ungated by it, and
// is stopped by Kueue when it goes: the slot's replica would go missing a second time. Seen on CI:
// 47 ms from the Pod going to the Workload's creation, 83 ms more to its removal. Each replacement of
// a rolling edit waits this long once.
const VacancySettle = 500 * time.Millisecond

// vacancies remembers, per role, the slots a departed replica is leaving (zero time) and when each
// became empty. A slot never seen departing (a new role, a scale-up, the first pass after a
// restart) is filled at once.
type vacancies struct {
	mu    sync.Mutex
	slots map[types.UID]map[int32]time.Time
}

// settle records the role's departing and filled slots and splits the empty ones: those to fill now,
// and how long until the next of the others has settled (zero when none waits).
func (v *vacancies) settle(role types.UID, departing, empty, filled []int32, now time.Time) (fill []int32, wait time.Duration) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.slots == nil {
		v.slots = map[types.UID]map[int32]time.Time{}
	}
	slots := v.slots[role]
	if slots == nil {
		slots = map[int32]time.Time{}
	}
	for _, o := range departing {
		slots[o] = time.Time{}
	}
	for _, o := range filled {
		delete(slots, o)
	}
	for _, o := range empty {
		since, seen := slots[o]
		switch {
		case !seen:
			fill = append(fill, o)
			continue
		case since.IsZero():
			slots[o], since = now, now
		}
		left := VacancySettle - now.Sub(since)
		if left <= 0 {
			fill = append(fill, o)
			delete(slots, o)
			continue
		}
		if wait == 0 || left < wait {
			wait = left
		}
	}
	if len(slots) == 0 {
		delete(v.slots, role)
	} else {
		v.slots[role] = slots
	}
	return fill, wait
}
