// Package kvcachepools publishes the endpoint a KVCachePool's cache clients connect to: the Client
// endpoint of its external KVCacheBackend, as status.clientEndpoint with the pool's phase and the
// ClientEndpointPublished condition; for a managed backend, whose own operator publishes the
// endpoint, only the condition saying whether it has.
package kvcachepools
