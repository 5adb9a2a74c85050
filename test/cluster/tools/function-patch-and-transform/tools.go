//go:build tools

// Package tools pins function-patch-and-transform, the Function the team API example's Composition
// calls (examples/team-api).
package tools

import _ "github.com/crossplane-contrib/function-patch-and-transform"
