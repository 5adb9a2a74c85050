// Command mdplane-xpkg builds mdplane's Crossplane packages and the controllers' image into a
// directory, offline (no Docker, no registry), one file per architecture of each image with a
// runtime, and prints each file's reference, platform and digest.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/mdplane/mdplane/internal/packaging"
)

func main() {
	version := flag.String("version", packaging.Version, "the release version: the packages' tag and their Functions' pinned dependency version")
	out := flag.String("out", "_output/xpkg", "directory the packages are written to")
	root := flag.String("root", ".", "the repository root")
	flag.Parse()
	built, err := packaging.Build(context.Background(), *root, *version, *out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-xpkg:", err)
		os.Exit(1)
	}
	for _, b := range built {
		platform := "-"
		if b.Arch != "" {
			platform = "linux/" + b.Arch
		}
		fmt.Printf("%-48s %-11s %s  %s\n", b.Reference(*version), platform, b.Digest, b.Path)
	}
}
