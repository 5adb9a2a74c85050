// Package engine knows how vLLM and SGLang read their command lines and environment: which flag a
// user argument is in every spelling the engine accepts, the parallel degrees it declares, and which
// keys mdplane owns per engine, and every port mdplane decides (ports.go: the engine's, the routing
// proxy's, the bootstrap and KV event listeners). The render, the router and the admission webhook
// share it, so what one refuses the other renders.
package engine
