// Command function-kv-cache serves the kv-cache composition function over gRPC.
package main

import (
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	"github.com/mdplane/mdplane/internal/fnserver"
)

func main() {
	fnserver.Main("The mdplane kv-cache composition function.", func(log logging.Logger) fnv1.FunctionRunnerServiceServer {
		return &kvcache.Function{Log: log}
	})
}
