package retirement_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/retirement"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func admitted() workerv1.Retirement {
	return retirement.Admit(retirement.Target{Role: "decode", Ordinal: 2, Members: []string{"u2", "u1"}, Workload: "w"}, 7, t0, retirement.DefaultBudgets)
}

func in(state workerv1.RetirementState, phaseStarted time.Duration) workerv1.Retirement {
	op := admitted()
	op.State, op.PhaseStartedAt = state, metav1.NewTime(t0.Add(phaseStarted))
	return op
}

// standing is the observation of a target whose members all stand, withdrawal observable.
func standing() retirement.Observation {
	return retirement.Observation{Standing: map[string]bool{"u1": true, "u2": true}, Present: map[string]bool{"u1": true, "u2": true},
		Selective: true, WorkloadPresent: true, ReplicaStanding: true}
}

func with(f func(*retirement.Observation)) retirement.Observation {
	o := standing()
	f(&o)
	return o
}

func TestAdmit(t *testing.T) {
	op := admitted()
	assert.Equal(t, workerv1.RetirementAdmitted, op.State)
	assert.Equal(t, "admitted for a replica this pass no longer declares", op.Reason)
	assert.Equal(t, []string{"u1", "u2"}, op.TargetMemberUIDs, "sorted")
	assert.Equal(t, t0.Add(300*time.Second), op.Deadline.Time, "deadline = now + 300 s")
	assert.Equal(t, t0, op.PhaseStartedAt.Time)
	assert.Equal(t, int64(7), op.ObservedGeneration)
}

// TestTransitions has one row per row of the protocol's transition table, as mdplane reads it.
func TestTransitions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     workerv1.Retirement
		obs    retirement.Observation
		at     time.Duration
		state  workerv1.RetirementState
		delete bool
		clear  bool
		reason string
	}{
		{name: "Admitted holds while a target member carries the eligibility label",
			op: admitted(), obs: with(func(o *retirement.Observation) { o.Labelled = []string{"p-0"} }), at: 10 * time.Second,
			state: workerv1.RetirementAdmitted, reason: "the members still carry the endpoint-eligibility label: p-0"},
		{name: "Admitted → Disqualified → Withdrawing → Draining once no member is labelled or served",
			op: admitted(), obs: with(func(o *retirement.Observation) { o.Drain.Held = "vllm:num_requests_running is 3 on p-0" }), at: time.Second,
			state: workerv1.RetirementDraining, reason: "vllm:num_requests_running is 3 on p-0"},
		{name: "Disqualified holds while an EndpointSlice still serves a target member",
			op: in(workerv1.RetirementDisqualified, 0), obs: with(func(o *retirement.Observation) { o.Serving = []string{"p-0"} }), at: 5 * time.Second,
			state: workerv1.RetirementDisqualified, reason: "an EndpointSlice still serves p-0"},
		{name: "the withdrawal budget of 30 s spent aborts, retaining members, workload and capacity",
			op: in(workerv1.RetirementDisqualified, 0), obs: with(func(o *retirement.Observation) { o.Serving = []string{"p-0"} }), at: 30 * time.Second,
			state: workerv1.RetirementAborted, reason: "an EndpointSlice still serves p-0; members, workload and capacity are retained"},
		{name: "the withdrawal budget counts from the admitting moment, not from Disqualified",
			op: in(workerv1.RetirementAdmitted, 0), obs: with(func(o *retirement.Observation) { o.Labelled = []string{"p-0"} }), at: 31 * time.Second,
			state: workerv1.RetirementAborted},
		{name: "Draining → Deleting once the answering members read idle twice; the members are deleted",
			op: in(workerv1.RetirementDraining, 20*time.Second), obs: with(func(o *retirement.Observation) { o.Drain.Idle = true }), at: 100 * time.Second,
			state: workerv1.RetirementDeleting, delete: true, reason: "the answering members read idle twice"},
		{name: "Draining holds, naming why, within its 240 s budget from entering Draining",
			op: in(workerv1.RetirementDraining, 20*time.Second), obs: with(func(o *retirement.Observation) { o.Drain.Held = "busy" }), at: 259 * time.Second,
			state: workerv1.RetirementDraining, reason: "busy"},
		{name: "the drain budget spent aborts",
			op: in(workerv1.RetirementDraining, 20*time.Second), obs: with(func(o *retirement.Observation) { o.Drain.Held = "busy" }), at: 260 * time.Second,
			state: workerv1.RetirementAborted, reason: "busy; members, workload and capacity are retained"},
		{name: "the whole budget of 300 s ends every phase",
			op: in(workerv1.RetirementDraining, 200*time.Second), obs: with(func(o *retirement.Observation) { o.Drain.Held = "busy" }), at: 300 * time.Second,
			state: workerv1.RetirementAborted},
		{name: "a role whose Services do not select on eligibility is withdrawn by the delete itself, behind the preStop drain",
			op: admitted(), obs: with(func(o *retirement.Observation) { o.Selective = false }), at: time.Second,
			state: workerv1.RetirementDeleting, delete: true, reason: "the preStop hook drains each as it is deleted"},
		{name: "Deleting re-issues the deletes while a target member is on the API server",
			op: in(workerv1.RetirementDeleting, 0), obs: with(func(o *retirement.Observation) { o.Standing = nil }), at: 400 * time.Second,
			state: workerv1.RetirementDeleting, delete: true},
		{name: "Deleting → Settling once every target UID is absent",
			op: in(workerv1.RetirementDeleting, 0), obs: with(func(o *retirement.Observation) { o.Standing, o.Present = nil, nil }), at: 10 * time.Second,
			state: workerv1.RetirementSettling},
		{name: "Settling → Completed clears the field in the same pass once the Workload and the replica are released",
			op: in(workerv1.RetirementSettling, 0), obs: retirement.Observation{}, at: time.Second, clear: true},
		{name: "a spent settle budget only rewrites the reason",
			op: in(workerv1.RetirementSettling, 0), obs: retirement.Observation{WorkloadPresent: true}, at: 30 * time.Second,
			state: workerv1.RetirementSettling, reason: "the settle budget was exhausted and the release has not been observed: the group's Workload is still on the API server"},
		{name: "from Deleting on nothing aborts, not even the whole budget",
			op: in(workerv1.RetirementDeleting, 0), obs: with(func(o *retirement.Observation) { o.Declared = true }), at: time.Hour,
			state: workerv1.RetirementDeleting, delete: true},
		{name: "a target terminated outside the operator releases the hold: nothing could be retained",
			op: in(workerv1.RetirementDisqualified, 0), obs: with(func(o *retirement.Observation) { delete(o.Standing, "u2") }), at: time.Second, clear: true},
		{name: "a replica declared again before it is deleted stays",
			op: in(workerv1.RetirementDraining, 0), obs: with(func(o *retirement.Observation) { o.Declared = true }), at: time.Second, clear: true},
		{name: "Aborted is terminal until new intent",
			op: in(workerv1.RetirementAborted, 0), obs: standing(), at: time.Hour, state: workerv1.RetirementAborted},
		{name: "adoption: the spec declares the aborted ordinal again and its members stand",
			op: in(workerv1.RetirementAborted, 0), obs: with(func(o *retirement.Observation) { o.Declared = true }), at: time.Hour, clear: true},
		{name: "an aborted target terminated outside the operator releases the hold",
			op: in(workerv1.RetirementAborted, 0), obs: with(func(o *retirement.Observation) { o.Standing = nil }), at: time.Hour, clear: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := retirement.Advance(tc.op, tc.obs, t0.Add(tc.at), retirement.DefaultBudgets)
			assert.Equal(t, tc.clear, out.Clear, "clear")
			assert.Equal(t, tc.delete, out.Delete, "delete")
			if tc.clear {
				return
			}
			assert.Equal(t, tc.state, out.Op.State)
			if tc.reason != "" && !strings.Contains(out.Op.Reason, tc.reason) {
				t.Errorf("reason %q, want it to contain %q", out.Op.Reason, tc.reason)
			}
			if tc.state == workerv1.RetirementAborted && tc.op.State != workerv1.RetirementAborted && !out.Op.Deadline.Time.Equal(t0.Add(tc.at)) {
				t.Errorf("an aborted operation's deadline is the moment it aborted: %v", out.Op.Deadline)
			}
		})
	}
}

func TestPhaseBudgetsRestart(t *testing.T) {
	out := retirement.Advance(in(workerv1.RetirementWithdrawing, 0), with(func(o *retirement.Observation) { o.Drain.Held = "busy" }), t0.Add(20*time.Second), retirement.DefaultBudgets)
	assert.Equal(t, t0.Add(20*time.Second), out.Op.PhaseStartedAt.Time, "entering Draining resets the phase start")
	out = retirement.Advance(in(workerv1.RetirementDraining, 0), with(func(o *retirement.Observation) { o.Drain.Idle = true }), t0.Add(50*time.Second), retirement.DefaultBudgets)
	assert.Equal(t, t0.Add(50*time.Second), out.Op.PhaseStartedAt.Time, "entering Deleting resets it")
}

// TestRetryDirective has one row per rule of the retry directive.
func TestRetryDirective(t *testing.T) {
	aborted := in(workerv1.RetirementAborted, 0)
	consumed := aborted
	consumed.LastConsumedRetryToken = "t1"
	for _, tc := range []struct {
		name      string
		value     string
		op        *workerv1.Retirement
		parseErr  string
		accepted  bool
		clear     bool
		refusedIn string
	}{
		{name: "exactly three parts", value: "decode:2", parseErr: "exactly three parts"},
		{name: "four parts are not three", value: "decode:2:a:b", parseErr: "exactly three parts"},
		{name: "the ordinal is from 0 up", value: "decode:-1:t", parseErr: "from 0 up"},
		{name: "the role is not empty", value: ":2:t", parseErr: "must not be empty"},
		{name: "the token is not empty", value: "decode:2:", parseErr: "must not be empty"},
		{name: "accepted for the current Aborted reservation", value: "decode:2:t1", op: &aborted, accepted: true, clear: true},
		{name: "a consumed token only clears the annotation", value: "decode:2:t1", op: &consumed, clear: true},
		{name: "another role or ordinal is refused", value: "decode:1:t2", op: &aborted, refusedIn: "the aborted retirement is replica r2 of role decode"},
		{name: "no Aborted operation: refused", value: "decode:2:t2", op: ptrTo(in(workerv1.RetirementDraining, 0)), refusedIn: "no retirement is aborted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := retirement.ParseDirective(tc.value)
			if tc.parseErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.parseErr) {
					t.Fatalf("error %v, want %q", err, tc.parseErr)
				}
				return
			}
			next, clear, refused := retirement.Retry(tc.op, d, t0.Add(time.Hour), retirement.DefaultBudgets)
			assert.Equal(t, tc.clear, clear, "clear")
			if tc.refusedIn != "" {
				assert.Contains(t, refused, tc.refusedIn)
				return
			}
			assert.Empty(t, refused)
			if tc.accepted {
				assert.Equal(t, workerv1.RetirementAdmitted, next.State)
				assert.Equal(t, "retry directive accepted", next.Reason)
				assert.Equal(t, "t1", next.LastConsumedRetryToken)
				assert.Equal(t, t0.Add(time.Hour+300*time.Second), next.Deadline.Time)
				assert.Equal(t, t0.Add(time.Hour), next.PhaseStartedAt.Time)
			}
		})
	}
}

func ptrTo[T any](v T) *T { return &v }
