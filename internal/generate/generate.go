// Package generate produces every generated file of the repository from the Go types in apis/:
// deepcopy functions, the CRDs of the plain kinds, the Crossplane XRDs of the composite kinds, their
// Compositions, and the API reference page (docs/reference.md) rendered from those CRDs and XRDs. It
// returns the files instead of writing them, so a test can compare a fresh generation with what is
// committed.
package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	xpv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	"golang.org/x/tools/go/packages"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-tools/pkg/crd"
	"sigs.k8s.io/controller-tools/pkg/deepcopy"
	"sigs.k8s.io/controller-tools/pkg/genall"
	"sigs.k8s.io/controller-tools/pkg/loader"
	"sigs.k8s.io/yaml"
)

// Directories, relative to the repository root, that hold nothing but generated files.
const (
	CRDDir         = "package/crds"
	XRDDir         = "package/xrds"
	CompositionDir = "package/compositions"
	DeepCopyFile   = "zz_generated.deepcopy.go"
)

// The names Crossplane gives the project's Functions when a Configuration depends on them:
// xpkg.ToDNSLabel of the package repository path without its registry.
const (
	FunctionRenderRoles = "mdplane-function-render-roles"
	FunctionKVCache     = "mdplane-function-kv-cache"
)

// composite is one composite kind and the pipeline of its Composition.
type composite struct {
	group, plural string
	steps         []xpv1.PipelineStep
}

func step(name, function string) xpv1.PipelineStep {
	return xpv1.PipelineStep{Step: name, FunctionRef: xpv1.FunctionReference{Name: function}}
}

// workerGroup is the API group of the composite kinds. It is spelled out rather than imported
// because the generator must build before the deepcopy functions its package needs exist.
const workerGroup = "worker.gpustack.ai"

// composites are the kinds served as Crossplane XRs; every other kind in apis/ is a plain CRD.
var composites = []composite{
	{group: workerGroup, plural: "modeldeployments", steps: []xpv1.PipelineStep{
		step("render-roles", FunctionRenderRoles), step("kv-cache", FunctionKVCache),
	}},
}

// Files are generated files keyed by their slash-separated path relative to the repository root.
type Files map[string][]byte

// Paths returns the paths in a stable order.
func (f Files) Paths() []string {
	paths := make([]string, 0, len(f))
	for p := range f {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// Generate runs controller-tools over root/apis/... and derives the XRDs, the Compositions and the
// API reference page.
func Generate(root string) (Files, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	out := &memoryOutput{root: root, files: Files{}}
	gens := genall.Generators{}
	var dc genall.Generator = deepcopy.Generator{}
	var cg genall.Generator = crd.Generator{}
	gens = append(gens, &dc, &cg)
	rt, err := gens.ForRootsWithConfig(&packages.Config{Dir: root}, "./apis/...")
	if err != nil {
		return nil, fmt.Errorf("loading apis: %w", err)
	}
	rt.OutputRules = genall.OutputRules{Default: out}
	var errs bytes.Buffer
	rt.ErrorWriter = &errs
	if failed := rt.Run(); failed {
		return nil, fmt.Errorf("controller-tools failed: %s", strings.TrimSpace(errs.String()))
	}

	files, kinds := Files{}, []referenceKind(nil)
	for path, content := range out.files {
		if strings.HasSuffix(path, ".go") {
			files[path] = content
			continue
		}
		kind, err := files.addKind(path, content)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, kind)
	}
	for _, c := range composites {
		if _, ok := files[XRDDir+"/"+c.group+"_"+c.plural+".yaml"]; !ok {
			return nil, fmt.Errorf("no CRD was generated for composite %s.%s", c.plural, c.group)
		}
	}
	files[ReferencePage] = referencePage(kinds)
	return files, nil
}

// addKind adds the files of one CRD controller-tools generated: the CRD itself for a plain kind, an
// XRD and a Composition for a composite one. It returns the kind as the reference page shows it.
func (f Files) addKind(path string, content []byte) (referenceKind, error) {
	var c extv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(content, &c); err != nil {
		return referenceKind{}, fmt.Errorf("reading generated CRD %s: %w", path, err)
	}
	comp, isComposite := compositeFor(c.Spec.Group, c.Spec.Names.Plural)
	var err error
	if !isComposite {
		if f[CRDDir+"/"+path], err = withoutGeneratorVersion(content); err != nil {
			return referenceKind{}, err
		}
		return crdReference(&c)
	}
	xrd, err := xrdFor(&c)
	if err != nil {
		return referenceKind{}, err
	}
	if f[XRDDir+"/"+path], err = marshal(xrd); err != nil {
		return referenceKind{}, err
	}
	if f[CompositionDir+"/"+path], err = marshal(compositionFor(&c, comp)); err != nil {
		return referenceKind{}, err
	}
	return xrdReference(xrd)
}

func compositeFor(group, plural string) (composite, bool) {
	for _, c := range composites {
		if c.group == group && c.plural == plural {
			return c, true
		}
	}
	return composite{}, false
}

// xrdFor turns the CRD controller-tools generated for a composite kind into the XRD Crossplane
// derives that CRD from again. Crossplane owns metadata, spec.crossplane and status.conditions of an
// XR, so the XRD declares only the kind's own spec and status.
func xrdFor(c *extv1.CustomResourceDefinition) (*xpv2.CompositeResourceDefinition, error) {
	if len(c.Spec.Versions) != 1 {
		return nil, fmt.Errorf("composite %s must have exactly one version", c.Name)
	}
	v := c.Spec.Versions[0]
	s := v.Schema.OpenAPIV3Schema
	status := s.Properties["status"]
	delete(status.Properties, "conditions")
	schema := extv1.JSONSchemaProps{
		Type:         "object",
		Description:  s.Description,
		Required:     []string{"spec"},
		XValidations: s.XValidations,
		Properties: map[string]extv1.JSONSchemaProps{
			"spec":   s.Properties["spec"],
			"status": status,
		},
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil, err
	}
	scope := xpv2.CompositeResourceScopeNamespaced
	if c.Spec.Scope == extv1.ClusterScoped {
		scope = xpv2.CompositeResourceScopeCluster
	}
	return &xpv2.CompositeResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: xpv2.SchemeGroupVersion.String(), Kind: xpv2.CompositeResourceDefinitionKind},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name},
		Spec: xpv2.CompositeResourceDefinitionSpec{
			Group:                 c.Spec.Group,
			Names:                 c.Spec.Names,
			Scope:                 scope,
			DefaultCompositionRef: &xpv2.CompositionReference{Name: c.Name},
			Versions: []xpv2.CompositeResourceDefinitionVersion{{
				Name:                     v.Name,
				Served:                   true,
				Referenceable:            true,
				AdditionalPrinterColumns: v.AdditionalPrinterColumns,
				Schema:                   &xpv2.CompositeResourceValidation{OpenAPIV3Schema: runtime.RawExtension{Raw: raw}},
			}},
		},
	}, nil
}

func compositionFor(c *extv1.CustomResourceDefinition, comp composite) *xpv1.Composition {
	return &xpv1.Composition{
		TypeMeta:   metav1.TypeMeta{APIVersion: xpv1.SchemeGroupVersion.String(), Kind: xpv1.CompositionKind},
		ObjectMeta: metav1.ObjectMeta{Name: c.Name},
		Spec: xpv1.CompositionSpec{
			CompositeTypeRef: xpv1.TypeReference{
				APIVersion: c.Spec.Group + "/" + c.Spec.Versions[0].Name,
				Kind:       c.Spec.Names.Kind,
			},
			Mode:     xpv1.CompositionModePipeline,
			Pipeline: comp.steps,
		},
	}
}

// marshal writes an object as YAML without what only a cluster fills in: the zero creationTimestamp
// and status typed objects carry.
func marshal(obj any) ([]byte, error) {
	j, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "creationTimestamp")
	}
	delete(m, "status")
	y, err := yaml.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte("---\n"), y...), nil
}

// withoutGeneratorVersion drops the controller-gen version annotation, which reads "(devel)" or a
// module version depending on how the generator binary was built; the pinned go.mod line records
// the version instead.
func withoutGeneratorVersion(crdYAML []byte) ([]byte, error) {
	var m map[string]any
	if err := yaml.Unmarshal(crdYAML, &m); err != nil {
		return nil, err
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		delete(md, "annotations")
	}
	return marshal(m)
}

// memoryOutput collects what controller-tools writes. Go files land beside their package; YAML is
// keyed by its bare file name.
type memoryOutput struct {
	root  string
	files Files
}

func (o *memoryOutput) Open(pkg *loader.Package, name string) (io.WriteCloser, error) {
	path := name
	if pkg != nil {
		if len(pkg.GoFiles) == 0 {
			return nil, fmt.Errorf("package %s has no Go files", pkg.PkgPath)
		}
		rel, err := filepath.Rel(o.root, filepath.Join(filepath.Dir(pkg.GoFiles[0]), name))
		if err != nil {
			return nil, err
		}
		path = filepath.ToSlash(rel)
	}
	return &memoryFile{path: path, files: o.files}, nil
}

type memoryFile struct {
	bytes.Buffer
	path  string
	files Files
}

func (f *memoryFile) Close() error {
	f.files[f.path] = bytes.Clone(f.Bytes())
	return nil
}
