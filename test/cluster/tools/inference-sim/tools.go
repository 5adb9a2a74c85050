//go:build tools

// Package tools pins llm-d-inference-sim, the engine stand-in the real node's Pods run.
package tools

import _ "github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim"
