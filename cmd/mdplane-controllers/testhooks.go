//go:build mdplane_testhooks

package main

import "flag"

// bindTestHooks adds the flags only a test stack needs, in a build with the mdplane_testhooks tag
// (the e2e stack's); the released binary has none of them.
func bindTestHooks(fs *flag.FlagSet, m *metricsAPI) {
	fs.StringVar(&m.dialOverride, "metrics-scrape-dial-override", "", "host:port dialed instead of every Pod whose metrics the snapshot or a retirement's drain reads, or that a group-forward probe or an Elastic EP resize is sent to (the request keeps the Pod's address as its host); for stacks whose fake Pods' addresses lead nowhere")
}
