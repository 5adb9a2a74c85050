package settings

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GroupVersionKind is the EnvironmentConfig's.
var GroupVersionKind = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}

// IsSettings reports whether an object is the mdplane-settings EnvironmentConfig (any version of the
// group, so a later served version is still recognised).
func IsSettings(u *unstructured.Unstructured) bool {
	if u == nil {
		return false
	}
	gvk := u.GroupVersionKind()
	return gvk.Group == Group && gvk.Kind == Kind && u.GetName() == EnvironmentConfigName
}

// FromObject parses an EnvironmentConfig's data; nil (no object) is all defaults. A data that is not
// a map is a refusal.
func FromObject(u *unstructured.Unstructured) (Settings, []string, field.ErrorList) {
	if u == nil {
		return Defaults(), nil, nil
	}
	raw, ok := u.Object["data"]
	if !ok || raw == nil {
		return Defaults(), nil, nil
	}
	data, ok := raw.(map[string]any)
	if !ok {
		return Defaults(), nil, field.ErrorList{field.Invalid(field.NewPath("data"), raw, "want a map of Setting names to values")}
	}
	return Parse(data)
}

// Getter reads objects (webhooks.Reader and client.Reader both are one).
type Getter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// Get reads the mdplane-settings EnvironmentConfig through r and parses it. A missing object, or an
// API server that does not serve EnvironmentConfigs, is all defaults; a bad value is an error that
// names the key, the value and the way out (Error); the warnings name ignored keys.
func Get(ctx context.Context, r Getter) (Settings, []string, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GroupVersionKind)
	err := r.Get(ctx, client.ObjectKey{Name: EnvironmentConfigName}, u)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		return Defaults(), nil, nil
	case err != nil:
		return Settings{}, nil, fmt.Errorf("reading EnvironmentConfig %s: %w", EnvironmentConfigName, err)
	}
	s, warnings, errs := FromObject(u)
	if len(errs) > 0 {
		return Settings{}, warnings, Error(errs)
	}
	return s, warnings, nil
}
