// Package xfn holds what mdplane's composition functions share of the function protocol: reading a
// composite into Go types, writing the desired composite's status, and reporting a render failure.
package xfn

import (
	"encoding/json"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/settings"
)

// ReasonRenderFailed is the reason of the result, and so of the event, a failed render reports.
const ReasonRenderFailed = "RenderFailed"

// Decode converts a decoded object (maps, slices, scalars) into a typed one. Unknown fields, such as
// the spec.crossplane block of an XR, are ignored.
func Decode(from, into any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// Fatal reports a render failure on the composite. Crossplane applies and deletes nothing after a
// fatal result, so what is running is left alone.
func Fatal(rsp *fnv1.RunFunctionResponse, err error) {
	rsp.Results = append(rsp.Results, &fnv1.Result{
		Severity: fnv1.Severity_SEVERITY_FATAL,
		Message:  err.Error(),
		Reason:   ptr.To(ReasonRenderFailed),
		Target:   fnv1.Target_TARGET_COMPOSITE.Enum(),
	})
}

// SetDesiredStatus writes a typed status (a pointer to an API status struct) onto the desired
// composite, converting it to unstructured once, here. Each top-level field the status holds replaces
// what an earlier step wrote and the others are kept; the fields named in remove are removed. The API
// types leave out what is unset (omitempty), so a count or flag reported even at zero is a pointer.
// Crossplane applies only the desired composite's status.
func SetDesiredStatus(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite, status any, remove ...string) error {
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(status)
	if err != nil {
		return fmt.Errorf("cannot convert the status of %s: %w", xr.Resource.GetName(), err)
	}
	dxr, err := request.GetDesiredCompositeResource(req)
	if err != nil {
		return fmt.Errorf("cannot read the desired composite: %w", err)
	}
	dxr.Resource.SetAPIVersion(xr.Resource.GetAPIVersion())
	dxr.Resource.SetKind(xr.Resource.GetKind())
	for _, k := range remove {
		unstructured.RemoveNestedField(dxr.Resource.Object, "status", k)
	}
	for k, v := range fields {
		if v == nil {
			continue // a nil pointer or slice without omitempty: the status does not hold the field
		}
		if err := dxr.Resource.SetValue("status."+k, v); err != nil {
			return err
		}
	}
	ready := rsp.GetDesired().GetComposite().GetReady() // a readiness already stated is kept
	if err := response.SetDesiredCompositeResource(rsp, dxr); err != nil {
		return err
	}
	rsp.Desired.Composite.Ready = ready
	return nil
}

// StateReadiness states the composite's readiness outright from the desired composed resources, once
// a step has composed its own: ready when there are some, every one is ready and no earlier step
// stated not ready. It then marks each composed resource ready. Crossplane records an event on the
// composite for every composed resource it is told is not ready, on every reconcile (a dozen event
// writes in a 20-replica rolling edit); a stated readiness supersedes the resources' own, so the
// composite is Ready exactly when it was before and those writes are spared. Each step of the
// pipeline calls it, so the verdict is the conjunction of every step's resources.
func StateReadiness(rsp *fnv1.RunFunctionResponse) {
	resources := rsp.GetDesired().GetResources()
	ready := len(resources) > 0 && rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE
	for _, r := range resources {
		if r.GetReady() != fnv1.Ready_READY_TRUE {
			ready = false
		}
		r.Ready = fnv1.Ready_READY_TRUE
	}
	SetDesiredReady(rsp, ready)
}

// SetDesiredReady states the composite's readiness outright, where Crossplane would otherwise derive
// it from the readiness of every composed resource; the rest of the desired composite is kept.
func SetDesiredReady(rsp *fnv1.RunFunctionResponse, ready bool) {
	if rsp.GetDesired() == nil {
		rsp.Desired = &fnv1.State{}
	}
	if rsp.Desired.GetComposite() == nil {
		rsp.Desired.Composite = &fnv1.Resource{}
	}
	rsp.Desired.Composite.Ready = fnv1.Ready_READY_FALSE
	if ready {
		rsp.Desired.Composite.Ready = fnv1.Ready_READY_TRUE
	}
}

// ToMap turns a typed object into the map a desired composed resource holds. It drops what only the
// API server fills in — status, and the null creationTimestamp typed metadata marshals at every
// depth (a Pod template carries one too) — so Crossplane never claims ownership of them.
func ToMap(obj any) (map[string]any, error) {
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	dropNullTimestamps(m)
	delete(m, "status")
	return m, nil
}

func dropNullTimestamps(v any) {
	switch t := v.(type) {
	case map[string]any:
		if ts, ok := t["creationTimestamp"]; ok && ts == nil {
			delete(t, "creationTimestamp")
		}
		for _, child := range t {
			dropNullTimestamps(child)
		}
	case []any:
		for _, child := range t {
			dropNullTimestamps(child)
		}
	}
}

// Requirements collects the resources a step needs Crossplane to fetch. Crossplane calls the step
// again until they stop changing, so every call must ask for the same ones given the same inputs.
type Requirements struct {
	req *fnv1.RunFunctionRequest
	rsp *fnv1.RunFunctionResponse
	// Pending is true while a requirement has not been resolved by Crossplane yet.
	Pending bool
}

// NewRequirements starts the requirements of a step on its response.
func NewRequirements(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) *Requirements {
	if rsp.Requirements == nil {
		rsp.Requirements = &fnv1.Requirements{}
	}
	if rsp.Requirements.Resources == nil {
		rsp.Requirements.Resources = map[string]*fnv1.ResourceSelector{}
	}
	return &Requirements{req: req, rsp: rsp}
}

// ByName requires one object by name (namespace empty for cluster-scoped kinds) and returns it,
// nil when Crossplane found none or has not fetched it yet.
func (r *Requirements) ByName(key, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	sel := &fnv1.ResourceSelector{ApiVersion: apiVersion, Kind: kind, Match: &fnv1.ResourceSelector_MatchName{MatchName: name}}
	if namespace != "" {
		sel.Namespace = ptr.To(namespace)
	}
	items, err := r.require(key, sel)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	return items[0], nil
}

// ByLabels requires every object of a kind in a namespace carrying the labels.
func (r *Requirements) ByLabels(key, apiVersion, kind, namespace string, labels map[string]string) ([]*unstructured.Unstructured, error) {
	return r.require(key, &fnv1.ResourceSelector{
		ApiVersion: apiVersion, Kind: kind, Namespace: ptr.To(namespace),
		Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: labels}},
	})
}

func (r *Requirements) require(key string, sel *fnv1.ResourceSelector) ([]*unstructured.Unstructured, error) {
	r.rsp.Requirements.Resources[key] = sel
	items, resolved, err := request.GetRequiredResource(r.req, key)
	if err != nil {
		return nil, fmt.Errorf("cannot read required resource %s: %w", key, err)
	}
	if !resolved {
		r.Pending = true
		return nil, nil
	}
	out := make([]*unstructured.Unstructured, 0, len(items))
	for _, i := range items {
		out = append(out, i.Resource)
	}
	return out, nil
}

// SettingsRequirement is the key the mdplane-settings EnvironmentConfig is required under.
const SettingsRequirement = "settings"

// Settings requires the mdplane-settings EnvironmentConfig and parses it: all defaults when it does
// not exist (or while Crossplane has not fetched it: the caller checks Pending), an error naming the
// key, the value and the way out when a value is bad, which fails the render. Keys mdplane does not
// read are ignored here; the EnvironmentConfig webhook warns of them when they are written.
func (r *Requirements) Settings() (settings.Settings, error) {
	obj, err := r.ByName(SettingsRequirement, settings.APIVersion, settings.Kind, "", settings.EnvironmentConfigName)
	if err != nil {
		return settings.Settings{}, err
	}
	s, _, errs := settings.FromObject(obj)
	if err := settings.Error(errs); err != nil {
		return settings.Settings{}, err
	}
	return s, nil
}

// Composed turns a typed object into a desired composed resource, ready or not. Crossplane counts a
// resource whose readiness is left unspecified as not ready, so a function always says.
func Composed(obj any, ready bool) (*resource.DesiredComposed, error) {
	m, err := ToMap(obj)
	if err != nil {
		return nil, err
	}
	r := resource.ReadyFalse
	if ready {
		r = resource.ReadyTrue
	}
	return &resource.DesiredComposed{Resource: &composed.Unstructured{Unstructured: unstructured.Unstructured{Object: m}}, Ready: r}, nil
}

// NestedCount reads a count from an object that came through the function protocol, where every
// number arrives as a float64.
func NestedCount(obj map[string]any, fields ...string) (int64, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(obj, fields...)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// SetCondition reports a condition of type typ on the composite; status is True, False or Unknown.
func SetCondition(rsp *fnv1.RunFunctionResponse, typ, status, reason, message string) {
	var opt *response.ConditionOption
	switch status {
	case "True":
		opt = response.ConditionTrue(rsp, typ, reason)
	case "False":
		opt = response.ConditionFalse(rsp, typ, reason)
	default:
		opt = response.ConditionUnknown(rsp, typ, reason)
	}
	opt.WithMessage(message).TargetComposite()
}
