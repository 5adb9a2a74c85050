package generate

import (
	"testing"

	"github.com/stretchr/testify/assert"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestConstraintsReadShort: each kind of validation a schema states, as the page's cells show it.
func TestConstraintsReadShort(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	for _, row := range []struct {
		rule   string
		schema extv1.JSONSchemaProps
		want   []string
	}{
		{"a default and a range", extv1.JSONSchemaProps{Default: &extv1.JSON{Raw: []byte(`1`)}, Minimum: f(1), Maximum: f(1024)}, []string{"default `1`", "1–1024"}},
		{"an empty default string stays visible", extv1.JSONSchemaProps{Default: &extv1.JSON{Raw: []byte(`""`)}}, []string{"default `\"\"`"}},
		{"an enum without quotes", extv1.JSONSchemaProps{Enum: []extv1.JSON{{Raw: []byte(`"TCP"`)}, {Raw: []byte(`"UDP"`)}}}, []string{"one of `TCP`, `UDP`"}},
		{"exclusive bounds", extv1.JSONSchemaProps{Minimum: f(0), ExclusiveMinimum: true, Maximum: f(1)}, []string{"> 0, ≤ 1"}},
		{"a lower bound alone", extv1.JSONSchemaProps{Minimum: f(0)}, []string{"≥ 0"}},
		{"lengths", extv1.JSONSchemaProps{MaxLength: n(63)}, []string{"length ≤ 63"}},
		{"exactly one item", extv1.JSONSchemaProps{MinItems: n(1), MaxItems: n(1)}, []string{"exactly 1 item"}},
		{"entries", extv1.JSONSchemaProps{MinProperties: n(1), MaxProperties: n(8)}, []string{"1–8 entries"}},
		{"a quantity's pattern is not printed", extv1.JSONSchemaProps{Pattern: quantityPattern}, nil},
		{"a named pattern", extv1.JSONSchemaProps{Pattern: `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`}, []string{"a DNS label: lower-case letters, digits and inner hyphens"}},
		{"a pattern in a code span", extv1.JSONSchemaProps{Pattern: `^(/[^/]+)+$`}, []string{"pattern `^(/[^/]+)+$`"}},
		{"a pattern a link check would misread", extv1.JSONSchemaProps{Pattern: `^[a](b|c)$`}, []string{`pattern \^\[a\]\(b|c\)\$`}},
	} {
		assert.Equal(t, row.want, constraints(&row.schema), row.rule)
	}
}

// TestRulesReadAsTheirMessages: a CEL rule shows as the message it refuses with, its items' rules on
// the list's row, and a rule without a message as the rule.
func TestRulesReadAsTheirMessages(t *testing.T) {
	list := extv1.JSONSchemaProps{
		Type:         "array",
		XValidations: extv1.ValidationRules{{Rule: "self.size() <= 10", Message: "at most 10 roles"}},
		Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{
			XValidations: extv1.ValidationRules{{Rule: "self.kind == oldSelf.kind"}},
		}},
	}
	assert.Equal(t, "Roles. Refused with “at most 10 roles”. Rule: `self.kind == oldSelf.kind`.", withRules("Roles.", &list))
}

func TestTypeOf(t *testing.T) {
	yes := true
	for _, row := range []struct {
		path   string
		schema extv1.JSONSchemaProps
		want   string
	}{
		{"spec.x", extv1.JSONSchemaProps{Type: "array", Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "string"}}}, "[]string"},
		{"spec.x", extv1.JSONSchemaProps{Type: "object", AdditionalProperties: &extv1.JSONSchemaPropsOrBool{Schema: &extv1.JSONSchemaProps{Type: "boolean"}}}, "map[string]boolean"},
		{"spec.x", extv1.JSONSchemaProps{XIntOrString: true, Pattern: quantityPattern}, "quantity"},
		{"spec.x", extv1.JSONSchemaProps{XIntOrString: true}, "int-or-string"},
		{"spec.x", extv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &yes}, "object (any fields)"},
		{"spec.x", extv1.JSONSchemaProps{Type: "string", Format: "date-time"}, "string (date-time)"},
		{conditionsPath, extv1.JSONSchemaProps{Type: "array", Items: &extv1.JSONSchemaPropsOrArray{Schema: &extv1.JSONSchemaProps{Type: "object"}}}, "[]Condition"},
	} {
		assert.Equal(t, row.want, typeOf(row.path, &row.schema), row.want)
	}
}

// TestCellsHoldTheirText: a description stays on one line, a "|" cannot end its cell and a "<" cannot
// open an HTML tag.
func TestCellsHoldTheirText(t *testing.T) {
	assert.Equal(t, `a \<name> of b`, prose("a <name>\n   of  b"))
	assert.Equal(t, `x \| y`, cell("x | y"))
}
