package kvcachepools

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// BindingSummary is the part of a Binding's status printed beside its condition: the phase its domain
// claim decides, and its quotas.
type BindingSummary struct {
	Phase          string             `json:"phase"`
	PhaseMessage   string             `json:"phaseMessage"`
	RequestedQuota *resource.Quantity `json:"requestedQuota,omitempty"`
	EffectiveQuota *resource.Quantity `json:"effectiveQuota,omitempty"`
}

// SummarizeBinding is the Binding's summary given its DomainClaimed condition and its pool (nil
// when the pool does not exist). The phase is Ready while the Binding holds its domain and Error
// otherwise, explained by the condition's message. The requested quota is the ceiling; the effective
// one is the most of the pool the Binding can hold: its ceiling, capped by the pool's total (mdplane
// keeps no ledger of the other Bindings' use), and absent without a pool.
func SummarizeBinding(b *workerv1.KVCachePoolBinding, pool *workerv1.KVCachePool, claimed metav1.Condition) BindingSummary {
	s := BindingSummary{Phase: workerv1.KVCachePhaseReady, PhaseMessage: claimed.Message}
	if claimed.Status != metav1.ConditionTrue {
		s.Phase = workerv1.KVCachePhaseError
	}
	ceiling := b.Spec.Quota.Ceiling.DeepCopy()
	s.RequestedQuota = &ceiling
	if pool != nil {
		effective := ceiling.DeepCopy()
		if pool.Spec.Quota.Total.Cmp(effective) < 0 {
			effective = pool.Spec.Quota.Total.DeepCopy()
		}
		s.EffectiveQuota = &effective
	}
	return s
}

// summarized is true when the Binding's status already says what s says.
func summarized(b *workerv1.KVCachePoolBinding, s BindingSummary) bool {
	sameQuantity := func(a, b *resource.Quantity) bool {
		return (a == nil) == (b == nil) && (a == nil || a.Cmp(*b) == 0)
	}
	return b.Status.Phase == s.Phase && b.Status.PhaseMessage == s.PhaseMessage &&
		sameQuantity(b.Status.RequestedQuota, s.RequestedQuota) && sameQuantity(b.Status.EffectiveQuota, s.EffectiveQuota)
}
