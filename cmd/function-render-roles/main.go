// Command function-render-roles serves the render-roles composition function over gRPC.
package main

import (
	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	renderroles "github.com/mdplane/mdplane/functions/render-roles"
	"github.com/mdplane/mdplane/internal/fnserver"
)

func main() {
	fnserver.Main("The mdplane render-roles composition function.", func(log logging.Logger) fnv1.FunctionRunnerServiceServer {
		return &renderroles.Function{Log: log}
	})
}
