// Command mdplane-xpkg builds mdplane's Crossplane packages and the controllers' image into a
// directory, offline (no Docker, no registry), and prints each artifact's reference and digest.
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
		fmt.Printf("%-48s %s  %s\n", b.Reference(*version), b.Digest, b.Path)
	}
}
