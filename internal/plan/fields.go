package plan

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// movedFields is the spec paths whose values differ between two deployments, in path order. Objects
// are followed down to their leaves; a list is one value (spec.roles[0].extraArgs). Roles are
// compared by position, which admission keeps (the role set cannot be edited). The deployment's
// min-render-version annotation is named too: it rolls replicas below the floor.
func movedFields(stored, edited *workerv1.ModelDeployment) map[string]string {
	moved := map[string]string{}
	was, is := asMap(stored.Spec), asMap(edited.Spec)
	wasRoles, _ := was["roles"].([]any)
	isRoles, _ := is["roles"].([]any)
	delete(was, "roles")
	delete(is, "roles")
	diff("spec", was, is, moved)
	for i := range max(len(wasRoles), len(isRoles)) {
		var a, b any
		if i < len(wasRoles) {
			a = wasRoles[i]
		}
		if i < len(isRoles) {
			b = isRoles[i]
		}
		diff(fmt.Sprintf("spec.roles[%d]", i), a, b, moved)
	}
	key := workerv1.AnnotationMinRenderVersion
	if a, b := stored.Annotations[key], edited.Annotations[key]; a != b {
		moved[fmt.Sprintf("metadata.annotations[%s]", key)] = change(orNone(a), orNone(b))
	}
	return moved
}

func asMap(v any) map[string]any {
	raw, _ := json.Marshal(v)
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}

// diff records at path every leaf that differs between a and b, with its old and new value.
func diff(path string, a, b any, into map[string]string) {
	am, aIsMap := a.(map[string]any)
	bm, bIsMap := b.(map[string]any)
	if aIsMap && bIsMap {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		for k := range keys {
			diff(path+"."+k, am[k], bm[k], into)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		into[path] = change(show(a), show(b))
	}
}

func show(v any) string {
	if v == nil {
		return "(none)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func change(from, to string) string { return from + " → " + to }

// rolePaths is the moved paths under one role's prefix, sorted; replicas apart.
func rolePaths(moved map[string]string, index int) []string {
	prefix := fmt.Sprintf("spec.roles[%d].", index)
	var fields []string
	for path := range moved {
		if strings.HasPrefix(path, prefix) && path != prefix+"replicas" {
			fields = append(fields, path)
		}
	}
	sort.Strings(fields)
	return fields
}

// deploymentPaths is the moved paths outside every role, sorted.
func deploymentPaths(moved map[string]string) []string {
	var out []string
	for path := range moved {
		if !strings.HasPrefix(path, "spec.roles[") {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out
}

// otherRolePaths is the moved paths of the roles other than index, replicas excluded, sorted.
func otherRolePaths(moved map[string]string, roles, index int) []string {
	var out []string
	for i := range roles {
		if i != index {
			out = append(out, rolePaths(moved, i)...)
		}
	}
	sort.Strings(out)
	return out
}
