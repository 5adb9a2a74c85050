package qualification

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The legs of a qualification, in the order they are reported.
const (
	LegMemberSetComplete    = "MemberSetComplete"
	LegMembersReady         = "MembersReady"
	LegGroupForward         = "GroupForward"
	LegNoPlannedRetirement  = "NoPlannedRetirement"
	LegNoPendingReplacement = "NoPendingReplacement"
)

// Replica is what qualifying one instance reads.
type Replica struct {
	// Size is the member count the replica's revision declares; 0 when unreadable.
	Size int32
	// Members are the replica's Pods on the API server.
	Members []*corev1.Pod
	// Condemned is true when the rollout has chosen the replica for replacement.
	Condemned bool
	// Retiring is true when a retirement operation reserves the replica.
	Retiring bool
	// GroupForward is a multi-member replica's group-forward leg, as its probe or the reason it
	// cannot be probed decides it; nil is Unsupported.
	GroupForward *v1alpha1.QualificationLeg
}

// Qualify decides an instance's legs and verdict. Every leg Verified (GroupForward also
// NotApplicable) qualifies; a Failed leg disqualifies; anything else holds.
func Qualify(r Replica) v1alpha1.Qualification {
	legs := []v1alpha1.QualificationLeg{
		memberSetComplete(r),
		membersReady(r),
		groupForward(r),
		noPlannedRetirement(r),
		noPendingReplacement(r),
	}
	q := v1alpha1.Qualification{Verdict: v1alpha1.QualificationQualified, Legs: legs}
	observed := false
	for _, p := range standing(r.Members) {
		observed = observed || Readiness(p) != corev1.ConditionUnknown
	}
	var failed, unsupported, unknown bool
	for _, l := range legs {
		switch l.State {
		case v1alpha1.LegVerified, v1alpha1.LegNotApplicable:
		case v1alpha1.LegFailed:
			failed = true
		case v1alpha1.LegUnsupported:
			unsupported = true
		default: // Unknown, or a state not read: it holds
			unknown = true
		}
	}
	switch {
	case !observed && !r.Condemned && !r.Retiring:
		q.Verdict = v1alpha1.QualificationNotObserved
	case failed:
		q.Verdict = v1alpha1.QualificationNotQualified
	case unsupported:
		q.Verdict = v1alpha1.QualificationUnsupported
	case unknown:
		q.Verdict = v1alpha1.QualificationHeld
	}
	return q
}

func memberSetComplete(r Replica) v1alpha1.QualificationLeg {
	l := v1alpha1.QualificationLeg{Type: LegMemberSetComplete, State: v1alpha1.LegVerified}
	n := int32(len(standing(r.Members)))
	switch {
	case r.Size < 1:
		l.State, l.Reason = v1alpha1.LegUnknown, "the replica's size is unreadable"
	case n < r.Size:
		l.State, l.Reason = v1alpha1.LegFailed, fmt.Sprintf("%d of %d members exist", n, r.Size)
	}
	return l
}

func membersReady(r Replica) v1alpha1.QualificationLeg {
	l := v1alpha1.QualificationLeg{Type: LegMembersReady, State: v1alpha1.LegVerified}
	members := standing(r.Members)
	var notReady, unknown int
	for _, p := range members {
		switch Readiness(p) {
		case corev1.ConditionFalse:
			notReady++
		case corev1.ConditionUnknown:
			unknown++
		}
	}
	switch {
	case notReady > 0:
		l.State, l.Reason = v1alpha1.LegFailed, fmt.Sprintf("%d of %d members report not ready", notReady, len(members))
	case unknown > 0 || len(members) == 0:
		l.State, l.Reason = v1alpha1.LegUnknown, fmt.Sprintf("%d of %d members report no readiness yet", unknown, len(members))
	}
	return l
}

// groupForward: a single member needs no forwarding check; a multi-member replica's leg is its
// probe's, Unsupported where none can be sent.
func groupForward(r Replica) v1alpha1.QualificationLeg {
	switch {
	case r.Size == 1:
		return v1alpha1.QualificationLeg{Type: LegGroupForward, State: v1alpha1.LegNotApplicable}
	case r.GroupForward != nil:
		return *r.GroupForward
	}
	return v1alpha1.QualificationLeg{Type: LegGroupForward, State: v1alpha1.LegUnsupported, Reason: "no group-forward probe can be sent"}
}

// Probeable reports whether a multi-member replica waits on its group-forward probe alone: every
// member exists and is Ready, and the rollout has not condemned it.
func Probeable(r Replica) bool {
	q := Qualify(r)
	for _, l := range q.Legs {
		if l.Type != LegGroupForward && l.State != v1alpha1.LegVerified {
			return false
		}
	}
	return r.Size > 1
}

func noPlannedRetirement(r Replica) v1alpha1.QualificationLeg {
	if r.Retiring {
		return v1alpha1.QualificationLeg{Type: LegNoPlannedRetirement, State: v1alpha1.LegFailed, Reason: "reserved by a retirement operation"}
	}
	return v1alpha1.QualificationLeg{Type: LegNoPlannedRetirement, State: v1alpha1.LegVerified}
}

func noPendingReplacement(r Replica) v1alpha1.QualificationLeg {
	if r.Condemned {
		return v1alpha1.QualificationLeg{Type: LegNoPendingReplacement, State: v1alpha1.LegFailed, Reason: "condemned for replacement by the rollout"}
	}
	return v1alpha1.QualificationLeg{Type: LegNoPendingReplacement, State: v1alpha1.LegVerified}
}

// Labels are the eligibility label changes one instance needs: the members to label and those to
// unlabel, by name.
type Labels struct {
	Grant, Revoke []*corev1.Pod
}

// LabelChanges decides the eligibility label of an instance's members from its verdict: a qualified
// instance grants it to its serving members (restoring requires activation, which Qualified
// implies: GroupForward Verified or NotApplicable); a disqualified one loses it on every member at
// once; a held or unobserved one keeps what it has. A member that does not serve never keeps it. A
// take-over instance keeps its legacy Service membership: its leader carries the label whatever its
// verdict, so a Service selecting on it still reaches the leader, and the Service's own readiness
// rule decides.
func LabelChanges(q v1alpha1.Qualification, members []*corev1.Pod) Labels {
	var l Labels
	serving := Serving(members)
	// A take-over leader keeps its label until a retirement reserves it: leaving is a definite fault.
	legacy := TakesOver(members) && !LegFailed(q, LegNoPlannedRetirement)
	for _, p := range members {
		has := p.Labels[workerv1.LabelEndpointEligible] == "true"
		serves := serving[p]
		switch {
		case legacy && serves:
			if !has {
				l.Grant = append(l.Grant, p)
			}
		case has && (!serves || q.Verdict == v1alpha1.QualificationNotQualified):
			l.Revoke = append(l.Revoke, p)
		case !has && serves && q.Verdict == v1alpha1.QualificationQualified:
			l.Grant = append(l.Grant, p)
		}
	}
	return l
}

// LegFailed reports whether the qualification's leg of the type failed.
func LegFailed(q v1alpha1.Qualification, leg string) bool {
	for _, l := range q.Legs {
		if l.Type == leg && l.State == v1alpha1.LegFailed {
			return true
		}
	}
	return false
}

// TakesOver reports whether an instance's members run a take-over command line: the render gives a
// managed member the engine's scrape annotations and a take-over member none (every render version).
func TakesOver(members []*corev1.Pod) bool {
	for _, p := range members {
		if _, managed := p.Annotations[workerv1.AnnotationScrape]; managed {
			return false
		}
	}
	return len(members) > 0
}

// Serving are the members of an instance that serve traffic: those its revision labels to serve,
// or, for an instance rendered before the serving label (render version 3 and older), its leader.
func Serving(members []*corev1.Pod) map[*corev1.Pod]bool {
	out := map[*corev1.Pod]bool{}
	for _, p := range members {
		if p.Labels[workerv1.LabelServes] == "true" {
			out[p] = true
		}
	}
	if len(out) == 0 {
		for _, p := range members {
			if p.Labels[workerv1.LabelMemberIndex] == "0" {
				out[p] = true
			}
		}
	}
	return out
}

// standing are the members not being deleted.
func standing(pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// Readiness is a member's PodReady condition, Unknown while it reports none.
func Readiness(p *corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}
