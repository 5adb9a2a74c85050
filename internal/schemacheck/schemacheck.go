// Package schemacheck judges manifests against the project's CRDs and XRDs offline, with the API
// server's own libraries: strict unknown-field detection, structural defaulting, OpenAPI validation,
// list-type invariants and CEL rules (transition rules too, given the stored object).
package schemacheck

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Definitions reads the CRDs under crds/ and derives, with Crossplane's own code, the CRD each XRD
// under xrds/ makes the API server serve.
func Definitions(fsys fs.FS) ([]*extv1.CustomResourceDefinition, error) {
	var crds []*extv1.CustomResourceDefinition
	for _, dir := range []string{"crds", "xrds"} {
		names, err := fs.Glob(fsys, dir+"/*.yaml")
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			raw, err := fs.ReadFile(fsys, name)
			if err != nil {
				return nil, err
			}
			crd, err := definition(dir, raw)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			crds = append(crds, crd)
		}
	}
	return crds, nil
}

func definition(dir string, raw []byte) (*extv1.CustomResourceDefinition, error) {
	if dir == "crds" {
		crd := &extv1.CustomResourceDefinition{}
		return crd, yaml.UnmarshalStrict(raw, crd)
	}
	// The v2 XRD is a subset of the v1 type; Crossplane converts between them the same way.
	xrd := &xpv1.CompositeResourceDefinition{}
	if err := yaml.Unmarshal(raw, xrd); err != nil {
		return nil, err
	}
	crd, err := xcrd.ForCompositeResource(xrd)
	if err != nil {
		return nil, err
	}
	// On a cluster the owner is the stored XRD, whose UID an offline read does not have.
	crd.OwnerReferences = nil
	return crd, nil
}

// ForPackage builds a Checker for every CRD and XRD of a package tree (crds/, xrds/).
func ForPackage(fsys fs.FS) (*Checker, error) {
	crds, err := Definitions(fsys)
	if err != nil {
		return nil, err
	}
	return New(crds)
}

// ValidateDefinition runs the API server's CustomResourceDefinition validation on a CRD, as a create
// would: structural schema rules, defaults, and the estimated cost of every CEL rule.
func ValidateDefinition(crd *extv1.CustomResourceDefinition) (field.ErrorList, error) {
	defaulted := crd.DeepCopy()
	extv1.SetObjectDefaults_CustomResourceDefinition(defaulted)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := extv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(defaulted, internal, nil); err != nil {
		return nil, err
	}
	return crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal), nil
}

// Checker judges objects of the kinds it was built from.
type Checker struct {
	kinds map[schema.GroupVersionKind]*kind
}

type kind struct {
	namespaced bool
	structural *structuralschema.Structural
	// strategy is the API server's own strategy for custom resources; its type is unexported.
	strategy interface {
		PrepareForCreate(context.Context, runtime.Object)
		PrepareForUpdate(context.Context, runtime.Object, runtime.Object)
		Validate(context.Context, runtime.Object) field.ErrorList
		ValidateUpdate(context.Context, runtime.Object, runtime.Object) field.ErrorList
	}
}

// New builds a Checker for every served version of the given CRDs. A CRD the API server would refuse
// is an error here too.
func New(crds []*extv1.CustomResourceDefinition) (*Checker, error) {
	c := &Checker{kinds: map[schema.GroupVersionKind]*kind{}}
	for _, crd := range crds {
		if errs, err := ValidateDefinition(crd); err != nil {
			return nil, err
		} else if len(errs) > 0 {
			return nil, fmt.Errorf("CRD %s would be refused by the API server: %w", crd.Name, errs.ToAggregate())
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			k, err := newKind(crd, v)
			if err != nil {
				return nil, fmt.Errorf("CRD %s version %s: %w", crd.Name, v.Name, err)
			}
			c.kinds[schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}] = k
		}
	}
	return c, nil
}

func newKind(crd *extv1.CustomResourceDefinition, v extv1.CustomResourceDefinitionVersion) (*kind, error) {
	props := &apiextensions.JSONSchemaProps{}
	if err := extv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.Schema.OpenAPIV3Schema, props, nil); err != nil {
		return nil, err
	}
	structural, err := structuralschema.NewStructural(props)
	if err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(props)
	if err != nil {
		return nil, err
	}
	var status *apiextensions.CustomResourceSubresourceStatus
	var statusValidator apiservervalidation.SchemaValidator
	if v.Subresources != nil && v.Subresources.Status != nil {
		status = &apiextensions.CustomResourceSubresourceStatus{}
		if s, ok := props.Properties["status"]; ok {
			if statusValidator, _, err = apiservervalidation.NewSchemaValidator(&s); err != nil {
				return nil, err
			}
		}
	}
	gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
	namespaced := crd.Spec.Scope == extv1.NamespaceScoped
	strategy := customresource.NewStrategy(runtime.NewScheme(), namespaced, gvk, validator, statusValidator,
		structural, status, nil, nil)
	return &kind{namespaced: namespaced, structural: structural, strategy: strategy}, nil
}

// Knows reports whether the Checker judges objects of this kind.
func (c *Checker) Knows(gvk schema.GroupVersionKind) bool {
	_, ok := c.kinds[gvk]
	return ok
}

// Violation is one reason the API server would refuse an object.
type Violation struct {
	// Path is the field path, like spec.roles[0].size.
	Path string
	// Reason is the API server's message for the field.
	Reason string
}

func (v Violation) String() string {
	if v.Path == "" {
		return v.Reason
	}
	return v.Path + ": " + v.Reason
}

// Check judges obj as a create would, or as an update of old when old is not nil. It returns the
// object as it would be stored (pruned and defaulted) and every violation: first the unknown fields
// that strict field validation refuses, then what the API server's validation reports, by path.
func (c *Checker) Check(obj, old *unstructured.Unstructured) (*unstructured.Unstructured, []Violation, error) {
	k, ok := c.kinds[obj.GroupVersionKind()]
	if !ok {
		return nil, nil, fmt.Errorf("no schema for %s", obj.GroupVersionKind())
	}
	ctx := context.Background()
	// The API server reads metadata before any validation and refuses the request when it is not an
	// object ("invalid metadata: expected object").
	if err := coerceMetadata(obj.DeepCopy().Object); err != nil {
		return obj.DeepCopy(), []Violation{{Path: "metadata", Reason: err.Error()}}, nil
	}
	stored := k.admit(obj)
	unknown := pruning.PruneWithOptions(stored.Object, k.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	sort.Strings(unknown)
	var violations []Violation
	for _, p := range unknown {
		violations = append(violations, Violation{Path: p, Reason: fmt.Sprintf("unknown field %q", p)})
	}
	structuraldefaulting.Default(stored.Object, k.structural)

	var errs field.ErrorList
	if old == nil {
		k.strategy.PrepareForCreate(ctx, stored)
		errs = k.strategy.Validate(ctx, stored)
	} else {
		oldStored := k.admit(old)
		// An apply or patch carries no resourceVersion; the API server updates the stored one.
		if oldStored.GetResourceVersion() == "" {
			oldStored.SetResourceVersion("1")
		}
		if stored.GetResourceVersion() == "" {
			stored.SetResourceVersion(oldStored.GetResourceVersion())
		}
		pruning.Prune(oldStored.Object, k.structural, true)
		structuraldefaulting.Default(oldStored.Object, k.structural)
		k.strategy.PrepareForUpdate(ctx, stored, oldStored)
		errs = k.strategy.ValidateUpdate(ctx, stored, oldStored)
	}
	validated := make([]Violation, 0, len(errs))
	for _, e := range errs {
		p := e.Field
		if p == "<nil>" { // an error about the whole object
			p = ""
		}
		validated = append(validated, Violation{Path: p, Reason: e.ErrorBody()})
	}
	// The API server's schema validator walks an object's properties in map order, so two
	// violations come back in either order from one call to the next; a refusal printed twice
	// reads the same when they are sorted.
	sort.SliceStable(validated, func(i, j int) bool {
		if validated[i].Path != validated[j].Path {
			return validated[i].Path < validated[j].Path
		}
		return validated[i].Reason < validated[j].Reason
	})
	return stored, append(violations, validated...), nil
}

// Default returns obj as the API server would store it, status included: unknown fields pruned and
// schema defaults applied. Objects of kinds the Checker does not know come back unchanged.
func (c *Checker) Default(obj *unstructured.Unstructured) *unstructured.Unstructured {
	k, ok := c.kinds[obj.GroupVersionKind()]
	if !ok {
		return obj.DeepCopy()
	}
	out := k.admit(obj)
	pruning.Prune(out.Object, k.structural, true)
	structuraldefaulting.Default(out.Object, k.structural)
	return out
}

// admit copies obj the way a client submits it and the API server decodes it: its metadata read as
// coerceMetadata reads it, and a namespaced object without a namespace in the client's namespace,
// which offline is "default".
func (k *kind) admit(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := obj.DeepCopy()
	_ = coerceMetadata(out.Object) // metadata that is not an object is Check's refusal
	if k.namespaced && out.GetNamespace() == "" {
		out.SetNamespace("default")
	}
	return out
}

// coerceMetadata reads obj's metadata as the API server decodes a custom resource's: a null one is
// empty, a field of the wrong type (finalizers: 0) is dropped, and one that is not an object is an
// error. Well-formed metadata is left exactly as written.
func coerceMetadata(obj map[string]any) error {
	m, found := obj["metadata"]
	if !found {
		return nil
	}
	if m == nil {
		obj["metadata"] = map[string]any{}
		return nil
	}
	raw, err := utiljson.Marshal(m)
	if err == nil && utiljson.Unmarshal(raw, &metav1.ObjectMeta{}) == nil {
		return nil
	}
	meta, _, _, err := objectmeta.GetObjectMetaWithOptions(obj, objectmeta.ObjectMetaOptions{DropMalformedFields: true})
	if err != nil {
		return err
	}
	if err := objectmeta.SetObjectMeta(obj, meta); err != nil {
		return err
	}
	if md, ok := obj["metadata"].(map[string]any); ok && md["creationTimestamp"] == nil {
		delete(md, "creationTimestamp") // the zero time, which no client wrote
	}
	return nil
}

// Document is one object read from a manifest file.
type Document struct {
	// Source is the file and, for multi-document files, the document's position: file.yaml#2.
	Source string
	Object *unstructured.Unstructured
}

// SplitDocuments reads the objects of a YAML or JSON stream, skipping empty documents. A document's
// Source counts only the objects before it, as kubectl does.
func SplitDocuments(name string, data []byte) ([]Document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs []Document
	for {
		part, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		// Numbers decode as the API server decodes them: a whole number is an int64, never a
		// float64, which a CEL rule reading an integer field refuses to evaluate ("expected int,
		// got float64").
		m := map[string]any{}
		raw, err := utilyaml.ToJSON(part)
		if err == nil {
			err = utiljson.Unmarshal(raw, &m)
		}
		if err != nil {
			return nil, fmt.Errorf("%s#%d: %w", name, len(docs)+1, err)
		}
		if len(m) == 0 {
			continue
		}
		docs = append(docs, Document{Source: fmt.Sprintf("%s#%d", name, len(docs)+1), Object: &unstructured.Unstructured{Object: m}})
	}
}

// Key identifies an object across files: kind, namespace and name. A stored version given with
// --old is the one with the same key.
func Key(obj *unstructured.Unstructured) string {
	return obj.GroupVersionKind().String() + "/" + obj.GetNamespace() + "/" + obj.GetName()
}

// Describe names an object for a report: Kind namespace/name.
func Describe(obj *unstructured.Unstructured) string {
	name := obj.GetName()
	if ns := obj.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return obj.GetKind() + " " + name
}
