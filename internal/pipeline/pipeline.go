// Package pipeline runs mdplane's Compositions in-process the way Crossplane calls them, for a fresh
// deployment: each composite's pipeline steps in order, required resources fetched from a given set
// of objects until the requirements settle, and every composite a step composes rendered in turn,
// down to the Pods. It is what `mdplane render` and the render tests use.
package pipeline

import (
	"context"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xcrd"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/schemacheck"
)

// Crossplane's metadata on composed resources.
const (
	AnnotationCompositionResourceName = xcrd.AnnotationKeyCompositionResourceName
	LabelComposite                    = "crossplane.io/composite"
)

// maxRequirementIterations is how often Crossplane calls a step while its requirements change.
const maxRequirementIterations = 5

// Engine renders composites with the Compositions and Functions it was given.
type Engine struct {
	// compositions maps a composite's apiVersion and kind to its Composition's pipeline.
	compositions map[string][]xpv1.PipelineStep
	// functions maps a Function's name to its in-process implementation.
	functions map[string]fnv1.FunctionRunnerServiceServer
	// materializers maps a composite's apiVersion and kind to what a controller creates for it.
	materializers map[string]Materializer
	// Skipped records steps whose Function is not built in, so callers can say so.
	Skipped []string
	// Required records the kinds the functions asked to read, so a caller can check Crossplane may
	// read each of them.
	Required map[schema.GroupVersionKind]bool
}

// Materializer returns the objects a controller creates for a rendered composite beyond what its
// Composition composes, reading what it needs from cluster.
type Materializer func(composite *unstructured.Unstructured, cluster []*unstructured.Unstructured) ([]*unstructured.Unstructured, error)

// NewEngine reads every Composition under compositions/ of fsys. materializers, keyed by
// apiVersion/kind, add to a composite's render what a controller creates for it.
func NewEngine(fsys fs.FS, functions map[string]fnv1.FunctionRunnerServiceServer, materializers map[string]Materializer) (*Engine, error) {
	e := &Engine{compositions: map[string][]xpv1.PipelineStep{}, functions: functions, materializers: materializers}
	names, err := fs.Glob(fsys, "compositions/*.yaml")
	if err != nil {
		return nil, err
	}
	for _, name := range names {
		raw, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		c := &xpv1.Composition{}
		if err := yaml.Unmarshal(raw, c); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		e.compositions[c.Spec.CompositeTypeRef.APIVersion+"/"+c.Spec.CompositeTypeRef.Kind] = c.Spec.Pipeline
	}
	return e, nil
}

// Output is one composite's render: its desired status and what it composes, in a stable order.
type Output struct {
	// Input is the composite as it was rendered from.
	Input *unstructured.Unstructured
	// Composite is the composite with the status its pipeline wrote; nil for an object that has no
	// Composition, only what a controller materializes for it.
	Composite *unstructured.Unstructured
	// Composed are the composed resources, keyed by composition resource name, in name order with
	// numbers compared as numbers.
	Composed []Composed
	// Materialized are the objects a controller creates for the composite, in the order it does.
	Materialized []*unstructured.Unstructured
}

// Composed is one composed resource.
type Composed struct {
	Name   string
	Object *unstructured.Unstructured
}

// Render renders xr and, recursively, every composite it composes that has a Composition, and every
// object a controller materializes something for (its own level, with no Composite). cluster
// holds the objects required resources are fetched from; what a step composes is added to it as the
// render goes, as it would be on a cluster.
func (e *Engine) Render(ctx context.Context, xr *unstructured.Unstructured, cluster []*unstructured.Unstructured) ([]Output, error) {
	out, err := e.renderOne(ctx, xr, cluster)
	if err != nil {
		return nil, err
	}
	if m, ok := e.materializers[xr.GetAPIVersion()+"/"+xr.GetKind()]; ok {
		if out.Materialized, err = m(xr, cluster); err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", xr.GetKind(), xr.GetNamespace(), xr.GetName(), err)
		}
	}
	return e.below(ctx, *out, cluster)
}

// below is out followed by the render of everything under it: each object it composes or a
// controller creates for it that is a composite is rendered, and each that a controller
// materializes something for is materialized, level by level.
func (e *Engine) below(ctx context.Context, out Output, cluster []*unstructured.Unstructured) ([]Output, error) {
	all := []Output{out}
	// What this level composes, and what a controller creates for it, is visible below it, not
	// to the caller.
	cluster = slices.Clone(cluster)
	var children []*unstructured.Unstructured
	for _, c := range out.Composed {
		children = append(children, c.Object)
	}
	children = append(children, out.Materialized...)
	cluster = append(cluster, children...)
	for _, c := range children {
		key := c.GetAPIVersion() + "/" + c.GetKind()
		_, composite := e.compositions[key]
		m, materialized := e.materializers[key]
		if !composite && !materialized {
			continue
		}
		child := c.DeepCopy()
		if child.GetName() == "" {
			// Offline there is no API server to generate a name; the generateName stem stands in.
			child.SetName(strings.TrimSuffix(child.GetGenerateName(), "-"))
		}
		var nested []Output
		var err error
		if composite {
			nested, err = e.Render(ctx, child, cluster)
		} else {
			// A kind mdplane's controllers reconcile without a Composition (a ModelRole, a
			// ModelReplica): what they create for it, and nothing else, is its level.
			var objs []*unstructured.Unstructured
			if objs, err = m(child, cluster); err != nil {
				return nil, fmt.Errorf("%s %s/%s: %w", child.GetKind(), child.GetNamespace(), child.GetName(), err)
			}
			nested, err = e.below(ctx, Output{Input: child, Materialized: objs}, cluster)
		}
		if err != nil {
			return nil, err
		}
		all = append(all, nested...)
	}
	return all, nil
}

func (e *Engine) renderOne(ctx context.Context, xr *unstructured.Unstructured, cluster []*unstructured.Unstructured) (*Output, error) {
	steps, ok := e.compositions[xr.GetAPIVersion()+"/"+xr.GetKind()]
	if !ok {
		return nil, fmt.Errorf("no Composition for %s %s", xr.GetAPIVersion(), xr.GetKind())
	}
	observed, err := structOf(xr)
	if err != nil {
		return nil, err
	}
	desired := &fnv1.State{}
	var conditions []*fnv1.Condition
	for _, step := range steps {
		fn, ok := e.functions[step.FunctionRef.Name]
		if !ok {
			e.Skipped = append(e.Skipped, fmt.Sprintf("%s step %s (function %s)", xr.GetKind(), step.Step, step.FunctionRef.Name))
			continue
		}
		rsp, err := e.runStep(ctx, fn, &fnv1.RunFunctionRequest{
			Meta:     &fnv1.RequestMeta{Tag: step.Step},
			Observed: &fnv1.State{Composite: &fnv1.Resource{Resource: observed}},
			Desired:  desired,
		}, cluster)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s, step %s: %w", xr.GetKind(), xr.GetNamespace(), xr.GetName(), step.Step, err)
		}
		desired = rsp.GetDesired()
		conditions = append(conditions, rsp.GetConditions()...)
	}
	out, err := output(xr, desired)
	if err != nil {
		return nil, err
	}
	setConditions(out.Composite, conditions)
	out.Input = xr
	return out, nil
}

// runStep calls a step until its requirements settle, fetching them from cluster in between.
func (e *Engine) runStep(ctx context.Context, fn fnv1.FunctionRunnerServiceServer, req *fnv1.RunFunctionRequest, cluster []*unstructured.Unstructured) (*fnv1.RunFunctionResponse, error) {
	var previous map[string]*fnv1.ResourceSelector
	for i := range maxRequirementIterations {
		rsp, err := fn.RunFunction(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, r := range rsp.GetResults() {
			if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
				return nil, fmt.Errorf("%s", r.GetMessage())
			}
		}
		wanted := rsp.GetRequirements().GetResources()
		if len(wanted) == 0 || i > 0 && sameSelectors(previous, wanted) {
			return rsp, nil
		}
		previous = wanted
		req.RequiredResources = map[string]*fnv1.Resources{}
		for name, sel := range wanted {
			if e.Required == nil {
				e.Required = map[schema.GroupVersionKind]bool{}
			}
			e.Required[schema.FromAPIVersionAndKind(sel.GetApiVersion(), sel.GetKind())] = true
			items, err := fetch(cluster, sel)
			if err != nil {
				return nil, err
			}
			req.RequiredResources[name] = items
		}
	}
	return nil, fmt.Errorf("requirements did not settle after %d calls", maxRequirementIterations)
}

func sameSelectors(a, b map[string]*fnv1.ResourceSelector) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !proto.Equal(v, w) {
			return false
		}
	}
	return true
}

// fetch answers a selector from cluster as Crossplane does: a Get by name, or a List by labels
// sorted by namespace and name.
func fetch(cluster []*unstructured.Unstructured, sel *fnv1.ResourceSelector) (*fnv1.Resources, error) {
	var matched []*unstructured.Unstructured
	for _, obj := range cluster {
		if obj.GetAPIVersion() != sel.GetApiVersion() || obj.GetKind() != sel.GetKind() {
			continue
		}
		if sel.Namespace != nil && obj.GetNamespace() != sel.GetNamespace() {
			continue
		}
		switch {
		case sel.GetMatchName() != "":
			if obj.GetName() == sel.GetMatchName() {
				matched = append(matched, obj)
			}
		case sel.GetMatchLabels() != nil:
			if labels.SelectorFromSet(sel.GetMatchLabels().GetLabels()).Matches(labels.Set(obj.GetLabels())) {
				matched = append(matched, obj)
			}
		}
	}
	sort.SliceStable(matched, func(i, j int) bool {
		if matched[i].GetNamespace() != matched[j].GetNamespace() {
			return matched[i].GetNamespace() < matched[j].GetNamespace()
		}
		return matched[i].GetName() < matched[j].GetName()
	})
	out := &fnv1.Resources{}
	for _, obj := range matched {
		s, err := structOf(obj)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, &fnv1.Resource{Resource: s})
	}
	return out, nil
}

// output applies what Crossplane adds to every composed resource and orders the result.
func output(xr *unstructured.Unstructured, desired *fnv1.State) (*Output, error) {
	out := &Output{Composite: &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": xr.GetAPIVersion(),
		"kind":       xr.GetKind(),
		"metadata":   map[string]any{"name": xr.GetName(), "namespace": xr.GetNamespace()},
	}}}
	if s := desired.GetComposite().GetResource(); s != nil {
		if status, ok := s.AsMap()["status"]; ok {
			out.Composite.Object["status"] = status
		}
	}
	for name, r := range desired.GetResources() {
		obj := &unstructured.Unstructured{}
		if err := resource.AsObject(r.GetResource(), obj); err != nil {
			return nil, err
		}
		obj.SetNamespace(xr.GetNamespace())
		if obj.GetName() == "" && obj.GetGenerateName() == "" {
			obj.SetGenerateName(xr.GetName() + "-")
		}
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AnnotationCompositionResourceName] = name
		obj.SetAnnotations(annotations)
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		// A nested composite passes on the label it carries, so every level names the root composite.
		l[LabelComposite] = xr.GetName()
		if root := xr.GetLabels()[LabelComposite]; root != "" {
			l[LabelComposite] = root
		}
		obj.SetLabels(l)
		out.Composed = append(out.Composed, Composed{Name: name, Object: obj})
	}
	sort.Slice(out.Composed, func(i, j int) bool { return naturalLess(out.Composed[i].Name, out.Composed[j].Name) })
	return out, nil
}

// setConditions writes the conditions the steps reported onto the composite, as Crossplane does (it
// adds its own Synced and Ready, and times, which an offline render does not have).
func setConditions(xr *unstructured.Unstructured, conditions []*fnv1.Condition) {
	if len(conditions) == 0 {
		return
	}
	statuses := map[fnv1.Status]string{
		fnv1.Status_STATUS_CONDITION_TRUE: "True", fnv1.Status_STATUS_CONDITION_FALSE: "False", fnv1.Status_STATUS_CONDITION_UNKNOWN: "Unknown",
	}
	var list []any
	for _, c := range conditions {
		m := map[string]any{"type": c.GetType(), "status": statuses[c.GetStatus()], "reason": c.GetReason()}
		if c.Message != nil {
			m["message"] = c.GetMessage()
		}
		list = append(list, m)
	}
	status, _ := xr.Object["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	status["conditions"] = list
	xr.Object["status"] = status
}

func structOf(obj *unstructured.Unstructured) (*structpb.Struct, error) {
	return structpb.NewStruct(obj.Object)
}

// naturalLess orders names with their numbers compared as numbers: replica-2 before replica-10.
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		ad, bd := leadingDigits(a), leadingDigits(b)
		if ad != "" && bd != "" {
			an, _ := strconv.Atoi(ad)
			bn, _ := strconv.Atoi(bd)
			if an != bn {
				return an < bn
			}
			a, b = a[len(ad):], b[len(bd):]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func leadingDigits(s string) string {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return s[:i]
}

// RenderDocuments admits every object among docs as a cluster would on create (schema, then
// mdplane's admission rules), then renders every ModelDeployment among them against the others
// (defaulted, status kept) and returns the composites and composed resources as multi-document YAML.
// Refusals and render failures come back as messages, one per line to print; err is for failures of
// the renderer itself.
func (e *Engine) RenderDocuments(ctx context.Context, checker *schemacheck.Checker, docs []schemacheck.Document) ([]byte, []string, error) {
	cluster, refusals, err := admission.Judge(checker, docs, nil)
	if err != nil {
		return nil, nil, err
	}
	var msgs []string
	for _, r := range refusals {
		msgs = append(msgs, r.String())
	}
	if len(msgs) > 0 {
		return nil, msgs, nil
	}
	var deployments []*unstructured.Unstructured
	for _, obj := range cluster {
		if obj.GroupVersionKind() == workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind) {
			deployments = append(deployments, obj)
		}
	}
	if len(deployments) == 0 {
		return nil, []string{"no ModelDeployment in the given manifests"}, nil
	}
	var out []byte
	for _, md := range deployments {
		rendered, err := e.Render(ctx, md, cluster)
		if err != nil {
			msgs = append(msgs, err.Error())
			continue
		}
		for _, o := range rendered {
			var objs []*unstructured.Unstructured
			if o.Composite != nil {
				objs = append(objs, o.Composite)
			}
			for _, c := range o.Composed {
				objs = append(objs, c.Object)
			}
			objs = append(objs, o.Materialized...)
			for _, obj := range objs {
				y, err := yaml.Marshal(obj.Object)
				if err != nil {
					return nil, nil, err
				}
				out = append(append(out, "---\n"...), y...)
			}
		}
	}
	if len(msgs) > 0 {
		return nil, msgs, nil
	}
	return out, nil, nil
}
