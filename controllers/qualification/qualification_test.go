package qualification_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/qualification"
)

// member is a Pod of member index i, serving when serves, with a PodReady condition when ready is
// "True" or "False", labelled eligible when eligible.
func member(i string, serves bool, ready string, eligible bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "m" + i, Labels: map[string]string{workerv1.LabelMemberIndex: i},
		Annotations: map[string]string{"prometheus.io/scrape": "true"}}}
	if serves {
		p.Labels[workerv1.LabelServes] = "true"
	}
	if eligible {
		p.Labels[workerv1.LabelEndpointEligible] = "true"
	}
	if ready != "" {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionStatus(ready)}}
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestQualify has a row per rule of endpoint qualification as mdplane applies it.
func TestQualify(t *testing.T) {
	cases := []struct {
		rule    string
		replica qualification.Replica
		verdict string
		leg     string // the leg deciding the verdict, with its state
		state   string
		grant   []string
		revoke  []string
	}{
		{"a ready single member is qualified: GroupForward NotApplicable activates the grant",
			qualification.Replica{Size: 1, Members: []*corev1.Pod{member("0", true, "True", false)}},
			v1alpha1.QualificationQualified, qualification.LegGroupForward, v1alpha1.LegNotApplicable, []string{"m0"}, nil},
		{"a member reporting not ready fails MembersReady and revokes at once",
			qualification.Replica{Size: 1, Members: []*corev1.Pod{member("0", true, "False", true)}},
			v1alpha1.QualificationNotQualified, qualification.LegMembersReady, v1alpha1.LegFailed, nil, []string{"m0"}},
		{"a member short of the group fails MemberSetComplete",
			qualification.Replica{Size: 2, Members: []*corev1.Pod{member("0", true, "True", true)}},
			v1alpha1.QualificationNotQualified, qualification.LegMemberSetComplete, v1alpha1.LegFailed, nil, []string{"m0"}},
		{"no readiness observed yet: NotObserved, nothing granted",
			qualification.Replica{Size: 1, Members: []*corev1.Pod{member("0", true, "", false)}},
			v1alpha1.QualificationNotObserved, qualification.LegMembersReady, v1alpha1.LegUnknown, nil, nil},
		{"a ready multi-member replica is held Unsupported: no probe, no grant",
			qualification.Replica{Size: 2, Members: []*corev1.Pod{member("0", true, "True", false), member("1", true, "True", false)}},
			v1alpha1.QualificationUnsupported, qualification.LegGroupForward, v1alpha1.LegUnsupported, nil, nil},
		{"an Unknown leg keeps existing eligibility",
			qualification.Replica{Size: 2, Members: []*corev1.Pod{member("0", true, "True", true), member("1", true, "True", true)}},
			v1alpha1.QualificationUnsupported, qualification.LegGroupForward, v1alpha1.LegUnsupported, nil, nil},
		{"a definite fault still withdraws it from every member",
			qualification.Replica{Size: 2, Members: []*corev1.Pod{member("0", true, "True", true), member("1", true, "False", true)}},
			v1alpha1.QualificationNotQualified, qualification.LegMembersReady, v1alpha1.LegFailed, nil, []string{"m0", "m1"}},
		{"a replica condemned for replacement fails NoPendingReplacement",
			qualification.Replica{Size: 1, Condemned: true, Members: []*corev1.Pod{member("0", true, "True", true)}},
			v1alpha1.QualificationNotQualified, qualification.LegNoPendingReplacement, v1alpha1.LegFailed, nil, []string{"m0"}},
		{"a replica a retirement reserves fails NoPlannedRetirement and loses the label on every member",
			qualification.Replica{Size: 1, Retiring: true, Members: []*corev1.Pod{member("0", true, "True", true)}},
			v1alpha1.QualificationNotQualified, qualification.LegNoPlannedRetirement, v1alpha1.LegFailed, nil, []string{"m0"}},
		{"a leader-served replica labels its leader only",
			qualification.Replica{Size: 1, Members: []*corev1.Pod{member("0", true, "True", false)}},
			v1alpha1.QualificationQualified, qualification.LegNoPlannedRetirement, v1alpha1.LegVerified, []string{"m0"}, nil},
		{"a leader rendered before the serving label is the one labelled",
			qualification.Replica{Size: 1, Members: []*corev1.Pod{member("0", false, "True", false)}},
			v1alpha1.QualificationQualified, qualification.LegMembersReady, v1alpha1.LegVerified, []string{"m0"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			q := qualification.Qualify(tc.replica)
			assert.Equal(t, tc.verdict, q.Verdict)
			found := false
			for _, l := range q.Legs {
				if l.Type == tc.leg {
					found = true
					assert.Equal(t, tc.state, l.State, l.Reason)
				}
			}
			assert.True(t, found, "leg %s reported", tc.leg)
			changes := qualification.LabelChanges(q, tc.replica.Members)
			assert.Equal(t, tc.grant, names(changes.Grant))
			assert.Equal(t, tc.revoke, names(changes.Revoke))
		})
	}
}

func TestNonServingMemberNeverKeepsTheLabel(t *testing.T) {
	members := []*corev1.Pod{member("0", true, "True", true), member("1", false, "True", true)}
	q := qualification.Qualify(qualification.Replica{Size: 2, Members: members})
	assert.Equal(t, []string{"m1"}, names(qualification.LabelChanges(q, members).Revoke))
}

// TestATakeOverReplicaKeepsItsLegacyMembership: a take-over replica's leader carries the label
// whatever its verdict: a take-over replica keeps its legacy Service membership.
func TestATakeOverReplicaKeepsItsLegacyMembership(t *testing.T) {
	members := []*corev1.Pod{member("0", true, "False", false), member("1", false, "True", false)}
	for _, p := range members {
		delete(p.Annotations, "prometheus.io/scrape") // a take-over member has no scrape annotations
	}
	q := qualification.Qualify(qualification.Replica{Size: 2, Members: members})
	assert.Equal(t, v1alpha1.QualificationNotQualified, q.Verdict, "its qualification is still reported")
	changes := qualification.LabelChanges(q, members)
	assert.Equal(t, []string{"m0"}, names(changes.Grant))
	assert.Empty(t, changes.Revoke)

	t.Run("until a retirement reserves it", func(t *testing.T) {
		members[0].Labels[workerv1.LabelEndpointEligible] = "true"
		q := qualification.Qualify(qualification.Replica{Size: 2, Members: members, Retiring: true})
		assert.Equal(t, []string{"m0"}, names(qualification.LabelChanges(q, members).Revoke))
	})
}
