package main

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mdplane/mdplane/internal/plan"
)

// resources writes a resource list in name order: cpu=16, memory=64Gi.
func resources(list map[corev1.ResourceName]resource.Quantity) string {
	if len(list) == 0 {
		return "nothing"
	}
	names := make([]string, 0, len(list))
	for n := range list {
		names = append(names, string(n))
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		q := list[corev1.ResourceName(n)]
		parts = append(parts, n+"="+q.String())
	}
	return strings.Join(parts, ", ")
}

// podChangeLines is the leader Pod's diff, one change a line.
func podChangeLines(c plan.PodChanges) []string {
	if c.Empty() {
		return []string{"no change in the leader Pod"}
	}
	var out []string
	if c.Image != nil {
		out = append(out, fmt.Sprintf("image %s → %s", c.Image.From, c.Image.To))
	}
	if c.Command != nil {
		out = append(out, fmt.Sprintf("command %q → %q", c.Command.From, c.Command.To))
	}
	prefixed := func(prefix string, items []string) {
		for _, item := range items {
			out = append(out, prefix+item)
		}
	}
	prefixed("arg - ", c.Args.Removed)
	prefixed("arg + ", c.Args.Added)
	prefixed("env - ", c.Env.Removed)
	prefixed("env + ", c.Env.Added)
	for _, e := range c.Env.Changed {
		out = append(out, fmt.Sprintf("env ~ %s: %s → %s", e.Name, e.From, e.To))
	}
	prefixed("volume - ", c.Volumes.Removed)
	prefixed("volume + ", c.Volumes.Added)
	prefixed("volume ~ ", c.Volumes.Changed)
	prefixed("mount - ", c.Mounts.Removed)
	prefixed("mount + ", c.Mounts.Added)
	names := make([]string, 0, len(c.Resources))
	for n := range c.Resources {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		out = append(out, fmt.Sprintf("resources %s: %s → %s", n, c.Resources[n].From, c.Resources[n].To))
	}
	return out
}
