//go:build !mdplane_testhooks

package main

import "flag"

// bindTestHooks adds nothing to the released binary: its test hooks are built only with the
// mdplane_testhooks tag (testhooks.go).
func bindTestHooks(*flag.FlagSet, *metricsAPI) {}
