package retirement_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/snapshot"
)

func read(t *testing.T, member, body string) retirement.Read {
	t.Helper()
	f, err := snapshot.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return retirement.Read{Member: member, Families: f}
}

// TestJudgeDrain has one row per rule of the drain read.
func TestJudgeDrain(t *testing.T) {
	gauges := []string{"vllm:num_requests_running", "vllm:num_requests_waiting"}
	idle := "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"
	for _, tc := range []struct {
		name   string
		rounds [][]retirement.Read
		held   string
	}{
		{name: "idle: every expected gauge present and exactly 0 on two consecutive reads",
			rounds: [][]retirement.Read{{read(t, "m0", idle)}, {read(t, "m0", idle)}}},
		{name: "one read is not two", rounds: [][]retirement.Read{{read(t, "m0", idle)}}, held: "fewer than twice"},
		{name: "busy on the second read holds",
			rounds: [][]retirement.Read{{read(t, "m0", idle)}, {read(t, "m0", "vllm:num_requests_running 0\nvllm:num_requests_waiting 4\n")}},
			held:   "m0 is busy: vllm:num_requests_waiting is 4"},
		{name: "a missing series holds",
			rounds: [][]retirement.Read{{read(t, "m0", "vllm:num_requests_running 0\n")}, {read(t, "m0", idle)}}, held: "m0 does not report vllm:num_requests_waiting"},
		{name: "a failed read holds, naming the member",
			rounds: [][]retirement.Read{{{Member: "m1", Err: "metrics endpoint returned HTTP 404"}}, {read(t, "m1", idle)}}, held: "the drain read of m1 failed: metrics endpoint returned HTTP 404"},
		{name: "every answering member is read", rounds: [][]retirement.Read{{read(t, "m0", idle), read(t, "m1", "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n")}, {read(t, "m0", idle)}},
			held: "m1 is busy"},
		{name: "no answering member holds", rounds: [][]retirement.Read{{}, {}}, held: "no member of the replica answers HTTP"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := retirement.JudgeDrain(gauges, tc.rounds...)
			if tc.held == "" {
				assert.True(t, d.Idle, d.Held)
				return
			}
			assert.False(t, d.Idle)
			assert.Contains(t, d.Held, tc.held)
		})
	}
}
