package kvcache

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Condition is a condition the function reports on the deployment.
type Condition struct {
	Status  string // True, False or Unknown
	Reason  string
	Message string
}

// RolloutHeldByCache is the reason a role's outdated replicas are not replaced while its deployment's
// KV cache Binding is unresolved.
const RolloutHeldByCache = workerv1.ReasonRolloutHeldByCache

// rolloutHeldByWeights is render-roles' hold (renderroles.RolloutHeldByWeights): while the weights
// cannot be delivered no Pod is created at all, so the cache hold does not replace it.
const rolloutHeldByWeights = "RolloutHeldByWeights"

// Domain is what one pass read of the KVCachePoolBinding a deployment names.
type Domain struct {
	// Binding is what the cache clients are rendered from; nil when none is: no spec.kvCache, or
	// no Binding to read it from.
	Binding *Binding
	// KVCache is status.kvCache: the Binding's echo, or, once the Binding is gone, the echo the
	// deployment already carries (the record of which domain its replicas write into).
	KVCache *workerv1.KVCacheStatus
	// Registered is the DomainRegistered condition.
	Registered Condition
}

// ResolveDomain resolves the Binding a deployment names (nil when it does not exist) and its pool
// (nil when it does not exist or was not read).
//
// A missing Binding is reported, not failed: DomainRegistered=False/BindingNotFound, and the roles
// render with no cache client, since a client needs a registered domain (see
// docs/decisions/0022-missing-binding.md). A missing pool or one without a client endpoint still
// fails the render.
func ResolveDomain(md *workerv1.ModelDeployment, binding *workerv1.KVCachePoolBinding, pool *workerv1.KVCachePool) (Domain, error) {
	if md.Spec.KVCache == nil {
		return Domain{Registered: Condition{"True", "NotApplicable", "spec.kvCache is not set, so there is no KVCachePoolBinding to resolve"}}, nil
	}
	name := md.Spec.KVCache.PoolRef.Name
	if binding == nil {
		return Domain{KVCache: md.Status.KVCache, Registered: bindingNotFound(md.Namespace, name)}, nil
	}
	if lost := unclaimed(binding); lost != nil {
		return Domain{KVCache: md.Status.KVCache, Registered: bindingNotReady(md.Namespace, name, lost)}, nil
	}
	poolName := binding.Spec.PoolRef.Name
	if pool == nil {
		return Domain{}, fmt.Errorf("KVCachePoolBinding %s/%s names KVCachePool %s, which does not exist", md.Namespace, name, poolName)
	}
	if pool.Status.ClientEndpoint == "" {
		return Domain{}, fmt.Errorf("KVCachePool %s has not published status.clientEndpoint yet, so no cache client can be configured; the render waits for the pool", poolName)
	}
	if !holdsClaim(binding) {
		return Domain{}, fmt.Errorf("KVCachePoolBinding %s/%s does not hold the claim of its domain on the master yet (no %s=True condition): "+
			"mdplane-controllers takes the claim and reports it, and the render waits for it; if it stays so, check that mdplane-controllers runs",
			md.Namespace, name, workerv1.BindingDomainClaimed)
	}
	domain := binding.Spec.Domain
	if domain.Name == "" {
		domain.Name = "default"
	}
	return Domain{
		Binding: &Binding{Endpoint: pool.Status.ClientEndpoint, Domain: domain},
		KVCache: &workerv1.KVCacheStatus{Binding: binding.Name, Pool: poolName, Domain: &domain},
		Registered: Condition{"True", "Registered", fmt.Sprintf("reuse domain %q is registered through KVCachePoolBinding %s/%s on KVCachePool %s",
			domain.Name, md.Namespace, name, poolName)},
	}, nil
}

// unclaimed is the Binding's DomainClaimed condition when it says another Binding holds the domain
// on the master: such a Binding is unusable, since its domain is another tenant's.
func unclaimed(b *workerv1.KVCachePoolBinding) *metav1.Condition {
	c := meta.FindStatusCondition(b.Status.Conditions, workerv1.BindingDomainClaimed)
	if c == nil || c.Status != metav1.ConditionFalse {
		return nil
	}
	return c
}

// holdsClaim reports a Binding whose claim the claims controller confirmed. Only that proves the
// domain is this Binding's alone: a Binding admitted before its pool existed was not claimed at
// admission, and the controller takes its claim only once the pool appears.
func holdsClaim(b *workerv1.KVCachePoolBinding) bool {
	return meta.IsStatusConditionTrue(b.Status.Conditions, workerv1.BindingDomainClaimed)
}

// bindingNotReady says the Binding does not hold its domain, and passes on the Binding's own way out.
func bindingNotReady(namespace, name string, claim *metav1.Condition) Condition {
	return Condition{"False", "BindingNotReady", fmt.Sprintf(
		"KVCachePoolBinding %s/%s does not hold its domain on the master (its %s condition: %s), so the roles render without a cache client",
		namespace, name, workerv1.BindingDomainClaimed, claim.Message)}
}

// bindingNotFound names the Binding, its namespace, what the render did instead, and the ways out:
// spec.kvCache is frozen, so the deployment itself cannot be pointed elsewhere.
func bindingNotFound(namespace, name string) Condition {
	return Condition{"False", "BindingNotFound", fmt.Sprintf(
		"spec.kvCache.poolRef.name names KVCachePoolBinding %q in namespace %q, which does not exist, so the roles render without a cache client; "+
			"an administrator grants this namespace a pool by creating that Binding (the roles then roll onto the cache client), "+
			"or create a new deployment naming an existing Binding or without spec.kvCache (spec.kvCache is frozen)",
		name, namespace)}
}

// BackendOffers are the transports the pool's backend offers its clients (engine.BackendOffers). A
// pool whose backend does not exist fails the render, as a missing pool does: the transport a client
// speaks is read from the backend's spec, never guessed.
func BackendOffers(pool *workerv1.KVCachePool, backend *workerv1.KVCacheBackend) ([]string, error) {
	if backend == nil {
		name := ""
		if len(pool.Spec.Backends) > 0 {
			name = pool.Spec.Backends[0]
		}
		return nil, fmt.Errorf("KVCachePool %s names KVCacheBackend %q in spec.backends, which does not exist, so no cache client transport can be chosen; the render waits for the backend", pool.Name, name)
	}
	return engine.BackendOffers(backend), nil
}
