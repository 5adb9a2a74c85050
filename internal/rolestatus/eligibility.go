package rolestatus

import (
	"fmt"
	"sort"
	"strings"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
)

// The reasons of the deployment's EndpointEligibility condition. Only
// NotObserved and EndpointsQualified are confirmed upstream; the other three are spelled as their
// Go constants are named.
const (
	EligibilityConditionType = "EndpointEligibility"
	EligibilityNotObserved   = "NotObserved"
	EligibilityQualified     = "EndpointsQualified"
	EligibilityRevoked       = "EndpointsRevoked"
	EligibilityUnsupported   = "EndpointsUnsupported"
	EligibilityHeld          = "EndpointsHeldUnverified"
)

// eligibilityRank orders the reasons by precedence: a revoked instance decides the condition over
// an unsupported one, that over a held one, that over one not observed yet.
var eligibilityRank = map[string]int{EligibilityQualified: 0, EligibilityNotObserved: 1, EligibilityHeld: 2, EligibilityUnsupported: 3, EligibilityRevoked: 4}

// RoleEligibility aggregates a role's instances' qualifications (nil where an instance reported none):
// the qualified instances, counted only when every instance is conclusive; the role's reason; and
// whether its Services may select on the eligibility label (every instance conclusive, one qualified
// and every qualified one labelled).
func RoleEligibility(instances []*v1alpha1.Qualification) (eligible *int32, reason string, active bool) {
	var qualified int32
	conclusive, granted, observed := true, true, false
	reason = EligibilityQualified
	for _, q := range instances {
		verdict := v1alpha1.QualificationNotObserved
		if q != nil {
			verdict = q.Verdict
		}
		r := EligibilityHeld
		switch verdict {
		case v1alpha1.QualificationQualified:
			qualified++
			granted = granted && q.Granted
			r = EligibilityQualified
		case v1alpha1.QualificationNotQualified:
			r = EligibilityRevoked
		case v1alpha1.QualificationUnsupported:
			r = EligibilityUnsupported
		case v1alpha1.QualificationNotObserved:
			r = EligibilityNotObserved
		}
		conclusive = conclusive && (r == EligibilityQualified || r == EligibilityRevoked)
		observed = observed || r != EligibilityNotObserved
		if eligibilityRank[r] > eligibilityRank[reason] {
			reason = r
		}
	}
	if reason == EligibilityNotObserved && observed {
		reason = EligibilityHeld // some instance reported readiness, another not yet: held
	}
	if !conclusive {
		return nil, reason, false
	}
	return &qualified, reason, qualified > 0 && granted
}

// EligibilityCondition is the deployment's EndpointEligibility condition from its roles' reasons
// (a role not reported yet counts as not observed).
func EligibilityCondition(roles map[string]string) Condition {
	reason, observed := EligibilityQualified, false
	var by []string
	for name, r := range roles {
		if r == "" {
			r = EligibilityNotObserved
		}
		observed = observed || r != EligibilityNotObserved
		if r != EligibilityQualified {
			by = append(by, name+" "+r)
		}
		if eligibilityRank[r] > eligibilityRank[reason] {
			reason = r
		}
	}
	if reason == EligibilityNotObserved && observed {
		reason = EligibilityHeld
	}
	sort.Strings(by)
	detail := strings.Join(by, ", ")
	switch reason {
	case EligibilityQualified:
		return Condition{"True", reason, "every replica is qualified to take traffic"}
	case EligibilityRevoked:
		return Condition{"False", reason, fmt.Sprintf("a replica is conclusively not qualified and takes no traffic (%s); status.roles[].endpoints.eligible counts the qualified ones", detail)}
	case EligibilityUnsupported:
		return Condition{"Unknown", reason, fmt.Sprintf("a multi-member replica is held: no group-forward probe can be sent to it (a Prefill or Decode role, a take-over, or an engine version the probe cannot read) (%s)", detail)}
	case EligibilityHeld:
		return Condition{"Unknown", reason, fmt.Sprintf("a replica is held on an unverified check (%s)", detail)}
	}
	return Condition{"Unknown", EligibilityNotObserved, "no replica has reported any readiness yet"}
}
