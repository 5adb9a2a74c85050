package admissioncheck

import (
	"cmp"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/workload"
)

// observed is what one reconcile reads: a lone Workload no deployment claims, or a deployment, its
// set and the set's Workloads by name.
type observed struct {
	// podsUnseen: a Workload owned by Pods the cache does not show yet, judged once it does.
	podsUnseen bool
	lone       *kueue.Workload
	deployment *workerv1.ModelDeployment
	set        Set
	members    map[string]*kueue.Workload
}

// plan is what one reconcile does: the writes in order, then the metrics and the event.
type plan struct {
	writes       []write
	log          string
	parked       bool
	admitted     bool
	waited       *time.Duration // first reservation to the set's admission, when known
	event        *event
	requeueAfter time.Duration
}

// write is one write of a plan: the check's state on a Workload, or its activation (with the
// generation a parked set was parked at).
type write struct {
	workload         *kueue.Workload
	check            *kueue.AdmissionCheckState
	active           *bool
	parkedGeneration string
}

// event is the event a plan reports on the deployment.
type event struct {
	eventType, reason, action, message string
}

// decide turns what a reconcile observed into its plan, at now.
func decide(o observed, now time.Time, parkAfter time.Duration) plan {
	if o.deployment == nil {
		return plan{writes: checkWrites(now, []*kueue.Workload{o.lone}, kueue.CheckStateReady,
			"not a ModelDeployment replica group; nothing to hold it for", false)}
	}
	members := slices.Collect(maps.Values(o.members))
	slices.SortFunc(members, func(a, b *kueue.Workload) int { return cmp.Compare(a.Name, b.Name) })
	generation := strconv.FormatInt(o.deployment.Generation, 10)
	if parked := parkedAt(members); parked != "" {
		return unpark(members, parked == generation)
	}
	v := Judge(o.set, CheckName, now, parkAfter)
	if v.Park {
		return park(members, v, generation, now)
	}
	return hold(members, v, now)
}

// parkedAt returns the deployment generation a set was parked at, or "".
func parkedAt(members []*kueue.Workload) string {
	for _, m := range members {
		if g := m.Annotations[workerv1.AnnotationParkedGeneration]; g != "" {
			return g
		}
	}
	return ""
}

// unpark queues a parked set again once its deployment has been edited since it was parked: only
// the members parking deactivated, so a serving member is not written.
func unpark(members []*kueue.Workload, unedited bool) plan {
	if unedited {
		return plan{}
	}
	p := plan{log: "deployment edited; queueing its parked set again"}
	for _, m := range members {
		if m.Annotations[workerv1.AnnotationParkedGeneration] != "" {
			p.writes = append(p.writes, activationWrites(m, true, "")...)
		}
	}
	return p
}

// park deactivates every member not admitted, recording the generation, after giving those that
// carry the check the parked message. An admitted member keeps its Ready check and stays active: a
// scale-up or a replacement that cannot fit must not take down the replicas already serving.
func park(members []*kueue.Workload, v Verdict, generation string, now time.Time) plan {
	p := plan{parked: true, event: &event{corev1.EventTypeWarning, "ReplicaSetParked", "Park", v.Message}}
	for _, m := range slices.DeleteFunc(slices.Clone(members), admittedMember) {
		p.writes = append(p.writes, checkWrites(now, []*kueue.Workload{m}, kueue.CheckStatePending, v.Message, true)...)
		p.writes = append(p.writes, activationWrites(m, false, generation)...)
	}
	return p
}

// hold writes the verdict on every member that carries the check and is not admitted yet; the set
// turning Ready is counted and reported once, and a waiting set is looked at again when it would be
// parked. An admitted member keeps its Ready check: a replacement or a new replica joining the set
// leaves every surviving replica's admission untouched (and rewriting it would cost a write per
// member on each change of the set).
func hold(members []*kueue.Workload, v Verdict, now time.Time) plan {
	waiting := slices.DeleteFunc(slices.Clone(members), admittedMember)
	var due time.Duration
	if v.State == kueue.CheckStatePending {
		waiting, due = toldOfWait(members, waiting, now)
	}
	p := plan{writes: checkWrites(now, waiting, v.State, v.Message, true), requeueAfter: v.ParkIn}
	if due > 0 && (p.requeueAfter == 0 || due < p.requeueAfter) {
		p.requeueAfter = due
	}
	for _, m := range members {
		if s := CheckState(m, CheckName); s != nil && v.Admitted && s.State != kueue.CheckStateReady {
			p.admitted = true
		}
	}
	if p.admitted {
		p.event = &event{corev1.EventTypeNormal, "ReplicaSetAdmitted", "Admit", v.Message}
		if !v.FirstReserved.IsZero() {
			p.waited = ptr.To(now.Sub(v.FirstReserved))
		}
	}
	return p
}

// waitSettle is how long a set stands still before its waiting members are told why they wait, and
// waitLimit how long a member waits before it is told even while its set moves. A set coming up
// builds a Workload or reserves quota every few milliseconds until its last group reserves and the
// whole set turns Ready: told on the way, each member would get the assembling message, then the
// lacking one, then Ready, three writes where Ready alone says it all (the deployment's conditions
// carry the live counts meanwhile). A set that stops moving (a group Kueue cannot build, quota that
// runs out) is told within waitSettle.
const (
	waitSettle = 5 * time.Second
	waitLimit  = 2 * time.Minute
)

// toldOfWait keeps the waiting members that may be told of the set's wait now: every one once the
// set has stood still waitSettle (no member's Workload built, no member's quota reserved since),
// else those whose Workload has stood waitLimit. Both are read from the Workloads' own timestamps,
// so a restarted controller tells no sooner and no later. due is when the next may be told (0: none
// waits).
func toldOfWait(members, waiting []*kueue.Workload, now time.Time) (tell []*kueue.Workload, due time.Duration) {
	later := func(at time.Time) bool {
		if left := at.Sub(now); left > 0 {
			if due == 0 || left < due {
				due = left
			}
			return true
		}
		return false
	}
	if !later(lastMoved(members).Add(waitSettle)) {
		return waiting, 0
	}
	for _, m := range waiting {
		if !later(m.CreationTimestamp.Add(waitLimit)) {
			tell = append(tell, m)
		}
	}
	return tell, due
}

// lastMoved is when a set last moved: the latest of its members' Workloads built and quota reserved.
func lastMoved(members []*kueue.Workload) time.Time {
	var last time.Time
	for _, m := range members {
		last = latestOf(last, m.CreationTimestamp.Time)
		if since, ok := workload.QuotaReservedSince(m); ok {
			last = latestOf(last, since)
		}
	}
	return last
}

// admittedMember reports whether Kueue admitted a member with this check Ready: it is serving.
func admittedMember(m *kueue.Workload) bool {
	s := CheckState(m, CheckName)
	return s != nil && s.State == kueue.CheckStateReady && workload.Admitted(m)
}

// activationWrites is the activation a Workload gets, with the generation it is parked at ("" : not
// parked). An unchanged activation writes nothing.
func activationWrites(wl *kueue.Workload, active bool, parkedGeneration string) []write {
	if ptr.Deref(wl.Spec.Active, true) == active && wl.Annotations[workerv1.AnnotationParkedGeneration] == parkedGeneration {
		return nil
	}
	return []write{{workload: wl, active: ptr.To(active), parkedGeneration: parkedGeneration}}
}

// checkWrites is the check state each Workload gets (only those carrying the check when
// onlyCarriers), keeping the transition time while the state holds. An unchanged state writes
// nothing, and neither does a wait of the same kind whose counts moved (sameWait).
func checkWrites(now time.Time, wls []*kueue.Workload, state kueue.CheckState, message string, onlyCarriers bool) []write {
	var out []write
	for _, wl := range wls {
		cur := CheckState(wl, CheckName)
		if (cur == nil && onlyCarriers) || (cur != nil && cur.State == state && sameWait(cur.Message, message)) {
			continue
		}
		next := kueue.AdmissionCheckState{Name: CheckName, State: state, Message: message, LastTransitionTime: metav1.NewTime(now)}
		if cur != nil && cur.State == state {
			next.LastTransitionTime = cur.LastTransitionTime
		}
		out = append(out, write{workload: wl, check: &next})
	}
	return out
}

// sameWait reports whether two verdict messages tell the same kind of wait (assembling, lacking
// quota, parked, Ready), counts aside. A waiting member's message is written when its wait changes
// in kind, not at each count: a set of 500 groups assembling is judged many times, and rewriting
// every waiting member's count at each judgment cost 12 writes per Workload at 500 × 2. The
// deployment's status carries the live counts.
func sameWait(a, b string) bool {
	digitless := func(s string) string {
		return strings.Map(func(r rune) rune {
			if unicode.IsDigit(r) {
				return -1
			}
			return r
		}, s)
	}
	return a == b || digitless(a) == digitless(b)
}
