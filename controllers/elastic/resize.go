package elastic

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// unreachablePrefix opens the record's error when no connection reached the master.
const unreachablePrefix = "the engine is unreachable: "

// pollInterval is how soon a pass waiting on the engine (scaling, or its answer unknown) looks again.
const pollInterval = 15 * time.Second

// HoldMembers is the hold while a widening's new members are not all serving Ray.
const HoldMembers = "new members are not admitted, allocated and registered"

// deployment is what one resize pass reads of an elastic deployment.
type deployment struct {
	md   *workerv1.ModelDeployment
	want int
	// master is the standing ordinal-0 member, nil without one; head the Ray head's Pod.
	master, head *corev1.Pod
	// members are the standing members below the wanted width, by ordinal; serving how many of
	// them are admitted and Ready (a worker is Ready once it has joined Ray).
	members []corev1.Pod
	serving int
}

// newDeployment sorts an elastic deployment's Pods and replicas into what a resize pass reads.
func newDeployment(md *workerv1.ModelDeployment, role *workerv1.ModelDeploymentRole, roleReplicas []v1alpha1.ModelReplica, members, heads []corev1.Pod) deployment {
	d := deployment{md: md, want: int(role.ElasticEP.Width)}
	admitted := map[int]bool{}
	for _, r := range roleReplicas {
		if r.DeletionTimestamp == nil && ptr.Deref(r.Status.Admitted, false) {
			admitted[int(r.Spec.Ordinal)] = true
		}
	}
	for i := range members {
		p := members[i]
		ordinal, err := strconv.Atoi(p.Labels[workerv1.LabelPodOrdinal])
		if p.DeletionTimestamp != nil || err != nil || ordinal >= d.want {
			continue
		}
		if ordinal == 0 {
			d.master = &members[i]
		}
		d.members = append(d.members, p)
		if admitted[ordinal] && replicas.PodReady(&p) {
			d.serving++
		}
	}
	sort.Slice(d.members, func(i, j int) bool { return ordinalOf(d.members[i]) < ordinalOf(d.members[j]) })
	for i := range heads {
		if heads[i].DeletionTimestamp == nil {
			d.head = &heads[i]
		}
	}
	return d
}

func ordinalOf(p corev1.Pod) int {
	n, _ := strconv.Atoi(p.Labels[workerv1.LabelPodOrdinal])
	return n
}

// bootWidth is the data-parallel size the master booted with, 0 when it does not say.
func bootWidth(master *corev1.Pod) int {
	n, err := strconv.Atoi(master.Annotations[workerv1.AnnotationElasticBootWidth])
	if err != nil || n < 1 {
		return 0
	}
	return n
}

// engineWidth is the data-parallel size the master runs: the record's word for this master, else
// its boot width; 0 when unknown.
func engineWidth(master *corev1.Pod, rec *Operation) int {
	if n, ok := rec.EngineWidth(string(master.UID)); ok {
		return n
	}
	if rec != nil && rec.Master.UID == string(master.UID) {
		return 0 // in flight, or its answer was lost
	}
	return bootWidth(master)
}

// masterAddress is where the master's engine listens (its Pod IP and metrics port), or why the
// resize cannot be sent there.
func masterAddress(master *corev1.Pod) (string, string) {
	if master.Status.PodIP == "" {
		return "", "the master has no Pod IP yet"
	}
	if s := master.Annotations[workerv1.AnnotationScrapeScheme]; s != "" && s != "http" {
		return "", fmt.Sprintf("the master serves %s: the native resize is sent over http only", s)
	}
	port := master.Annotations[workerv1.AnnotationScrapePort]
	if port == "" {
		port = strconv.Itoa(engine.DefaultPort)
	}
	return net.JoinHostPort(master.Status.PodIP, port), ""
}

// passResult is what a resize pass leaves: the record as it stands (nil without one), the hold in
// words, and when to look again (0: on the next change).
type passResult struct {
	rec     *Operation
	hold    string
	requeue time.Duration
}

// resizer runs one resize pass; save writes the record, and must succeed before a command leaves.
type resizer struct {
	engine *Engine
	now    time.Time
	save   func(context.Context, *Operation) error
}

// pass moves the deployment's resize one step: it records a widening once the new members serve,
// sends the recorded command, and reads the engine's answer into the record.
func (z resizer) pass(ctx context.Context, d deployment, rec *Operation) (passResult, error) {
	if d.master == nil {
		return passResult{rec: rec, hold: "the master (ordinal 0) has no Pod yet"}, nil
	}
	addr, why := masterAddress(d.master)
	if rec != nil && rec.InFlight() && rec.Master.UID == string(d.master.UID) {
		if why != "" {
			return passResult{rec: rec, hold: why}, nil
		}
		return z.advance(ctx, addr, rec)
	}
	current := engineWidth(d.master, rec)
	switch {
	case current == 0:
		return passResult{rec: rec, hold: "the master's data-parallel size is not known: it carries no boot width and no applied resize"}, nil
	case current == d.want:
		return passResult{rec: rec}, nil
	case d.want < current:
		return passResult{rec: rec, hold: fmt.Sprintf("the engine runs %d data-parallel engines and the spec asks %d: a narrowing is not resized", current, d.want)}, nil
	case rec != nil && rec.State == StateAbandoned && rec.Master.UID == string(d.master.UID) && rec.Width.Target == d.want:
		return passResult{rec: rec, hold: fmt.Sprintf("the resize from %d to %d was abandoned; change the width, or delete ConfigMap %s to ask again",
			rec.Width.Old, rec.Width.Target, OperationName(string(d.md.UID)))}, nil
	case d.serving < d.want:
		return passResult{rec: rec, hold: fmt.Sprintf("%s: %d of %d members are admitted and Ready", HoldMembers, d.serving, d.want)}, nil
	case why != "":
		return passResult{rec: rec, hold: why}, nil
	}
	next := z.record(d, current)
	if err := z.save(ctx, next); err != nil {
		return passResult{rec: rec}, err
	}
	return z.advance(ctx, addr, next)
}

// record is a new operation from the engine's width to the spec's, before any request.
func (z resizer) record(d deployment, current int) *Operation {
	ref := func(p *corev1.Pod) PodRef {
		if p == nil {
			return PodRef{}
		}
		return PodRef{Name: p.Name, UID: string(p.UID)}
	}
	rec := &Operation{
		Name: d.md.Name, DeploymentUID: string(d.md.UID), Namespace: d.md.Namespace, Generation: d.md.Generation,
		Width: Widths{Old: current, Target: d.want}, Workers: []PodRef{}, Master: ref(d.master), Head: ref(d.head),
		State: StateRecorded, CommandIntent: ScaleCommand{NewDataParallelSize: d.want, DrainTimeout: DrainTimeoutSecs},
		ResourceVersion: d.md.ResourceVersion,
	}
	for i := range d.members {
		rec.Members = append(rec.Members, ref(&d.members[i]))
	}
	return rec
}

// advance moves an operation in flight: a command found sent is never sent again; a recorded one
// is sent once its backoff has passed and, on a retry, the engine says it is not scaling.
func (z resizer) advance(ctx context.Context, addr string, rec *Operation) (passResult, error) {
	if rec.State == StateCommandSent {
		return z.settleUnanswered(ctx, addr, rec)
	}
	if wait := z.backoffLeft(rec); wait > 0 {
		return passResult{rec: rec, requeue: wait}, nil
	}
	if rec.Attempts > 0 {
		scaling, err := z.engine.IsScaling(ctx, addr)
		if err != nil {
			return passResult{rec: rec, hold: "before asking again, the engine's scaling state: " + err.Error(), requeue: pollInterval}, nil
		}
		if scaling {
			return passResult{rec: rec, hold: "the engine is scaling: the command is asked again once it is not", requeue: pollInterval}, nil
		}
	}
	sent := *rec
	sent.State, sent.CommandSent, sent.LastAttemptTime = StateCommandSent, true, &metav1.Time{Time: z.now}
	if err := z.save(ctx, &sent); err != nil {
		return passResult{rec: rec}, err
	}
	out := z.engine.Scale(ctx, addr, sent.CommandIntent)
	next := answered(sent, out, z.now)
	if err := z.save(ctx, &next); err != nil {
		return passResult{rec: &sent}, err
	}
	return passResult{rec: &next, requeue: z.backoffLeft(&next)}, nil
}

// answered is the record after the engine's answer.
func answered(rec Operation, out Outcome, now time.Time) Operation {
	switch out.Answer {
	case Applied:
		rec.State, rec.Message, rec.LastError, rec.NextAttemptTime = StateCompleted, out.Detail, "", nil
	case Refused:
		rec.Attempts++
		rec.State, rec.CommandSent, rec.LastError = StateRecorded, false, out.Detail
		rec.NextAttemptTime = &metav1.Time{Time: now.Add(Backoff(rec.Attempts))}
		if rec.Attempts >= MaxAttempts {
			rec.State, rec.NextAttemptTime = StateAbandoned, nil
		}
	case Unreachable:
		rec.Unreachable++
		rec.State, rec.CommandSent, rec.LastError = StateRecorded, false, unreachablePrefix+out.Detail
		rec.NextAttemptTime = &metav1.Time{Time: now.Add(Backoff(rec.Unreachable))}
	case Lost:
		rec.LastError = "the answer was lost: " + out.Detail
	}
	return rec
}

// settleUnanswered ends a command whose answer is unknown once the engine says it is not scaling:
// whether it was applied cannot be told, so it is not sent again.
func (z resizer) settleUnanswered(ctx context.Context, addr string, rec *Operation) (passResult, error) {
	scaling, err := z.engine.IsScaling(ctx, addr)
	if err != nil || scaling {
		hold := "the resize command was sent and its answer is not in: waiting until the engine says it is not scaling"
		if err != nil {
			hold += " (" + err.Error() + ")"
		}
		return passResult{rec: rec, hold: hold, requeue: pollInterval}, nil
	}
	next := *rec
	next.State, next.AnswerLost = StateAbandoned, true
	if next.LastError == "" {
		next.LastError = "the answer was lost: the controller stopped while the command was in flight"
	}
	if err := z.save(ctx, &next); err != nil {
		return passResult{rec: rec}, err
	}
	return passResult{rec: &next}, nil
}

// backoffLeft is how long a refused or unreachable command still waits before it is sent again.
func (z resizer) backoffLeft(rec *Operation) time.Duration {
	if rec.State != StateRecorded || rec.NextAttemptTime == nil {
		return 0
	}
	return max(0, rec.NextAttemptTime.Sub(z.now))
}
