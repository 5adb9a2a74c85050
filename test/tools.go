//go:build tools

// This file keeps Crossplane's core command in the module graph, so `go build` can build the
// `crossplane internal render` engine from exactly the pinned version.
package test

import _ "github.com/crossplane/crossplane/v2/cmd/crossplane"
