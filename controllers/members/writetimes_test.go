package members

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestWriteTimes: a replica's first report is written once the replica has existed
// settleInterval; a change the role reads once it has stood settleInterval and reportInterval after
// the last write; a change of details alone detailInterval from when it was first seen (a change
// the role reads in between carries it); a write or a settled status starts each wait over.
func TestWriteTimes(t *testing.T) {
	start := time.Now()
	now := start
	w := newWriteTimes()
	w.now = func() time.Time { return now }

	assert.Equal(t, settleInterval-time.Second, w.firstReportWait(now.Add(-time.Second)), "a replica created a second ago reports a second later")
	assert.Zero(t, w.firstReportWait(now.Add(-settleInterval)), "near miss: one that has existed the settle interval reports now")
	w.wrote("r")
	now = now.Add(time.Second)
	assert.Equal(t, reportInterval-time.Second, w.wait("r", roleChange), "a role change waits out the report interval")
	now = now.Add(reportInterval)
	assert.Zero(t, w.wait("r", roleChange), "and is written once it has also settled")
	w.wrote("r")

	now = now.Add(time.Minute)
	assert.Equal(t, settleInterval, w.wait("r", roleChange), "long after the last write, a role change still settles first")
	now = now.Add(settleInterval / 2)
	assert.Equal(t, settleInterval/2, w.wait("r", roleChange), "seen again: the settle is not started over")
	now = now.Add(settleInterval / 2)
	assert.Zero(t, w.wait("r", roleChange))
	w.wrote("r")

	now = now.Add(time.Minute)
	assert.Equal(t, detailInterval, w.wait("r", detailChange), "a detail waits the detail interval from when it was first seen")
	now = now.Add(4 * time.Second)
	assert.Equal(t, detailInterval-4*time.Second, w.wait("r", detailChange), "seen again: the wait is not started over")
	assert.Equal(t, settleInterval, w.wait("r", roleChange), "a role change meanwhile waits only its settle, carrying the detail")
	now = now.Add(detailInterval)
	assert.Zero(t, w.wait("r", detailChange), "written once it has waited its interval")

	w.settled("r")
	assert.Equal(t, detailInterval, w.wait("r", detailChange), "a change settled without a write starts over")
	now = now.Add(settleInterval)
	assert.Equal(t, settleInterval, w.wait("r", roleChange), "a role change undone before (a detail seen since) settles anew")
}
