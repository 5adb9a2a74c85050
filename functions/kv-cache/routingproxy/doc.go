// Package routingproxy puts the engine of a decoder behind llm-d-router's routing proxy: a native
// sidecar that takes the role's serving port while the engine moves to an internal one. The kv-cache
// function applies it to every decoder engine.BehindRoutingProxy selects.
package routingproxy
