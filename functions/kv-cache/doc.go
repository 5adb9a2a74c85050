// Package kvcache is the kv-cache composition function, the second step of a ModelDeployment's
// pipeline: it amends the role Pod templates render-roles produced with the Mooncake cache client
// (the store connector, the tenant, the dtype), the direct prefill/decode transfer and the KV event
// publisher, per engine (connector.go, pure), puts decoders behind the routing proxy (routingproxy/),
// composes the argv routers (routers/), and echoes the Binding onto the deployment's status. fn.go is
// the thin gRPC edge. The function keeps its name, which Compositions and upgrades depend on.
package kvcache
