// Package functions lists mdplane's composition functions by the names Compositions call them, so
// that every in-process runner (mdplane render, the golden and fidelity tests, the e2e stack) runs
// the same set.
package functions

import (
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// BuiltIn returns a fresh instance of every function, keyed by Function name.
func BuiltIn() map[string]fnv1.FunctionRunnerServiceServer {
	return map[string]fnv1.FunctionRunnerServiceServer{
		renderroles.FunctionName: &renderroles.Function{},
		kvcache.FunctionName:     &kvcache.Function{},
	}
}

// Commands maps each Function name to the command that serves it.
var Commands = map[string]string{
	renderroles.FunctionName: "github.com/mdplane/mdplane/cmd/function-render-roles",
	kvcache.FunctionName:     "github.com/mdplane/mdplane/cmd/function-kv-cache",
}
