package queues

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/settings"
)

// TestPreemptionSetting: instance-type-preemption is each type's ClusterQueue's preemption within
// the queue; a cohort adds the reclaim of what the queue lent; by default a queue preempts nothing.
func TestPreemptionSetting(t *testing.T) {
	cases := []struct {
		rule            string
		data            map[string]any
		none            bool
		within, reclaim kueue.PreemptionPolicy
	}{
		{rule: "by default a queue preempts nothing", none: true},
		{rule: "Never written out is the default", data: map[string]any{settings.InstanceTypePreemption: "Never"}, none: true},
		{rule: "LowerPriority lets a deployment preempt the groups of a lower priority in its queue",
			data: map[string]any{settings.InstanceTypePreemption: "LowerPriority"}, within: kueue.PreemptionPolicyLowerPriority},
		{rule: "LowerOrNewerEqualPriority also preempts the newer groups of its own priority",
			data: map[string]any{settings.InstanceTypePreemption: "LowerOrNewerEqualPriority"}, within: kueue.PreemptionPolicyLowerOrNewerEqualPriority},
		{rule: "in a cohort the queue also takes back what it lent",
			data:   map[string]any{settings.InstanceTypePreemption: "LowerPriority", settings.InstanceTypeCohort: "gpus"},
			within: kueue.PreemptionPolicyLowerPriority, reclaim: kueue.PreemptionPolicyAny},
		{rule: "near miss: a cohort alone reclaims but preempts nothing within the queue",
			data: map[string]any{settings.InstanceTypeCohort: "gpus"}, reclaim: kueue.PreemptionPolicyAny},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cq := queueUnder(t, c.data)
			if c.none {
				assert.Nil(t, cq.Spec.Preemption)
				return
			}
			require.NotNil(t, cq.Spec.Preemption)
			assert.Equal(t, c.within, cq.Spec.Preemption.WithinClusterQueue)
			assert.Equal(t, c.reclaim, cq.Spec.Preemption.ReclaimWithinCohort)
		})
	}
}
