package main

import (
	"fmt"

	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

type validateCmd struct {
	Files []string `short:"f" name:"filename" required:"" help:"Manifests to admit; the InstanceTypes they reference are read from the same files. A directory means its .yaml, .yml and .json files."`
	Old   []string `name:"old" help:"Stored versions of the same objects: an object found here is judged as an update of it."`
}

// Run admits the manifests as a cluster would: silent on success, one error line per refusal.
func (c *validateCmd) Run(e *env) error {
	checker, err := schemacheck.ForPackage(manifests.FS)
	if err != nil {
		return err
	}
	docs, err := readAll(c.Files)
	if err != nil {
		return err
	}
	stored, err := readAll(c.Old)
	if err != nil {
		return err
	}
	_, refusals, err := admission.Judge(checker, docs, stored)
	if err != nil {
		return err
	}
	for _, w := range admission.SettingsWarnings(docs) {
		fmt.Fprintln(e.stderr, "warning:", w)
	}
	for _, r := range refusals {
		fmt.Fprintln(e.stderr, "error:", r)
	}
	if len(refusals) > 0 {
		return errRefused
	}
	return nil
}
