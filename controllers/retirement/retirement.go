package retirement

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Budgets bound an operation's phases. A phase ends at the earlier of the
// operation's deadline and its own start plus its budget; reaching that moment counts as spent.
type Budgets struct {
	// Withdrawal is shared by Admitted, Disqualified and Withdrawing, from the admitting moment.
	Withdrawal time.Duration
	// Drain starts again on entering Draining.
	Drain time.Duration
	// Settle starts again on entering Deleting and again on entering Settling.
	Settle time.Duration
	// Whole is the whole operation's, from its admission to its deadline.
	Whole time.Duration
}

// DefaultBudgets are the protocol's.
var DefaultBudgets = Budgets{Withdrawal: 30 * time.Second, Drain: 240 * time.Second, Settle: 30 * time.Second, Whole: 300 * time.Second}

// Reasons the operation states in words.
const (
	ReasonAdmitted = "admitted for a replica this pass no longer declares"
	ReasonOutside  = "the target was terminated outside this operator; nothing could be retained"
	ReasonRetry    = "retry directive accepted"
	// Retained ends the reason of an operation aborted on a spent budget.
	Retained = "; members, workload and capacity are retained"
	// SettleExhausted starts the reason of a settle whose budget is spent (nothing aborts then).
	SettleExhausted = "the settle budget was exhausted and the release has not been observed: "
)

// recheck is how often an operation waiting on something the rollout controller does not watch (an
// EndpointSlice, an engine's gauges, a settle's release) is looked at again.
const recheck = 2 * time.Second

// Target is the replica an operation retires, as the admitting pass read it.
type Target struct {
	Role     string
	Ordinal  int32
	Members  []string // the replica's Pods' UIDs
	Workload string   // the group's Workload UID; empty when it has none
}

// Admit starts an operation for a seated replica; the admitting pass deletes nothing.
func Admit(t Target, generation int64, now time.Time, b Budgets) workerv1.Retirement {
	members := slices.Clone(t.Members)
	slices.Sort(members)
	at := metav1.NewTime(now)
	return workerv1.Retirement{RoleName: t.Role, ReplicaOrdinal: t.Ordinal, ObservedGeneration: generation,
		TargetMemberUIDs: members, TargetWorkloadUID: t.Workload, State: workerv1.RetirementAdmitted,
		Reason: ReasonAdmitted, StartedAt: at, Deadline: metav1.NewTime(now.Add(b.Whole)), PhaseStartedAt: at}
}

// Observation is what one pass read of the target.
type Observation struct {
	// Declared is true when the role declares the ordinal again.
	Declared bool
	// Standing are the target members on the API server and not being deleted; Present those on the
	// API server at all, by UID.
	Standing, Present map[string]bool
	// Labelled are the target members still carrying the endpoint-eligibility label, by name.
	Labelled []string
	// Selective is true when the role's Services select on the eligibility label: only then does
	// taking the label away withdraw a member before it is deleted, and is a drain read meaningful.
	Selective bool
	// Serving are the target members an EndpointSlice of the deployment still lists as serving.
	Serving []string
	// Drain is the drain read of the answering members, taken only while Draining.
	Drain Drain
	// WorkloadPresent says whether the group's Workload is still on the API server; ReplicaStanding
	// whether a ModelReplica of the ordinal stands there without its delete (one being deleted, its
	// members and Workload gone, holds nothing while the garbage collector finishes it).
	WorkloadPresent, ReplicaStanding bool
}

// Drain is one pass's drain read: idle when every expected gauge read exactly 0 on two consecutive
// reads, else why it is held.
type Drain struct {
	Idle bool
	Held string
}

// Outcome is what a pass does with an operation.
type Outcome struct {
	// Op is the operation to store; meaningless when Clear is set.
	Op workerv1.Retirement
	// Delete asks the target's members, replica and Workload deleted (with UID preconditions).
	Delete bool
	// Clear removes the operation: completed, adopted, withdrawn by a new declaration, or released
	// because nothing could be retained.
	Clear bool
	// Event, when set, is said on the deployment (Warning when Warning is set).
	Event   string
	Warning bool
	// Recheck is when to look again; 0 waits for an event.
	Recheck time.Duration
}

// Advance takes an operation as far as what was observed lets it go in one pass.
func Advance(op workerv1.Retirement, obs Observation, now time.Time, b Budgets) Outcome {
	for range 8 { // bounded: every state moves forward at most once per pass
		out := step(op, obs, now, b)
		if out.Clear || out.Delete || out.Op.State == op.State {
			return out
		}
		op = out.Op
	}
	return Outcome{Op: op, Recheck: recheck}
}

// step is one transition of the retirement protocol (docs/decisions/0016-retirement.md).
func step(op workerv1.Retirement, obs Observation, now time.Time, b Budgets) Outcome {
	switch op.State {
	case workerv1.RetirementCompleted, workerv1.RetirementAborted, workerv1.RetirementDeleting, workerv1.RetirementSettling:
		return stepOn(op, obs, now, b)
	}
	return stepBeforeDeleting(op, obs, now, b)
}

// stepOn is a transition of an operation that deleted its target or aborted: nothing aborts it
// any more.
func stepOn(op workerv1.Retirement, obs Observation, now time.Time, b Budgets) Outcome {
	name := fmt.Sprintf("replica r%d of role %s", op.ReplicaOrdinal, op.RoleName)
	outside := !allIn(op.TargetMemberUIDs, obs.Standing)
	switch op.State {
	case workerv1.RetirementCompleted:
		return Outcome{Clear: true}
	case workerv1.RetirementAborted:
		switch {
		case outside:
			return Outcome{Clear: true, Warning: true, Event: name + ": " + ReasonOutside}
		case obs.Declared:
			return Outcome{Clear: true, Event: name + " is declared again: its aborted retirement is cleared and the replica is kept"}
		}
		return Outcome{Op: op}
	case workerv1.RetirementDeleting:
		if anyIn(op.TargetMemberUIDs, obs.Present) {
			return Outcome{Op: op, Delete: true, Recheck: recheck}
		}
		return Outcome{Op: enter(op, workerv1.RetirementSettling, "the members are gone; waiting for the Workload and the replica to be released", now), Recheck: recheck}
	case workerv1.RetirementSettling:
		if !obs.WorkloadPresent && !obs.ReplicaStanding {
			return Outcome{Clear: true, Event: name + " is retired: its members, Workload and quota are released"}
		}
		held := "the group's Workload is still on the API server"
		if !obs.WorkloadPresent {
			held = "the ModelReplica's delete has not landed"
		}
		if spent(op, b.Settle, now) {
			op.Reason = SettleExhausted + held
			return Outcome{Op: op, Recheck: recheck}
		}
		op.Reason = held
		return Outcome{Op: op, Recheck: until(op, b.Settle, now)}
	}
	return Outcome{Op: op}
}

// stepBeforeDeleting is a transition of Admitted, Disqualified, Withdrawing or Draining: nothing is
// deleted yet, so a target gone or declared again ends the operation, and a spent budget aborts it.
func stepBeforeDeleting(op workerv1.Retirement, obs Observation, now time.Time, b Budgets) Outcome {
	name := fmt.Sprintf("replica r%d of role %s", op.ReplicaOrdinal, op.RoleName)
	switch {
	case !allIn(op.TargetMemberUIDs, obs.Standing):
		return Outcome{Clear: true, Warning: true, Event: name + ": " + ReasonOutside}
	case obs.Declared:
		return Outcome{Clear: true, Event: name + " is declared again: its retirement is withdrawn and the replica stays"}
	}
	switch op.State {
	case workerv1.RetirementAdmitted:
		if len(obs.Labelled) > 0 {
			return hold(op, b.Withdrawal, now, "the members still carry the endpoint-eligibility label: "+strings.Join(obs.Labelled, ", "))
		}
		return Outcome{Op: move(op, workerv1.RetirementDisqualified, "no target member carries the endpoint-eligibility label")}
	case workerv1.RetirementDisqualified:
		if !obs.Selective {
			return Outcome{Op: move(op, workerv1.RetirementWithdrawing,
				"the role's Services do not select on endpoint eligibility: the members leave the endpoints as they are deleted, behind the preStop drain")}
		}
		if len(obs.Serving) > 0 {
			return hold(op, b.Withdrawal, now, "an EndpointSlice still serves "+strings.Join(obs.Serving, ", "))
		}
		return Outcome{Op: move(op, workerv1.RetirementWithdrawing, "no EndpointSlice serves a target member")}
	case workerv1.RetirementWithdrawing:
		return Outcome{Op: enter(op, workerv1.RetirementDraining, "reading the answering members' gauges", now)}
	case workerv1.RetirementDraining:
		switch {
		case !obs.Selective:
			return deleting(op, "the members were never withdrawn, so no read proves them idle; the preStop hook drains each as it is deleted", now)
		case obs.Drain.Idle:
			return deleting(op, "the answering members read idle twice", now)
		}
		return hold(op, b.Drain, now, obs.Drain.Held)
	}
	return Outcome{Op: op}
}

// hold keeps the operation where it is with why, or aborts it once the phase's budget is spent.
func hold(op workerv1.Retirement, budget time.Duration, now time.Time, why string) Outcome {
	if spent(op, budget, now) {
		op.State, op.Reason, op.Deadline = workerv1.RetirementAborted, why+Retained, metav1.NewTime(now)
		return Outcome{Op: op, Warning: true, Event: fmt.Sprintf("the retirement of replica r%d of role %s is aborted: %s", op.ReplicaOrdinal, op.RoleName, op.Reason)}
	}
	op.Reason = why
	return Outcome{Op: op, Recheck: until(op, budget, now)}
}

func deleting(op workerv1.Retirement, why string, now time.Time) Outcome {
	return Outcome{Op: enter(op, workerv1.RetirementDeleting, why, now), Delete: true, Recheck: recheck}
}

// move changes state within a phase; enter starts a phase, whose budget starts again.
func move(op workerv1.Retirement, to workerv1.RetirementState, why string) workerv1.Retirement {
	op.State, op.Reason = to, why
	return op
}

func enter(op workerv1.Retirement, to workerv1.RetirementState, why string, now time.Time) workerv1.Retirement {
	op = move(op, to, why)
	op.PhaseStartedAt = metav1.NewTime(now)
	return op
}

// phaseEnd is when the current phase's budget is spent.
func phaseEnd(op workerv1.Retirement, budget time.Duration) time.Time {
	end := op.PhaseStartedAt.Add(budget)
	if op.Deadline.Time.Before(end) {
		return op.Deadline.Time
	}
	return end
}

func spent(op workerv1.Retirement, budget time.Duration, now time.Time) bool {
	return !now.Before(phaseEnd(op, budget))
}

// until is the recheck interval, never past the phase's end.
func until(op workerv1.Retirement, budget time.Duration, now time.Time) time.Duration {
	return min(recheck, max(phaseEnd(op, budget).Sub(now), time.Millisecond))
}

func allIn(uids []string, in map[string]bool) bool {
	for _, u := range uids {
		if !in[u] {
			return false
		}
	}
	return true
}

func anyIn(uids []string, in map[string]bool) bool {
	for _, u := range uids {
		if in[u] {
			return true
		}
	}
	return false
}

// Directive is a parsed retry directive: <roleName>:<replicaOrdinal>:<opaqueToken>.
type Directive struct {
	Role    string
	Ordinal int32
	Token   string
}

// ParseDirective reads the retry annotation's value, or says what is wrong with it.
func ParseDirective(v string) (Directive, error) {
	parts := strings.Split(v, ":")
	if len(parts) != 3 {
		return Directive{}, fmt.Errorf("%s %q is not <roleName>:<replicaOrdinal>:<token> (exactly three parts separated by ':')", workerv1.AnnotationRetirementRetry, v)
	}
	ordinal, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || ordinal < 0 {
		return Directive{}, fmt.Errorf("%s %q: the replica ordinal %q is not a whole number from 0 up", workerv1.AnnotationRetirementRetry, v, parts[1])
	}
	if parts[0] == "" || parts[2] == "" {
		return Directive{}, fmt.Errorf("%s %q: the role name and the token must not be empty", workerv1.AnnotationRetirementRetry, v)
	}
	return Directive{Role: parts[0], Ordinal: int32(ordinal), Token: parts[2]}, nil
}

// Retry decides a retry directive against the deployment's operation (nil when none): accepted, the
// operation starts again from Admitted with fresh budgets and the token is consumed; a token
// already consumed only clears the annotation. A directive that matches no Aborted operation is
// refused with why, and the annotation is left for the person who wrote it to correct.
func Retry(op *workerv1.Retirement, d Directive, now time.Time, b Budgets) (next workerv1.Retirement, clearAnnotation bool, refused string) {
	switch {
	case op != nil && op.LastConsumedRetryToken == d.Token && op.RoleName == d.Role && op.ReplicaOrdinal == d.Ordinal:
		return *op, true, ""
	case op == nil || op.State != workerv1.RetirementAborted:
		return workerv1.Retirement{}, false, fmt.Sprintf("%s names replica r%d of role %s, but no retirement is aborted", workerv1.AnnotationRetirementRetry, d.Ordinal, d.Role)
	case op.RoleName != d.Role || op.ReplicaOrdinal != d.Ordinal:
		return workerv1.Retirement{}, false, fmt.Sprintf("%s names replica r%d of role %s, but the aborted retirement is replica r%d of role %s",
			workerv1.AnnotationRetirementRetry, d.Ordinal, d.Role, op.ReplicaOrdinal, op.RoleName)
	}
	next = *op
	at := metav1.NewTime(now)
	next.State, next.Reason, next.LastConsumedRetryToken = workerv1.RetirementAdmitted, ReasonRetry, d.Token
	next.StartedAt, next.PhaseStartedAt, next.Deadline = at, at, metav1.NewTime(now.Add(b.Whole))
	return next, true, ""
}
