package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// DefaultDomain is the domain name of a Binding that leaves it out (the schema's default).
const DefaultDomain = "default"

// ValidateBinding judges a new KVCachePoolBinding against the Bindings already stored. A domain's
// name is the tenant identifier the master (the pool's KVCacheBackend) keys blocks by, so two
// Bindings on one master declaring one name would share a tenant across namespaces: refused, on every
// pool of that master: a domain name is unique per master across its pools.
// backendOf names a pool's backend, "" for a pool that does not exist. The domain and the pool are
// frozen, so only a create is judged.
func ValidateBinding(b *workerv1.KVCachePoolBinding, stored []workerv1.KVCachePoolBinding, backendOf func(pool string) string) field.ErrorList {
	backend := backendOf(b.Spec.PoolRef.Name)
	if backend == "" {
		return nil // the pool (or its backend) is missing: the Binding reports that, nothing is shared yet
	}
	name := DomainName(b)
	for i := range stored {
		other := &stored[i]
		if other.Namespace == b.Namespace && other.Name == b.Name {
			continue
		}
		if DomainName(other) != name || backendOf(other.Spec.PoolRef.Name) != backend {
			continue
		}
		return field.ErrorList{field.Invalid(field.NewPath("spec", "domain", "name"), name, fmt.Sprintf(
			"KVCachePoolBinding %s/%s (pool %q) already declares domain %q on KVCacheBackend %q, and a domain name is the tenant the backend's master keys blocks by, so two Bindings would share one tenant; name another domain, or reference Binding %s/%s to share its blocks",
			other.Namespace, other.Name, other.Spec.PoolRef.Name, name, backend, other.Namespace, other.Name))}
	}
	return nil
}

// DomainName is a Binding's domain name, the default when it leaves the name out.
func DomainName(b *workerv1.KVCachePoolBinding) string {
	if b.Spec.Domain.Name == "" {
		return DefaultDomain
	}
	return b.Spec.Domain.Name
}
