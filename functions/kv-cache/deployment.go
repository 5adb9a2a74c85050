package kvcache

import workerv1 "github.com/mdplane/mdplane/apis/worker/v1"

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
}

// mooncakeProtocol maps the API's transfer protocol to Mooncake's; unset and Auto are tcp.
func mooncakeProtocol(t *workerv1.ModelDeploymentKVTransfer) string {
	if t == nil {
		return "tcp"
	}
	switch t.Protocol {
	case workerv1.TransferRDMA:
		return "rdma"
	case workerv1.TransferEFA:
		return "efa"
	case workerv1.TransferCANN:
		return "ascend"
	case workerv1.TransferROCM:
		return "hip"
	default:
		return "tcp"
	}
}
