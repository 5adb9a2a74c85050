package fuzzing_test

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/fuzzing"
	"github.com/mdplane/mdplane/internal/schemacheck"
)

func TestPathExists(t *testing.T) {
	obj := map[string]any{
		"metadata": map[string]any{"name": "a", "labels": map[string]any{"app.kubernetes.io/name": "x"}},
		"spec": map[string]any{"roles": []any{
			map[string]any{"name": "r", "env": []any{map[string]any{"name": "E"}}, "resources": map[string]any{"accelerator": int64(2)}},
		}},
	}
	for path, want := range map[string]bool{
		"spec.roles[0].resources.accelerator":     true,
		"spec.roles[0].env[0].name":               true,
		"spec.roles[0]":                           true,
		"spec.roles":                              true,
		"metadata.labels[app.kubernetes.io/name]": true,
		"metadata.labels.app.kubernetes.io/name":  true,
		"spec.roles[1]":                           false,
		"spec.roles[-1]":                          false,
		"spec.roles[01]":                          false,
		"spec.roles[0].env[0].value":              false,
		"spec.role":                               false,
		"spec.rolesx":                             false,
		"spec.roles.name":                         false,
		"metadata.name.x":                         false,
		"":                                        false,
	} {
		assert.Equal(t, want, fuzzing.PathExists(obj, path), path)
	}
	assert.True(t, fuzzing.NamesAField(fuzzing.Refusal{Schema: true}, obj), "the schema's note about the whole object")
	assert.False(t, fuzzing.NamesAField(fuzzing.Refusal{}, obj), "a webhook refusal names a field")
	assert.True(t, fuzzing.NamesAField(fuzzing.Refusal{Path: "kind", Required: true}, obj), "a top-level field's parent is the object")
	required := fuzzing.Refusal{Path: "spec.roles[0].instanceType", Required: true}
	assert.True(t, fuzzing.NamesAField(required, obj), "a missing required field names its parent")
	required.Required = false
	assert.False(t, fuzzing.NamesAField(required, obj), "any other refusal names the field itself")
}

// TestJudgeAgreesWithAdmission holds the fuzz targets' admission to what `mdplane render` admits:
// for every seed, the same refusals (by path) as admission.Judge among the world's documents.
func TestJudgeAgreesWithAdmission(t *testing.T) {
	w, err := fuzzing.LoadWorld()
	require.NoError(t, err)
	require.NotEmpty(t, w.Seeds)
	for _, s := range w.Seeds {
		t.Run(s.Name, func(t *testing.T) {
			obj, ok := fuzzing.Decode(s.YAML)
			require.True(t, ok)
			j, err := w.JudgeCreate(obj)
			require.NoError(t, err)
			var mine []string
			for _, r := range j.Refusals {
				mine = append(mine, r.Path)
			}
			docs := append(append([]schemacheck.Document(nil), w.Docs...), schemacheck.Document{Source: s.Name, Object: obj})
			_, refusals, err := admission.Judge(w.Checker, docs, nil)
			require.NoError(t, err)
			var theirs []string
			for _, r := range refusals {
				theirs = append(theirs, r.Path)
			}
			sort.Strings(mine)
			sort.Strings(theirs)
			assert.Equal(t, theirs, mine)
		})
	}
}

func TestSet(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{"spec": map[string]any{"roles": []any{map[string]any{"name": "r", "extraArgs": []any{"-tp", "2"}}}}}
	}
	for _, tc := range []struct {
		path  string
		value any
		ok    bool
	}{
		{"spec.roles[0].replicas", int64(3), true},
		{"spec.roles[0].extraArgs[1]", "4", true},
		{"spec.roles[0].extraArgs[2]", "--x", true},
		{"spec.roles[1]", map[string]any{"name": "s"}, true},
		{"metadata.labels[a.b/c]", "v", true},
		{"spec.kvCache.poolRef.name", "p", true},
		{"spec.roles[2]", "x", false},
		{"spec.roles[0].name.x", "x", false},
		{"spec.roles.x", "x", false},
		{"", "x", false},
		{"spec..x", "x", false},
		{"spec[", "x", false},
	} {
		obj := base()
		ok := fuzzing.Set(obj, tc.path, tc.value)
		assert.Equal(t, tc.ok, ok, tc.path)
		if ok {
			assert.True(t, fuzzing.PathExists(obj, tc.path), tc.path)
		} else {
			assert.Equal(t, base(), obj, "a path that cannot be followed changes nothing: %s", tc.path)
		}
	}
	assert.Equal(t, int64(3), fuzzing.DecodeValue([]byte("3")))
	assert.Equal(t, map[string]any{"name": "x"}, fuzzing.DecodeValue([]byte("{name: x}")))
	assert.Equal(t, "a: b: c", fuzzing.DecodeValue([]byte("a: b: c")))
}
