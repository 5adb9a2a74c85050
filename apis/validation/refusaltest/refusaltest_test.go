package refusaltest_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mdplane/mdplane/apis/validation/refusaltest"
)

func TestARefusalsShapeIsChecked(t *testing.T) {
	for _, row := range []struct {
		rule string
		err  *field.Error
		want string
	}{
		{"what is wrong and the way out pass", field.Invalid(field.NewPath("spec", "x"), "3", "x is over 2; set it to 2 or less"), ""},
		{"a quoted value's punctuation is not a sentence", field.Invalid(field.NewPath("spec", "x"), "a. b", `"a. b; c" is no name; rename it`), ""},
		{"a third sentence is one too many", field.Invalid(field.NewPath("spec", "x"), "3", "x is over 2; it must fit; set it to 2"), "3 sentences"},
		{"a refusal names its field", field.Forbidden(nil, "no"), "names no field"},
		{"an example is not a sentence", field.Invalid(field.NewPath("spec", "x"), "h", "not a URL; write e.g. https://hub"), ""},
		{"a long refusal is cut", field.Forbidden(field.NewPath("spec", "x"), strings.Repeat("a", refusaltest.MaxLength+1)), "characters"},
	} {
		t.Run(row.rule, func(t *testing.T) {
			got := refusaltest.Problem(row.err)
			if row.want == "" && got != "" || row.want != "" && !strings.Contains(got, row.want) {
				t.Errorf("refusalShape = %q, want %q", got, row.want)
			}
		})
	}
}
