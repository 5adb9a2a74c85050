package kvcachepools_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/kvcachepools"
)

// A Binding's phase and quotas, one row per rule.
func TestSummarizeBinding(t *testing.T) {
	binding := &workerv1.KVCachePoolBinding{Spec: workerv1.KVCachePoolBindingSpec{Quota: workerv1.KVCachePoolBindingQuota{Ceiling: resource.MustParse("256Gi")}}}
	pool := func(total string) *workerv1.KVCachePool {
		return &workerv1.KVCachePool{Spec: workerv1.KVCachePoolSpec{Quota: workerv1.KVCachePoolQuota{Total: resource.MustParse(total)}}}
	}
	held := metav1.Condition{Status: metav1.ConditionTrue, Message: "domain held"}
	lost := metav1.Condition{Status: metav1.ConditionFalse, Message: "domain held by team-b/cache"}
	for _, tc := range []struct {
		rule              string
		pool              *workerv1.KVCachePool
		claimed           metav1.Condition
		phase, message    string
		requested, capped string
	}{
		{"a Binding holding its domain is Ready", pool("2Ti"), held, "Ready", "domain held", "256Gi", "256Gi"},
		{"a Binding not holding it is Error, with the claim's message", pool("2Ti"), lost, "Error", "domain held by team-b/cache", "256Gi", "256Gi"},
		{"the effective quota is the ceiling within the pool's total", pool("2Ti"), held, "Ready", "domain held", "256Gi", "256Gi"},
		{"and the pool's total above it", pool("128Gi"), held, "Ready", "domain held", "256Gi", "128Gi"},
		{"without a pool the effective quota is unknown, not zero", nil, lost, "Error", "domain held by team-b/cache", "256Gi", ""},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			s := kvcachepools.SummarizeBinding(binding, tc.pool, tc.claimed)
			assert.Equal(t, tc.phase, s.Phase)
			assert.Equal(t, tc.message, s.PhaseMessage)
			assert.Equal(t, tc.requested, s.RequestedQuota.String())
			if tc.capped == "" {
				assert.Nil(t, s.EffectiveQuota)
			} else {
				assert.Equal(t, tc.capped, s.EffectiveQuota.String())
			}
		})
	}
}

// An external backend's status, one row per rule; a managed one's is its operator's.
func TestExternalBackendStatus(t *testing.T) {
	client := workerv1.KVCacheBackendEndpoint{Name: "Client", Address: "master:50051"}
	admin := workerv1.KVCacheBackendEndpoint{Name: "Admin", Address: "master:9003"}
	external := func(deleted bool, endpoints ...workerv1.KVCacheBackendEndpoint) *workerv1.KVCacheBackend {
		b := &workerv1.KVCacheBackend{}
		b.Spec.Connection.External = &workerv1.KVCacheBackendExternal{Endpoints: endpoints}
		if deleted {
			b.DeletionTimestamp = &metav1.Time{}
		}
		return b
	}
	for _, tc := range []struct {
		rule    string
		backend *workerv1.KVCacheBackend
		phase   string
	}{
		{"an external backend with a Client endpoint is Ready", external(false, client, admin), "Ready"},
		{"one without is Error", external(false, admin), "Error"},
		{"one being deleted is Deleting", external(true, client), "Deleting"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			s := kvcachepools.ExternalBackendStatus(tc.backend)
			assert.Equal(t, tc.phase, s.Phase)
			assert.NotEmpty(t, s.PhaseMessage)
			assert.Equal(t, tc.backend.Spec.Connection.External.Endpoints, s.Endpoints, "the endpoints echo the spec's")
		})
	}
	t.Run("a managed backend's status is left to its operator", func(t *testing.T) {
		managed := &workerv1.KVCacheBackend{}
		managed.Spec.Connection.Managed = &workerv1.KVCacheBackendManaged{}
		assert.Nil(t, kvcachepools.ExternalBackendStatus(managed))
	})
}
