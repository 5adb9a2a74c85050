package rolestatus_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/rolestatus"
)

func TestRoleEligibility(t *testing.T) {
	q := func(verdict string, granted bool) *v1alpha1.Qualification {
		return &v1alpha1.Qualification{Verdict: verdict, Granted: granted}
	}
	qualified, revoked := q(v1alpha1.QualificationQualified, true), q(v1alpha1.QualificationNotQualified, false)
	cases := []struct {
		rule      string
		instances []*v1alpha1.Qualification
		eligible  *int32
		reason    string
		active    bool
	}{
		{"eligible counts qualified replica groups once every replica is conclusive",
			[]*v1alpha1.Qualification{qualified, revoked}, ptr.To[int32](1), rolestatus.EligibilityRevoked, true},
		{"an explicit 0 when every replica is conclusively unqualified",
			[]*v1alpha1.Qualification{revoked, revoked}, ptr.To[int32](0), rolestatus.EligibilityRevoked, false},
		{"nil while any replica is inconclusive",
			[]*v1alpha1.Qualification{qualified, q(v1alpha1.QualificationUnsupported, false)}, nil, rolestatus.EligibilityUnsupported, false},
		{"a replica reporting nothing is not observed",
			[]*v1alpha1.Qualification{nil}, nil, rolestatus.EligibilityNotObserved, false},
		{"one replica observed beside one not observed yet is held",
			[]*v1alpha1.Qualification{qualified, nil}, nil, rolestatus.EligibilityHeld, false},
		{"activation waits for the label on every qualified replica",
			[]*v1alpha1.Qualification{qualified, q(v1alpha1.QualificationQualified, false)}, ptr.To[int32](2), rolestatus.EligibilityQualified, false},
		{"every replica qualified and labelled activates the role",
			[]*v1alpha1.Qualification{qualified, qualified}, ptr.To[int32](2), rolestatus.EligibilityQualified, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			eligible, reason, active := rolestatus.RoleEligibility(tc.instances)
			assert.Equal(t, tc.eligible, eligible)
			assert.Equal(t, tc.reason, reason)
			assert.Equal(t, tc.active, active)
		})
	}
}

func TestEligibilityCondition(t *testing.T) {
	cases := []struct {
		rule           string
		roles          map[string]string
		status, reason string
	}{
		{"NotObserved while no replica has reported readiness", map[string]string{"a": "", "b": "NotObserved"}, "Unknown", "NotObserved"},
		{"EndpointsQualified when every replica is qualified", map[string]string{"a": "EndpointsQualified"}, "True", "EndpointsQualified"},
		{"EndpointsRevoked when some replica is conclusively not qualified",
			map[string]string{"a": "EndpointsQualified", "b": "EndpointsRevoked", "c": "EndpointsUnsupported"}, "False", "EndpointsRevoked"},
		{"EndpointsUnsupported when a replica is held on group-forward",
			map[string]string{"a": "EndpointsHeldUnverified", "b": "EndpointsUnsupported"}, "Unknown", "EndpointsUnsupported"},
		{"EndpointsHeldUnverified when a replica is held on an Unknown leg", map[string]string{"a": "EndpointsQualified", "b": ""}, "Unknown", "EndpointsHeldUnverified"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := rolestatus.EligibilityCondition(tc.roles)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
		})
	}
}
