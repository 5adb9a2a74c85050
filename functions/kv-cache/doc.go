// Package kvcache is the kv-cache composition function: it amends the role Pod templates render-roles
// produced with the Mooncake client configuration, tenant, dtype, prefill/decode transfer and KV
// event arguments of each engine.
package kvcache
