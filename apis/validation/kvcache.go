package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// KVCacheChain is what spec.kvCache resolves to, read through the API server: the Binding, its pool
// and the pool's backend. A link is nil when it does not exist, and so are the links after it.
type KVCacheChain struct {
	Binding *workerv1.KVCachePoolBinding
	Pool    *workerv1.KVCachePool
	Backend *workerv1.KVCacheBackend
}

// unresolved is the named refusal of an interface request whose cache chain breaks, "" when it
// resolves.
func (ch *KVCacheChain) unresolved() string {
	switch {
	case ch.Binding == nil:
		return "cache binding must resolve before requesting interfaces"
	case ch.Pool == nil:
		return "cache pool must resolve before requesting interfaces"
	case ch.Backend == nil:
		return "cache backend must resolve before requesting interfaces"
	}
	return ""
}

// manufacturerOf is the accelerator manufacturer of a role's InstanceType; "" when unknown.
func manufacturerOf(c Cluster, instanceType string) string {
	if it := c.InstanceTypes[instanceType]; it != nil && it.Status.Detail != nil {
		return it.Status.Detail.Manufacturer
	}
	return ""
}

// validateBindingName refuses a new or changed spec.kvCache.poolRef.name that cannot name a
// KVCachePoolBinding, which is an object name: a bare endpoint ("mooncake-master:50051", a URL) or
// anything else that is no DNS subdomain would leave the deployment unrendered, waiting for a Binding
// that can never exist (a bare endpoint URL cannot be used in this field).
func validateBindingName(md, old *workerv1.ModelDeployment) field.ErrorList {
	if md.Spec.KVCache == nil {
		return nil
	}
	name := md.Spec.KVCache.PoolRef.Name
	if name == "" || old != nil && old.Spec.KVCache != nil && old.Spec.KVCache.PoolRef.Name == name {
		return nil
	}
	problems := validation.IsDNS1123Subdomain(name)
	if len(problems) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "kvCache", "poolRef", "name"), name,
		"not the name of a KVCachePoolBinding (not a lowercase RFC 1123 subdomain): poolRef names a Binding in this namespace, never a pool's "+
			"endpoint or URL; name the Binding an administrator created to grant this namespace a pool")}
}

// validateBindingTransport refuses a new or changed binding whose backend groups offer more than
// one transport to an engine whose client speaks one. It
// runs only when the chain was read and resolves, and an unchanged binding stays editable after its
// backend became mixed. vLLM-Ascend's need for a CANN group is judged at render time
// (docs/decisions/0021-cache-client-transport.md).
func validateBindingTransport(md, old *workerv1.ModelDeployment, c Cluster) field.ErrorList {
	if md.Spec.KVCache == nil || md.DeletionTimestamp != nil || c.KVCache == nil || c.KVCache.unresolved() != "" {
		return nil
	}
	if old != nil && equality.Semantic.DeepEqual(md.Spec.KVCache, old.Spec.KVCache) {
		return nil
	}
	offers := engine.BackendOffers(c.KVCache.Backend)
	if len(engine.DistinctOffers(offers)) < 2 {
		return nil
	}
	var errs field.ErrorList
	judged := map[string]bool{}
	for _, role := range md.Spec.Roles {
		if judged[role.InstanceType] {
			continue
		}
		judged[role.InstanceType] = true
		e := engine.ClientEngineOf(md.Spec.Engine.Name, manufacturerOf(c, role.InstanceType))
		if err := engine.ValidateBindingTransport(e, offers); err != nil {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "kvCache", "poolRef", "name"), fmt.Sprintf(
				"KVCachePoolBinding %q names KVCachePool %q on KVCacheBackend %q: %v",
				md.Spec.KVCache.PoolRef.Name, c.KVCache.Pool.Name, c.KVCache.Backend.Name, err)))
			break // one refusal names the pool; every role shares it
		}
	}
	return errs
}

// manufacturersOf maps each role's InstanceType to its accelerator manufacturer ("" when unknown).
func manufacturersOf(md *workerv1.ModelDeployment, c Cluster) map[string]string {
	out := map[string]string{}
	for _, role := range md.Spec.Roles {
		out[role.InstanceType] = manufacturerOf(c, role.InstanceType)
	}
	return out
}

// validateAscendLeg refuses at admission the vLLM-Ascend pair the render would refuse: a prefill
// tensor degree narrower than the decode one (engine.ValidateAscendLeg). It needs the roles'
// InstanceTypes; where one is unknown the render remains the backstop. A stored deployment is judged
// again only when its verdict's inputs moved, so a rule added later does not strand it.
func validateAscendLeg(md, old *workerv1.ModelDeployment, roles *field.Path, c Cluster) field.ErrorList {
	err := engine.ValidateAscendLeg(md.Spec.Engine.Name, md.Spec.Router, md.Spec.Roles, manufacturersOf(md, c))
	if err == nil {
		return nil
	}
	if old != nil {
		was := engine.ValidateAscendLeg(old.Spec.Engine.Name, old.Spec.Router, old.Spec.Roles, manufacturersOf(old, c))
		if was != nil && was.Error() == err.Error() {
			return nil
		}
	}
	for i, role := range md.Spec.Roles {
		if role.Kind == workerv1.RoleKindDecode {
			return field.ErrorList{field.Forbidden(roles.Index(i).Child(role.EngineArgsField()), err.Error())}
		}
	}
	return field.ErrorList{field.Forbidden(roles, err.Error())}
}
