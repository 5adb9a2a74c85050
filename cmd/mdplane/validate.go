package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

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
	docs, err := schemacheck.ReadFiles(c.Files...)
	if err != nil {
		return err
	}
	stored, err := schemacheck.ReadFiles(c.Old...)
	if err != nil {
		return err
	}
	_, refusals, err := admission.Judge(checker, docs, stored)
	if err != nil {
		return err
	}
	refusals = append(unknownKinds(checker, docs), refusals...)
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

// unknownKinds refuses the documents a cluster with mdplane installed would not know either: a
// kind that is neither mdplane's, nor Kubernetes' own, nor the Crossplane EnvironmentConfig that
// holds mdplane's Settings. Admitting them in silence would say they were judged.
func unknownKinds(checker *schemacheck.Checker, docs []schemacheck.Document) []admission.Refusal {
	var out []admission.Refusal
	for _, d := range docs {
		gvk := d.Object.GroupVersionKind()
		switch {
		case gvk.Kind == "" || d.Object.GetAPIVersion() == "":
			out = append(out, admission.Refusal{Source: d.Source, Object: schemacheck.Describe(d.Object), Path: "kind",
				Reason: "not a Kubernetes object: it names no apiVersion and kind"})
		case checker.Knows(gvk) || clientgoscheme.Scheme.Recognizes(gvk) || gvk.GroupKind() == settingsKind:
		default:
			out = append(out, admission.Refusal{Source: d.Source, Object: schemacheck.Describe(d.Object), Path: "kind",
				Reason: fmt.Sprintf("%s of %s is neither a kind of mdplane's nor one of Kubernetes' own: validate cannot judge it, and a cluster without that kind refuses it", gvk.Kind, d.Object.GetAPIVersion())})
		}
	}
	return out
}

// settingsKind is the kind of mdplane's Settings object (apis/settings).
var settingsKind = schema.GroupKind{Group: "apiextensions.crossplane.io", Kind: "EnvironmentConfig"}
