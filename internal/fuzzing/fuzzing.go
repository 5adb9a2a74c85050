// Package fuzzing holds what mdplane's fuzz targets share (docs/reliability.md, "Fuzzing"): the
// fixed cluster they admit and render against, the admission of one ModelDeployment as `mdplane
// render` admits it (schema, then the webhook's rules), the check that a refusal names a field of
// the object it refuses, and Go's fuzz corpus file format for the seed corpora. Only tests use it.
package fuzzing

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/settings"
	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

// Sources of the world and the seeds, relative to the repository root: the golden cluster first (its
// objects win a name both files use), then the examples' cluster, then every example and golden case.
var (
	clusterFiles = []string{"functions/testdata/cluster.yaml", "examples/cluster.yaml"}
	seedGlobs    = []string{"examples/*.yaml", "functions/testdata/cases/*.yaml"}
)

// World is the fixed cluster every fuzzed deployment is judged and rendered against: the objects of
// the golden and example clusters and the non-deployment objects the golden cases and examples
// declare (InstanceTypes, the KV cache chain, ModelArtifacts with their claims and volumes,
// RuntimeClasses), each admitted once, with the default Settings. EnvironmentConfigs are left out, so
// the Settings stay the defaults.
type World struct {
	Checker *schemacheck.Checker
	// Docs are the cluster's documents as read; Objects the same objects as stored (pruned,
	// defaulted, status kept).
	Docs          []schemacheck.Document
	Objects       []*unstructured.Unstructured
	InstanceTypes map[string]*workerv1.InstanceType
	Bindings      map[string]*workerv1.KVCachePoolBinding // by namespace/name
	Pools         map[string]*workerv1.KVCachePool
	Backends      map[string]*workerv1.KVCacheBackend
	Settings      settings.Settings
	// Seeds are the ModelDeployment documents of the examples and golden cases, each as YAML.
	Seeds []Seed
}

// Seed is one ModelDeployment document and where it came from (example-<file>[-<n>] or
// golden-<case>[-<n>]).
type Seed struct {
	Name string
	YAML []byte
}

// Root is the repository root: the nearest directory above the working directory holding go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// LoadWorld reads the world from the repository. A cluster object the world's own admission refuses
// is an error: the fixture must be admissible.
func LoadWorld() (*World, error) {
	root, err := Root()
	if err != nil {
		return nil, err
	}
	checker, err := schemacheck.ForPackage(manifests.FS)
	if err != nil {
		return nil, err
	}
	w := &World{Checker: checker, InstanceTypes: map[string]*workerv1.InstanceType{}, Bindings: map[string]*workerv1.KVCachePoolBinding{},
		Pools: map[string]*workerv1.KVCachePool{}, Backends: map[string]*workerv1.KVCacheBackend{}, Settings: settings.Defaults()}
	files := append([]string(nil), clusterFiles...)
	for _, g := range seedGlobs {
		more, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return nil, err
		}
		sort.Strings(more)
		for _, m := range more {
			rel, _ := filepath.Rel(root, m)
			if !contains(files, rel) {
				files = append(files, rel)
			}
		}
	}
	var docs []schemacheck.Document
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		more, err := schemacheck.SplitDocuments(f, data)
		if err != nil {
			return nil, err
		}
		n := 0
		for _, d := range more {
			switch d.Object.GetKind() {
			case workerv1.ModelDeploymentKind:
				n++
				w.Seeds = append(w.Seeds, Seed{Name: seedName(f), YAML: mustYAML(d.Object.Object)})
				if n > 1 {
					w.Seeds[len(w.Seeds)-1].Name += fmt.Sprintf("-%d", n)
				}
				continue
			case settings.Kind:
				continue
			}
			if key := schemacheck.Key(d.Object); !seen[key] {
				seen[key] = true
				docs = append(docs, d)
			}
		}
	}
	objects, refusals, err := admission.Judge(checker, docs, nil)
	if err != nil {
		return nil, err
	}
	if len(refusals) > 0 {
		return nil, fmt.Errorf("the fuzz world is not admissible: %v", refusals)
	}
	w.Docs, w.Objects = docs, objects
	for _, obj := range objects {
		if err := w.add(obj); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// seedName names a seed after its file: example-qwen-chat, golden-pd-pair.
func seedName(file string) string {
	stem := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if strings.HasPrefix(file, "examples/") {
		return "example-" + stem
	}
	return "golden-" + stem
}

func (w *World) add(obj *unstructured.Unstructured) error {
	if obj.GroupVersionKind().GroupVersion() != workerv1.SchemeGroupVersion {
		return nil
	}
	var err error
	switch obj.GetKind() {
	case workerv1.InstanceTypeKind:
		it := &workerv1.InstanceType{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, it)
		w.InstanceTypes[it.Name] = it
	case workerv1.KVCachePoolBindingKind:
		b := &workerv1.KVCachePoolBinding{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b)
		w.Bindings[b.Namespace+"/"+b.Name] = b
	case workerv1.KVCachePoolKind:
		p := &workerv1.KVCachePool{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, p)
		w.Pools[p.Name] = p
	case workerv1.KVCacheBackendKind:
		b := &workerv1.KVCacheBackend{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b)
		w.Backends[b.Name] = b
	}
	return err
}

// With is a copy of the world in which obj replaces the object of its kind, namespace and name (or
// joins the objects when there is none), as stored; w is left as it was.
func (w *World) With(obj *unstructured.Unstructured) (*World, error) {
	c := *w
	c.Objects = make([]*unstructured.Unstructured, 0, len(w.Objects)+1)
	key := schemacheck.Key(obj)
	for _, o := range w.Objects {
		if schemacheck.Key(o) != key {
			c.Objects = append(c.Objects, o)
		}
	}
	stored := w.Checker.Default(obj)
	c.Objects = append(c.Objects, stored)
	c.InstanceTypes, c.Bindings, c.Pools, c.Backends = maps.Clone(w.InstanceTypes), maps.Clone(w.Bindings), maps.Clone(w.Pools), maps.Clone(w.Backends)
	if err := c.add(stored); err != nil {
		return nil, err
	}
	return &c, nil
}

// Find returns the world's object of a kind by namespace and name, nil when there is none.
func (w *World) Find(apiVersion, kind, namespace, name string) *unstructured.Unstructured {
	for _, obj := range w.Objects {
		if obj.GetAPIVersion() == apiVersion && obj.GetKind() == kind && obj.GetNamespace() == namespace && obj.GetName() == name {
			return obj
		}
	}
	return nil
}

// Decode reads data as `mdplane render` reads a manifest and returns its one object when it is a
// ModelDeployment; ok is false for anything else (a decode error, no document, several, another kind).
// Decoding is not strict: unknown fields reach the schema check, which refuses them with their path,
// as strict field validation on the API server does.
func Decode(data []byte) (*unstructured.Unstructured, bool) {
	docs, err := schemacheck.SplitDocuments("fuzz", data)
	if err != nil || len(docs) != 1 {
		return nil, false
	}
	obj := docs[0].Object
	if obj.GroupVersionKind() != workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind) {
		return nil, false
	}
	return obj, true
}

// Refusal is one reason admission refuses an object: the field path and the message, whether it
// came from the schema or the webhook's rules, and whether it is about a missing required field.
type Refusal struct {
	Path, Reason     string
	Schema, Required bool
}

func (r Refusal) String() string {
	from := "webhook"
	if r.Schema {
		from = "schema"
	}
	return fmt.Sprintf("%s: %s (%s)", r.Path, r.Reason, from)
}

// Judged is an object as admission judged it.
type Judged struct {
	// Stored is the object as the rules read it: pruned and defaulted, status kept.
	Stored *unstructured.Unstructured
	// Deployment is Stored decoded; nil when the schema refused the object.
	Deployment *workerv1.ModelDeployment
	Refusals   []Refusal
}

// Admitted reports whether no rule refused the object.
func (j *Judged) Admitted() bool { return len(j.Refusals) == 0 }

// JudgeCreate judges obj as a create, as admission.Judge judges a ModelDeployment among the world's
// objects: the schema first, and only when it admits the object, the webhook's rules with the
// InstanceTypes, the KV cache chain and the Settings of the world. An error is a failure of the
// judge itself: an object the schema admits that the webhook cannot decode.
func (w *World) JudgeCreate(obj *unstructured.Unstructured) (*Judged, error) {
	return w.judge(obj, nil)
}

// JudgeUpdate judges obj as an update of the stored old.
func (w *World) JudgeUpdate(obj, old *unstructured.Unstructured) (*Judged, error) {
	return w.judge(obj, old)
}

func (w *World) judge(obj, old *unstructured.Unstructured) (*Judged, error) {
	_, violations, err := w.Checker.Check(obj, old)
	if err != nil {
		return nil, err
	}
	j := &Judged{Stored: w.Checker.Default(obj)}
	for _, v := range violations {
		j.Refusals = append(j.Refusals, Refusal{Path: v.Path, Reason: v.Reason, Schema: true,
			Required: strings.HasPrefix(v.Reason, field.ErrorTypeRequired.String())})
	}
	if len(j.Refusals) > 0 {
		return j, nil
	}
	md := &workerv1.ModelDeployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(j.Stored.Object, md); err != nil {
		return nil, fmt.Errorf("the schema admits a ModelDeployment the webhook cannot decode: %w", err)
	}
	j.Deployment = md
	cluster := validation.Cluster{InstanceTypes: w.InstanceTypes, KVCache: w.Chain(md), Settings: &w.Settings}
	var errs field.ErrorList
	if old == nil {
		errs = validation.ValidateCreate(md, cluster)
	} else {
		stored := &workerv1.ModelDeployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(w.Checker.Default(old).Object, stored); err != nil {
			return nil, fmt.Errorf("the stored ModelDeployment cannot be decoded: %w", err)
		}
		errs = validation.ValidateUpdate(md, stored, cluster)
	}
	for _, e := range errs {
		j.Refusals = append(j.Refusals, Refusal{Path: e.Field, Reason: e.ErrorBody(), Required: e.Type == field.ErrorTypeRequired})
	}
	return j, nil
}

// Chain is the KV cache chain a deployment names in the world, as admission reads it: nil without
// spec.kvCache, else the Binding, its pool and the pool's first backend, each nil when absent.
func (w *World) Chain(md *workerv1.ModelDeployment) *validation.KVCacheChain {
	return admission.CacheChain(md, w.Bindings, w.Pools, w.Backends)
}

// NamesAField reports whether a refusal's path names a field of one of objs (the object as written,
// as stored with its defaults, or for an update the stored object a removal refers to). A refusal
// of a missing required field names a field that is not there by definition: its parent must be.
// The schema's notes about the whole object (the API server's "some validation rules were not
// checked") have an empty path, which names the object itself; the webhook's refusals always name
// a field.
func NamesAField(r Refusal, objs ...map[string]any) bool {
	if r.Path == "" {
		return r.Schema
	}
	for _, obj := range objs {
		if obj == nil {
			continue
		}
		if PathExists(obj, r.Path) {
			return true
		}
		if r.Required {
			if parent := parentPath(r.Path); parent == "" || PathExists(obj, parent) {
				return true // a top-level field's parent is the object
			}
		}
	}
	return false
}

// PathExists reports whether a field path in the API server's spelling (spec.roles[0].env[1].name,
// metadata.labels[app.kubernetes.io/name]) names a value in obj. A dot inside a map key is matched
// against the keys present, so metadata.annotations.a.b/c finds the key "a.b/c" too. The empty path
// names nothing.
func PathExists(obj any, path string) bool {
	if path == "" {
		return false
	}
	return walk(obj, path)
}

func walk(node any, rest string) bool {
	if rest == "" {
		return true
	}
	switch n := node.(type) {
	case map[string]any:
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]")
			if end < 0 {
				return false
			}
			key := strings.Trim(rest[1:end], `'"`)
			v, ok := n[key]
			return ok && walk(v, strings.TrimPrefix(rest[end+1:], "."))
		}
		for key, v := range n {
			if !strings.HasPrefix(rest, key) {
				continue
			}
			after := rest[len(key):]
			switch {
			case after == "":
				return true
			case strings.HasPrefix(after, "."):
				if walk(v, after[1:]) {
					return true
				}
			case strings.HasPrefix(after, "["):
				if walk(v, after) {
					return true
				}
			}
		}
		return false
	case []any:
		if !strings.HasPrefix(rest, "[") {
			return false
		}
		end := strings.Index(rest, "]")
		if end < 0 {
			return false
		}
		var i int
		if _, err := fmt.Sscanf(rest[1:end], "%d", &i); err != nil || fmt.Sprint(i) != rest[1:end] || i < 0 || i >= len(n) {
			return false
		}
		return walk(n[i], strings.TrimPrefix(rest[end+1:], "."))
	}
	return false
}

// parentPath drops a path's last step: spec.roles[0].name → spec.roles[0], spec.roles[0] →
// spec.roles, spec → "" (the object).
func parentPath(path string) string {
	if i := strings.LastIndexAny(path, ".["); i > 0 {
		return path[:i]
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func mustYAML(v any) []byte {
	b, err := yaml.Marshal(v)
	if err != nil {
		panic(err) // an object decoded from YAML marshals back
	}
	return b
}

// Set writes value at a field path (spec.roles[0].extraArgs[2], metadata.labels[a/b]) in obj,
// creating the maps on the way; an index one past a list's end appends. It reports whether the path
// could be followed: not through a scalar, not past a list's end, not an empty or malformed path.
func Set(obj map[string]any, path string, value any) bool {
	steps, ok := parsePath(path)
	if !ok {
		return false
	}
	var set func(node any, steps []step) (any, bool)
	set = func(node any, steps []step) (any, bool) {
		if len(steps) == 0 {
			return value, true
		}
		s := steps[0]
		if s.index < 0 {
			m, isMap := node.(map[string]any)
			if node == nil {
				m, isMap = map[string]any{}, true
			}
			if !isMap {
				return nil, false
			}
			v, ok := set(m[s.key], steps[1:])
			if ok {
				m[s.key] = v
			}
			return m, ok
		}
		l, isList := node.([]any)
		if node == nil {
			isList = true
		}
		if !isList || s.index > len(l) {
			return nil, false
		}
		if s.index == len(l) {
			l = append(l, nil)
		}
		v, ok := set(l[s.index], steps[1:])
		if ok {
			l[s.index] = v
		}
		return l, ok
	}
	_, ok = set(obj, steps)
	return ok
}

// step is one step of a field path: a map key, or a list index (index ≥ 0).
type step struct {
	key   string
	index int
}

// parsePath splits a field path into its steps: dotted keys, [n] indexes, [key] keys.
func parsePath(path string) ([]step, bool) {
	var out []step
	for path != "" {
		switch {
		case strings.HasPrefix(path, "["):
			end := strings.Index(path, "]")
			if end < 0 {
				return nil, false
			}
			inner := path[1:end]
			if n, err := strconv.Atoi(inner); err == nil && n >= 0 && n < 1<<16 {
				out = append(out, step{index: n})
			} else {
				out = append(out, step{key: inner, index: -1})
			}
			path = strings.TrimPrefix(path[end+1:], ".")
		default:
			end := strings.IndexAny(path, ".[")
			if end < 0 {
				end = len(path)
			}
			if end == 0 {
				return nil, false
			}
			out = append(out, step{key: path[:end], index: -1})
			path = strings.TrimPrefix(path[end:], ".")
		}
	}
	return out, len(out) > 0
}

// DecodeValue reads a fuzzed value as YAML the way a manifest's values are read (whole numbers as
// int64); what is not YAML is the string itself.
func DecodeValue(data []byte) any {
	raw, err := yaml.YAMLToJSON(data)
	var v any
	if err != nil || utiljson.Unmarshal(raw, &v) != nil {
		return string(data)
	}
	return v
}
