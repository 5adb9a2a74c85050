//go:build tools

// Package tools pins KWOK.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
