package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func binding(namespace, name, pool, domain string) workerv1.KVCachePoolBinding {
	return workerv1.KVCachePoolBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: workerv1.KVCachePoolBindingSpec{
			PoolRef: workerv1.KVCachePoolReference{Name: pool},
			Domain:  workerv1.KVCacheDomain{Name: domain, BlockSize: 64, Dtype: "bfloat16"},
		},
	}
}

// Pools a and b share the master of backend m1; pool c is on backend m2; pool gone does not exist.
func backendOf(pool string) string {
	return map[string]string{"a": "m1", "b": "m1", "c": "m2"}[pool]
}

func TestBindingDomainsAreUniquePerMaster(t *testing.T) {
	stored := []workerv1.KVCachePoolBinding{binding("team-a", "shared", "a", "chat"), binding("team-a", "plain", "a", "")}
	cases := []struct {
		rule    string
		binding workerv1.KVCachePoolBinding
		parts   []string
	}{
		{"a second Binding on the same pool may not declare a taken domain",
			binding("team-b", "copy", "a", "chat"), []string{`KVCachePoolBinding team-a/shared (pool "a") already declares domain "chat" on KVCacheBackend "m1"`, "name another domain, or reference Binding team-a/shared"}},
		{"nor one on another pool of the same master",
			binding("team-b", "copy", "b", "chat"), []string{`already declares domain "chat"`}},
		{"an omitted name is the default domain, and counts as taken once",
			binding("team-b", "copy", "b", "default"), []string{`team-a/plain`, `domain "default"`}},
		{"a pool on another master may reuse the name", binding("team-b", "copy", "c", "chat"), nil},
		{"another name on the same master is its own tenant", binding("team-b", "copy", "a", "code"), nil},
		{"a Binding to a missing pool shares nothing yet", binding("team-b", "copy", "gone", "chat"), nil},
		{"the stored Binding itself is no rival", binding("team-a", "shared", "a", "chat"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			errs := refusaltest.Checked(t, validation.ValidateBinding(&tc.binding, stored, backendOf))
			if tc.parts == nil {
				assert.Empty(t, errs)
				return
			}
			refused(t, errs, "spec.domain.name", tc.parts...)
		})
	}
}
