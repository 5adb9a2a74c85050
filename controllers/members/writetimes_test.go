package members

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWriteTimes: a change the role reads is written at once, then at most once per reportInterval;
// a change of details alone waits detailInterval from when it was first seen (a change the role
// reads in between carries it), and a write or a settled status starts that wait over.
func TestWriteTimes(t *testing.T) {
	start := time.Now()
	now := start
	w := newWriteTimes()
	w.now = func() time.Time { return now }

	assert.Zero(t, w.wait("r", reportInterval, false), "the first change the role reads is written at once")
	w.wrote("r")
	now = now.Add(time.Second)
	assert.Equal(t, reportInterval-time.Second, w.wait("r", reportInterval, false), "the next waits out the report interval")

	assert.Equal(t, detailInterval, w.wait("r", detailInterval, true), "a detail waits the detail interval from when it was first seen")
	now = now.Add(5 * time.Second)
	assert.Zero(t, w.wait("r", reportInterval, false), "a change the role reads within it is written, carrying the detail")
	w.wrote("r")

	now = now.Add(time.Minute)
	assert.Equal(t, detailInterval, w.wait("r", detailInterval, true), "a detail alone waits from when it was first seen")
	now = now.Add(4 * time.Second)
	assert.Equal(t, detailInterval-4*time.Second, w.wait("r", detailInterval, true), "seen again: the wait is not started over")
	now = now.Add(detailInterval)
	assert.Zero(t, w.wait("r", detailInterval, true), "written once it has waited its interval")

	w.settled("r")
	assert.Equal(t, detailInterval, w.wait("r", detailInterval, true), "a change settled without a write starts over")
}
