// Package kvcachepools publishes the KV cache status mdplane can know from the specs: a
// KVCachePool's client endpoint (its external KVCacheBackend's Client endpoint, with the pool's phase
// and the ClientEndpointPublished condition; for a managed backend, whose operator publishes it, the
// condition alone), an external backend's endpoints and phase, and each KVCachePoolBinding's domain
// claim, phase and quotas.
package kvcachepools
