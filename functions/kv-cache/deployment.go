package kvcache

import (
	"fmt"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Binding is the resolved cache binding a deployment renders its clients from.
type Binding struct {
	// Endpoint is the pool's published client endpoint (host:port).
	Endpoint string
	// Domain is the Binding's reuse domain: its name is the tenant.
	Domain workerv1.KVCacheDomain
}

// Deployment is what the cache step needs of a ModelDeployment: its engine, router, transfer
// protocol, roles, and the resolved binding when spec.kvCache is set.
type Deployment struct {
	Engine     workerv1.Engine
	Router     *workerv1.ModelDeploymentRouter
	KVTransfer *workerv1.ModelDeploymentKVTransfer
	Roles      []workerv1.ModelDeploymentRole
	// Binding is nil when the deployment runs without a shared pool.
	Binding *Binding
	// StoreProtocols is the transport, in Mooncake's spelling, each role's cache client speaks on
	// the pool's backend, keyed by role name (MatchStoreTransports). A bound role missing from it
	// speaks tcp, what an unset backend protocol resolves to.
	StoreProtocols map[string]string
	// Manufacturers maps a role's InstanceType name to its accelerator manufacturer, read for vLLM
	// only: vLLM on ascend is vLLM-Ascend, whose store connector, direct leg, routing proxy and KV
	// events differ. A type missing from it is native vLLM.
	Manufacturers map[string]string
	// CachePrefix is the KV cache identity of the deployment's weights (engine.CachePrefix), set
	// when it names a resolved ModelArtifact and a cache: the store keys its blocks by it.
	CachePrefix string
	// Settings are the worker Settings the render reads (the images mdplane picks, the dtype
	// ownership); nil is the defaults.
	Settings *settings.Settings
}

// settings are d's Settings, the defaults when none were read.
func (d Deployment) settings() settings.Settings {
	return settings.OrDefaults(d.Settings)
}

// MatchStoreTransports picks each cache-client role's transport among the backend's group offers:
// the first offer the role's engine accepts (vLLM on an Ascend InstanceType accepts only ascend).
// manufacturers maps an InstanceType name to its accelerator manufacturer. A role no offer suits
// fails the render: it names the role and the way out.
func MatchStoreTransports(e workerv1.Engine, roles []workerv1.ModelDeploymentRole, manufacturers map[string]string, offers []string) (map[string]string, error) {
	out := map[string]string{}
	for _, role := range roles {
		if role.TakesOver() || role.Kind == workerv1.RoleKindEncode {
			continue // no cache client is rendered for it
		}
		protocol, err := engine.MatchTransport(engine.ClientEngineOf(e, manufacturers[role.InstanceType]), offers)
		if err != nil {
			return nil, fmt.Errorf("role %q on InstanceType %q: %w", role.Name, role.InstanceType, err)
		}
		out[role.Name] = protocol
	}
	return out, nil
}

// mooncakeProtocol maps the API's transfer protocol to Mooncake's; unset and Auto are tcp.
func mooncakeProtocol(t *workerv1.ModelDeploymentKVTransfer) string {
	if t == nil {
		return "tcp"
	}
	if p := engine.StoreProtocol(string(t.Protocol)); p != "" {
		return p
	}
	return "tcp"
}
