//go:build tools

// Package tools pins the Crossplane CLI, whose `crossplane render` the README's recipe runs.
package tools

import _ "github.com/crossplane/cli/v2/cmd/crossplane"
