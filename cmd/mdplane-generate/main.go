// Command mdplane-generate writes every generated file of the repository (deepcopy, CRDs, XRDs,
// Compositions, the API reference page docs/reference.md) from the Go types in apis/. Run it through
// `make generate`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mdplane/mdplane/internal/generate"
)

func main() {
	root := flag.String("root", ".", "repository root")
	flag.Parse()
	if err := run(*root); err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-generate:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	files, err := generate.Generate(root)
	if err != nil {
		return err
	}
	// Generated-only directories are emptied first, so a kind that was removed leaves no file behind.
	for _, dir := range []string{generate.CRDDir, generate.XRDDir, generate.CompositionDir} {
		if err := os.RemoveAll(filepath.Join(root, dir)); err != nil {
			return err
		}
	}
	for _, path := range files.Paths() {
		full := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, files[path], 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d generated files\n", len(files))
	return nil
}
