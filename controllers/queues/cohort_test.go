package queues

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/settings"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// TestCohortSettings: the Settings put every type's ClusterQueue in one cohort, with each quota's
// lending and borrowing limits a share of its nominal quota, and a queue in a cohort takes back what
// it lends by preemption.
func TestCohortSettings(t *testing.T) {
	type limits struct{ lending, borrowing *string } // of nvidia.com/gpu, memory; nil: none
	cases := []struct {
		rule      string
		data      map[string]any
		cohort    string
		gpu, ram  limits
		reclaimed bool
	}{
		{rule: "without a cohort a queue has neither limit nor preemption, whatever the limits say",
			data: map[string]any{settings.InstanceTypeLendingLimit: "50%"}},
		{rule: "in a cohort, a queue lends all of its quota and borrows none by default",
			data: map[string]any{settings.InstanceTypeCohort: "gpus"}, cohort: "gpus",
			gpu: limits{borrowing: ptr.To("0")}, ram: limits{borrowing: ptr.To("0")}, reclaimed: true},
		{rule: "the limits are shares of each quota, rounded down to a whole unit",
			data:   map[string]any{settings.InstanceTypeCohort: "gpus", settings.InstanceTypeLendingLimit: "30%", settings.InstanceTypeBorrowingLimit: "100%"},
			cohort: "gpus", gpu: limits{lending: ptr.To("4"), borrowing: ptr.To("16")},
			ram: limits{lending: ptr.To("164926744166"), borrowing: ptr.To("512Gi")}, reclaimed: true},
		{rule: "a blank borrowing limit lets the queue borrow without limit",
			data: map[string]any{settings.InstanceTypeCohort: "gpus", settings.InstanceTypeBorrowingLimit: ""}, cohort: "gpus", reclaimed: true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			cq := queueUnder(t, c.data)
			assert.Equal(t, c.cohort, string(cq.Spec.CohortName))
			quotas := map[corev1.ResourceName]kueue.ResourceQuota{}
			for _, q := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
				quotas[q.Name] = q
			}
			for name, want := range map[corev1.ResourceName]limits{"nvidia.com/gpu": c.gpu, corev1.ResourceMemory: c.ram} {
				assert.Equal(t, quantity(want.lending), text(quotas[name].LendingLimit), "%s lending limit", name)
				assert.Equal(t, quantity(want.borrowing), text(quotas[name].BorrowingLimit), "%s borrowing limit", name)
			}
			reclaims := cq.Spec.Preemption != nil && cq.Spec.Preemption.ReclaimWithinCohort == kueue.PreemptionPolicyAny
			assert.Equal(t, c.reclaimed, reclaims, "reclaims within the cohort")
		})
	}
}

// quantity is s in Kubernetes' canonical spelling, "" for nil.
func quantity(s *string) string {
	if s == nil {
		return ""
	}
	q := resource.MustParse(*s)
	return q.String()
}

func text(q *resource.Quantity) string {
	if q == nil {
		return ""
	}
	return q.String()
}

func TestShareNeverSplitsAUnit(t *testing.T) {
	for _, c := range []struct {
		rule    string
		q       string
		percent int64
		want    string
	}{
		{rule: "a share of whole GPUs rounds down to whole GPUs", q: "7", percent: 50, want: "3"},
		{rule: "all of it is the quota itself", q: "7", percent: 100, want: "7"},
		{rule: "none of it is zero", q: "7", percent: 0, want: "0"},
		{rule: "a fractional quota keeps millis", q: "1500m", percent: 50, want: "750m"},
		{rule: "bytes of a large memory quota do not overflow", q: "4000Ti", percent: 25, want: "1000Ti"},
	} {
		t.Run(c.rule, func(t *testing.T) {
			got := share(resource.MustParse(c.q), c.percent)
			want := resource.MustParse(c.want)
			assert.Equal(t, want.String(), got.String())
		})
	}
}

// queueUnder is the A10G type's ClusterQueue as the reconciler applies it under the Settings data.
func queueUnder(t *testing.T, data map[string]any) *kueue.ClusterQueue {
	t.Helper()
	cl := fakecluster.Builder(a10g()).Build()
	r := &Reconciler{Client: cl, Settings: settingsData(data)}
	_, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: a10g().Name}})
	require.NoError(t, err)
	cq := &kueue.ClusterQueue{}
	require.NoError(t, cl.Get(context.Background(), types.NamespacedName{Name: a10g().Name}, cq))
	return cq
}
