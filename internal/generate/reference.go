package generate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/apiextensions/v2"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// ReferencePage is the API reference page, rendered from the schemas of the CRDs and XRDs the
// generator writes, so the page cannot disagree with them.
const ReferencePage = "docs/reference.md"

// internalGroup is the API group of the kinds only mdplane writes, through a deployment's
// Composition and its controllers. The page lists them last, without their fields.
const internalGroup = "internal.mdplane.io"

// quantityPattern is the pattern controller-tools gives a resource.Quantity; the page calls such a
// field a quantity rather than print the pattern on every one.
const quantityPattern = `^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`

// namedPatterns are patterns the page states in words rather than print: the DNS names Kubernetes
// validates.
var namedPatterns = map[string]string{
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`:                                   "a DNS label: lower-case letters, digits and inner hyphens",
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`: "a DNS subdomain: DNS labels joined by dots",
}

// conditionsPath is the one field whose items the page does not walk: every kind's conditions are
// the standard Kubernetes or Crossplane Condition, the same fields on every kind.
const conditionsPath = "status.conditions"

// referenceKind is one kind as the page shows it.
type referenceKind struct {
	kind, group, version string
	namespaced           bool
	shortNames           []string
	composite            bool
	schema               *extv1.JSONSchemaProps
}

// crdReference is the page's view of a plain kind's CRD.
func crdReference(c *extv1.CustomResourceDefinition) (referenceKind, error) {
	if len(c.Spec.Versions) != 1 || c.Spec.Versions[0].Schema == nil {
		return referenceKind{}, fmt.Errorf("the reference page shows one version per kind; %s has %d", c.Name, len(c.Spec.Versions))
	}
	v := c.Spec.Versions[0]
	return referenceKind{
		kind: c.Spec.Names.Kind, group: c.Spec.Group, version: v.Name,
		namespaced: c.Spec.Scope == extv1.NamespaceScoped,
		shortNames: c.Spec.Names.ShortNames,
		schema:     v.Schema.OpenAPIV3Schema,
	}, nil
}

// xrdReference is the page's view of a composite kind: the schema of its XRD, which is what users
// write, not of the CRD controller-tools generated on the way.
func xrdReference(x *xpv2.CompositeResourceDefinition) (referenceKind, error) {
	v := x.Spec.Versions[0]
	var schema extv1.JSONSchemaProps
	if err := json.Unmarshal(v.Schema.OpenAPIV3Schema.Raw, &schema); err != nil {
		return referenceKind{}, fmt.Errorf("reading the schema of XRD %s: %w", x.Name, err)
	}
	return referenceKind{
		kind: x.Spec.Names.Kind, group: x.Spec.Group, version: v.Name,
		namespaced: x.Spec.Scope == xpv2.CompositeResourceScopeNamespaced,
		shortNames: x.Spec.Names.ShortNames,
		composite:  true,
		schema:     &schema,
	}, nil
}

func (k referenceKind) internal() bool { return k.group == internalGroup }

// referenceOrder puts the composite kinds first, then the other user-facing kinds, then the
// internal ones, each alphabetically.
func referenceOrder(kinds []referenceKind) {
	rank := func(k referenceKind) int {
		switch {
		case k.composite:
			return 0
		case k.internal():
			return 2
		default:
			return 1
		}
	}
	sort.Slice(kinds, func(i, j int) bool {
		if ri, rj := rank(kinds[i]), rank(kinds[j]); ri != rj {
			return ri < rj
		}
		return kinds[i].kind < kinds[j].kind
	})
}

// referencePage renders the API reference page.
func referencePage(kinds []referenceKind) []byte {
	kinds = append([]referenceKind(nil), kinds...)
	referenceOrder(kinds)
	var b bytes.Buffer
	b.WriteString(strings.ReplaceAll(`# API reference

Every kind of mdplane's CRDs and XRDs, with its fields and their validation. ~make generate~ writes
this page from the Go types in ~apis/~, through the same schemas it writes to ~package/~: do not
edit it by hand. The internal kinds (~`+internalGroup+`~) come last, without their fields: mdplane
creates and writes them, users never do.
`, "~", "`"))
	internalHeading := false
	for _, k := range kinds {
		if k.internal() {
			if !internalHeading {
				b.WriteString("\n## Internal kinds\n\nEach ModelDeployment's Composition composes its ModelRoles and mdplane's controllers create\ntheir ModelReplicas: read them to follow a rollout, never write them.\n")
				internalHeading = true
			}
			writeKindHeading(&b, k, "###")
			continue
		}
		writeKindHeading(&b, k, "##")
		b.WriteString("\n| Field | Type | Required | Description |\n| --- | --- | --- | --- |\n")
		for _, name := range sortedProperties(k.schema) {
			if name == "apiVersion" || name == "kind" || name == "metadata" {
				continue
			}
			writeFields(&b, name, k.schema.Properties[name], required(k.schema, name))
		}
	}
	return b.Bytes()
}

// writeKindHeading writes a kind's heading, its group/version, scope and short names, and its
// description.
func writeKindHeading(b *bytes.Buffer, k referenceKind, level string) {
	facts := []string{"`" + k.group + "/" + k.version + "`", "cluster-scoped"}
	if k.namespaced {
		facts[1] = "namespaced"
	}
	switch len(k.shortNames) {
	case 0:
		facts = append(facts, "no short name")
	case 1:
		facts = append(facts, "short name `"+k.shortNames[0]+"`")
	default:
		facts = append(facts, "short names `"+strings.Join(k.shortNames, "`, `")+"`")
	}
	if k.composite {
		facts = append(facts, "a Crossplane composite: Crossplane adds `spec.crossplane` and `status.conditions`")
	}
	fmt.Fprintf(b, "\n%s %s\n\n%s\n\n%s\n", level, k.kind, strings.Join(facts, " · "), withRules(prose(k.schema.Description), k.schema))
}

// writeFields writes the row of the field at path and, depth first, the rows of the fields inside it.
func writeFields(b *bytes.Buffer, path string, s extv1.JSONSchemaProps, isRequired bool) {
	req := ""
	if isRequired {
		req = "yes"
	}
	desc := prose(s.Description)
	if c := constraints(&s); len(c) > 0 {
		desc = strings.TrimSpace(desc + " (" + strings.Join(c, "; ") + ")")
	}
	desc = withRules(desc, &s)
	fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", cell(path), cell(typeOf(path, &s)), req, cell(desc))

	inner := &s
	switch {
	case path == conditionsPath:
		return
	case s.Items != nil && s.Items.Schema != nil:
		inner, path = s.Items.Schema, path+"[]"
	case s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		inner, path = s.AdditionalProperties.Schema, path+".*"
	}
	for _, name := range sortedProperties(inner) {
		writeFields(b, path+"."+name, inner.Properties[name], required(inner, name))
	}
}

func sortedProperties(s *extv1.JSONSchemaProps) []string {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

func required(s *extv1.JSONSchemaProps, name string) bool {
	for _, r := range s.Required {
		if r == name {
			return true
		}
	}
	return false
}

// typeOf is a field's type as Go spells its shape: []string, map[string]string, object.
func typeOf(path string, s *extv1.JSONSchemaProps) string {
	switch {
	case s.XIntOrString && s.Pattern == quantityPattern:
		return "quantity"
	case s.XIntOrString:
		return "int-or-string"
	case path == conditionsPath && s.Type == "array":
		return "[]Condition"
	case s.Type == "array" && s.Items != nil && s.Items.Schema != nil:
		return "[]" + typeOf("", s.Items.Schema)
	case s.Type == "object" && s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil:
		return "map[string]" + typeOf("", s.AdditionalProperties.Schema)
	case s.Type == "object" && len(s.Properties) == 0 && preservesUnknownFields(s):
		return "object (any fields)"
	case s.Type == "":
		return "any"
	case s.Type == "string" && s.Format != "":
		return "string (" + s.Format + ")"
	}
	return s.Type
}

func preservesUnknownFields(s *extv1.JSONSchemaProps) bool {
	return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
}

// constraints are the validation a field's schema states, each as short as it reads.
func constraints(s *extv1.JSONSchemaProps) []string {
	var out []string
	if s.Default != nil {
		out = append(out, "default `"+jsonValue(s.Default.Raw)+"`")
	}
	if len(s.Enum) > 0 {
		values := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			values[i] = "`" + jsonValue(e.Raw) + "`"
		}
		out = append(out, "one of "+strings.Join(values, ", "))
	}
	out = appendRange(out, "", "", boundOf(s.Minimum, s.ExclusiveMinimum), boundOf(s.Maximum, s.ExclusiveMaximum))
	out = appendRange(out, "length ", "", countOf(s.MinLength), countOf(s.MaxLength))
	out = appendRange(out, "", " item", countOf(s.MinItems), countOf(s.MaxItems))
	out = appendRange(out, "", " entry", countOf(s.MinProperties), countOf(s.MaxProperties))
	if s.MultipleOf != nil {
		out = append(out, "multiple of "+number(*s.MultipleOf))
	}
	if s.Pattern != "" && s.Pattern != quantityPattern {
		out = append(out, pattern(s.Pattern))
	}
	return out
}

// pattern is a pattern as the page states it: named when Kubernetes names it, else in a code span,
// else, when it holds "](", which the docs' link check reads as a link even in a code span, as text
// with its punctuation escaped.
func pattern(p string) string {
	if name, ok := namedPatterns[p]; ok {
		return name
	}
	if !strings.Contains(p, "](") {
		return "pattern `" + p + "`"
	}
	var b strings.Builder
	for _, r := range p {
		// A "|" is left to cell, which escapes it for the table.
		if r != '|' && strings.ContainsRune("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{}~", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return "pattern " + b.String()
}

// withRules appends to a description the CEL rules of a field and of its items or values, each as the
// message the API server refuses an object breaking it with, or as the rule when it has no message.
func withRules(desc string, s *extv1.JSONSchemaProps) string {
	rules := append(extv1.ValidationRules(nil), s.XValidations...)
	if s.Items != nil && s.Items.Schema != nil {
		rules = append(rules, s.Items.Schema.XValidations...)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		rules = append(rules, s.AdditionalProperties.Schema.XValidations...)
	}
	for _, r := range rules {
		text := " Rule: `" + r.Rule + "`."
		if r.Message != "" {
			text = " Refused with “" + prose(r.Message) + "”."
		}
		desc = strings.TrimSpace(desc + text)
	}
	return desc
}

// bound is one end of a range: its value and whether the value itself is excluded.
type bound struct {
	value     string
	exclusive bool
}

func boundOf(v *float64, exclusive bool) *bound {
	if v == nil {
		return nil
	}
	return &bound{value: number(*v), exclusive: exclusive}
}

func countOf(v *int64) *bound {
	if v == nil {
		return nil
	}
	return &bound{value: strconv.FormatInt(*v, 10)}
}

// appendRange appends a range as "1–1024", "≥ 1" or "< 8", between a prefix and a unit, which is
// made plural unless the range is exactly 1.
func appendRange(out []string, prefix, unit string, lo, hi *bound) []string {
	var r string
	inclusive := lo != nil && hi != nil && !lo.exclusive && !hi.exclusive
	switch {
	case inclusive && lo.value == hi.value:
		if unit != "" && lo.value != "1" {
			unit = plural(unit)
		}
		return append(out, prefix+"exactly "+lo.value+unit)
	case inclusive:
		r = lo.value + "–" + hi.value
	case lo != nil && hi != nil:
		r = op(lo, ">") + ", " + op(hi, "<")
	case lo != nil:
		r = op(lo, ">")
	case hi != nil:
		r = op(hi, "<")
	default:
		return out
	}
	return append(out, prefix+r+plural(unit))
}

// plural is a unit's plural: item, items; entry, entries.
func plural(unit string) string {
	if strings.HasSuffix(unit, "y") {
		return strings.TrimSuffix(unit, "y") + "ies"
	}
	if unit == "" {
		return ""
	}
	return unit + "s"
}

// op writes a bound with its comparison: "> 0" when exclusive, "≥ 0" otherwise.
func op(b *bound, strict string) string {
	if b.exclusive {
		return strict + " " + b.value
	}
	if strict == ">" {
		return "≥ " + b.value
	}
	return "≤ " + b.value
}

func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// jsonValue is a default or an enum value as a user writes it: strings without their quotes, but
// for the empty string, which a code span cannot show.
func jsonValue(raw []byte) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil && s != "" {
		return s
	}
	return string(raw)
}

// prose is a schema description on one line: its line breaks and runs of spaces collapsed into single
// spaces, and a "<" escaped so that "<name>" is not read as an HTML tag.
func prose(s string) string {
	return strings.ReplaceAll(strings.Join(strings.Fields(s), " "), "<", `\<`)
}

// cell escapes what would end a table cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
