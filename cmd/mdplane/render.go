package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/mdplane/mdplane/functions"
	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/pipeline"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

type renderCmd struct {
	Files []string `short:"f" name:"filename" required:"" help:"Manifests holding ModelDeployments and the InstanceTypes, KVCachePools, KVCachePoolBindings, ModelArtifacts and RuntimeClasses they reference; a directory means its .yaml, .yml and .json files."`
}

// errRefused makes the command exit 1 after printing every error line.
var errRefused = errors.New("render refused")

// renderer is the schema checker and the in-process pipeline of the Compositions mdplane ships.
func renderer() (*schemacheck.Checker, *pipeline.Engine, error) {
	checker, err := schemacheck.ForPackage(manifests.FS)
	if err != nil {
		return nil, nil, err
	}
	engine, err := functions.Engine()
	return checker, engine, err
}

func (c *renderCmd) Run(e *env) error {
	checker, engine, err := renderer()
	if err != nil {
		return err
	}
	docs, err := schemacheck.ReadFiles(c.Files...)
	if err != nil {
		return err
	}

	out, errs, err := engine.RenderDocuments(context.Background(), checker, docs)
	if err != nil {
		return err
	}
	for _, w := range admission.SettingsWarnings(docs) {
		fmt.Fprintln(e.stderr, "warning:", w)
	}
	if len(errs) > 0 {
		for _, msg := range errs {
			fmt.Fprintln(e.stderr, "error:", msg)
		}
		return errRefused
	}
	noted := map[string]bool{}
	for _, s := range engine.Skipped {
		if !noted[s] {
			noted[s] = true
			fmt.Fprintf(e.stderr, "note: skipped %s: not built into this mdplane yet\n", s)
		}
	}
	_, err = e.stdout.Write(out)
	return err
}
