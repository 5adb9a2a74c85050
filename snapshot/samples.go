package snapshot

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Window and retention of the previous reads.
const (
	// MaxWindow is the longest span two reads make a window over.
	MaxWindow = 5 * time.Minute
	// Retention is how long a read is kept for the next one.
	Retention = 10 * time.Minute
)

// Sample is one earlier read of a series: a histogram's count and sum, a counter's count, or a
// cache scope's hits and queries.
type Sample struct {
	At   time.Time
	A, B float64
}

// Samples are the earlier reads, keyed <md UID>/<pod UID>/<source or scope>.
type Samples map[string]Sample

// sampleKey is a series' key in Samples.
func sampleKey(md, pod types.UID, sourceOrScope string) string {
	return string(md) + "/" + string(pod) + "/" + sourceOrScope
}

// clone is a copy without the reads older than Retention at now.
func (s Samples) clone(now time.Time) Samples {
	out := make(Samples, len(s))
	for k, v := range s {
		if now.Sub(v.At) <= Retention {
			out[k] = v
		}
	}
	return out
}

// delta is what happened between the kept read of key and this one, which replaces it: the deltas
// and the span, or the reason there is no window.
func (s Samples) delta(key string, cur Sample) (dA, dB, seconds float64, reason string) {
	prev, ok := s[key]
	s[key] = cur
	span := cur.At.Sub(prev.At)
	if !ok || span <= 0 || span > MaxWindow {
		return 0, 0, 0, ReasonAwaitingSample
	}
	return cur.A - prev.A, cur.B - prev.B, span.Seconds(), ""
}
