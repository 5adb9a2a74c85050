package main

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

type schemaCheckCmd struct {
	Files []string `short:"f" name:"filename" required:"" help:"Manifest files to check (YAML or JSON, multi-document); a directory means its .yaml, .yml and .json files."`
	Old   []string `name:"old" help:"Stored versions of the same objects: an object found here is checked as an update of it, so transition rules (frozen fields) apply."`
}

// errViolations makes the command exit 1 after printing every violation.
var errViolations = errors.New("manifests violate the schema")

func (c *schemaCheckCmd) Run(e *env) error {
	checker, err := schemacheck.ForPackage(manifests.FS)
	if err != nil {
		return err
	}
	old, err := schemacheck.ReadFiles(c.Old...)
	if err != nil {
		return err
	}
	stored := map[string]*unstructured.Unstructured{}
	for _, d := range old {
		stored[schemacheck.Key(d.Object)] = d.Object
	}
	docs, err := schemacheck.ReadFiles(c.Files...)
	if err != nil {
		return err
	}
	checked, violations := 0, 0
	for _, d := range docs {
		if !checker.Knows(d.Object.GroupVersionKind()) {
			fmt.Fprintf(e.stdout, "skip %s %s: not an mdplane kind\n", d.Source, schemacheck.Describe(d.Object))
			continue
		}
		_, found, err := checker.Check(d.Object, stored[schemacheck.Key(d.Object)])
		if err != nil {
			return fmt.Errorf("%s: %w", d.Source, err)
		}
		checked++
		if len(found) == 0 {
			fmt.Fprintf(e.stdout, "ok   %s %s\n", d.Source, schemacheck.Describe(d.Object))
			continue
		}
		for _, v := range found {
			violations++
			fmt.Fprintf(e.stdout, "FAIL %s %s: %s\n", d.Source, schemacheck.Describe(d.Object), v)
		}
	}
	fmt.Fprintf(e.stdout, "%d objects checked, %d violations\n", checked, violations)
	if violations > 0 {
		return errViolations
	}
	return nil
}
