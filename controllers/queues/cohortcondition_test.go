package queues_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/controllers/queues"
)

// TestCohortCondition: a type in a cohort says what the cohort's other queues borrow on its flavor
// and what its own queue borrows; near misses: outside a cohort there is no condition, and another
// flavor's borrowing is not the type's lending.
func TestCohortCondition(t *testing.T) {
	usage := func(flavor string, borrowed map[string]string) []kueue.FlavorUsage {
		u := kueue.FlavorUsage{Name: kueue.ResourceFlavorReference(flavor)}
		for name, q := range borrowed {
			u.Resources = append(u.Resources, kueue.ResourceUsage{Name: corev1.ResourceName(name), Total: resource.MustParse(q), Borrowed: resource.MustParse(q)})
		}
		return []kueue.FlavorUsage{u}
	}
	own := func(cohort string, borrowed map[string]string) *kueue.ClusterQueue {
		cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: kueue.ClusterQueueSpec{CohortName: kueue.CohortReference(cohort),
			ResourceGroups: []kueue.ResourceGroup{{Flavors: []kueue.FlavorQuotas{{Name: "h100"}}}}}}
		cq.Status.FlavorsUsage = usage("h100", borrowed)
		return cq
	}
	member := func(flavor string, borrowed map[string]string) kueue.ClusterQueue {
		return kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "batch"}, Status: kueue.ClusterQueueStatus{FlavorsUsage: usage(flavor, borrowed)}}
	}
	for _, row := range []struct {
		rule    string
		own     *kueue.ClusterQueue
		members []kueue.ClusterQueue
		want    *metav1.Condition
	}{
		{"another queue borrowing on the type's flavor is the type lending", own("pool", nil),
			[]kueue.ClusterQueue{member("h100", map[string]string{"nvidia.com/gpu": "4", "cpu": "1"})},
			&metav1.Condition{Type: "Cohort", Status: "True", Reason: "Lending",
				Message: "in cohort pool: lends 4 nvidia.com/gpu, 1 cpu of its quota to other queues, which it takes back by preemption when a deployment needs it"}},
		{"the type's own queue borrowing is the type borrowing", own("pool", map[string]string{"nvidia.com/gpu": "2"}), nil,
			&metav1.Condition{Type: "Cohort", Status: "True", Reason: "Borrowing",
				Message: "in cohort pool: borrows 2 nvidia.com/gpu beyond its own quota: the replicas admitted on it are preempted when a lender takes it back"}},
		{"near miss: another flavor's borrowing is not the type's lending", own("pool", nil),
			[]kueue.ClusterQueue{member("a100", map[string]string{"nvidia.com/gpu": "4"})},
			&metav1.Condition{Type: "Cohort", Status: "False", Reason: "OwnQuota", Message: "in cohort pool: neither lends nor borrows quota"}},
		{"near miss: outside a cohort there is no condition", own("", map[string]string{"nvidia.com/gpu": "2"}), nil, nil},
	} {
		t.Run(row.rule, func(t *testing.T) {
			assert.Equal(t, row.want, queues.CohortCondition(row.own, row.members))
		})
	}
}
