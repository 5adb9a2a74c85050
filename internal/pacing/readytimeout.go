package pacing

import (
	"time"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
)

// The backoff before a slot whose group Kueue evicted at its waitForPodsReady timeout is filled
// again: Kueue's own requeuing defaults (backoffBaseSeconds 60, backoffMaxSeconds 3600), doubling
// with each eviction in a row. Kueue would apply them itself to a Workload it requeues, but a pod
// group's Workload is deleted once its Pods are gone, and with it the requeue state: without this,
// a replica whose engine loads for longer than the timeout would be evicted and rebuilt at once,
// over and over.
const (
	ReadyTimeoutBackoffBase = time.Minute
	ReadyTimeoutBackoffMax  = time.Hour
)

// ReadyTimeoutBackoff is the wait after count evictions in a row: the base, doubled count−1 times,
// at most the maximum.
func ReadyTimeoutBackoff(count int32) time.Duration {
	wait := ReadyTimeoutBackoffBase
	for i := int32(1); i < count && wait < ReadyTimeoutBackoffMax; i++ {
		wait *= 2
	}
	return min(wait, ReadyTimeoutBackoffMax)
}

// AfterReadyTimeouts keeps of the vacant slots those no backoff holds at now, and says how long the
// soonest held one still waits (zero for none).
func AfterReadyTimeouts(timeouts map[string]v1alpha1.ReadyTimeout, vacant []int32, now time.Time) (free []int32, wait time.Duration) {
	for _, ordinal := range vacant {
		t, held := timeouts[v1alpha1.SlotKey(ordinal)]
		if !held {
			free = append(free, ordinal)
			continue
		}
		left := t.Until.Sub(now)
		if left <= 0 {
			free = append(free, ordinal)
			continue
		}
		if wait == 0 || left < wait {
			wait = left
		}
	}
	return free, wait
}
