// Package refusaltest holds every admission refusal to one shape in tests: it names the field,
// shows an Invalid value, and says what is wrong and one way out in at most two sentences.
package refusaltest

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxSentences and MaxLength bound a refusal's words: what is wrong, and one way
// out. A clause joined by "; " counts as a sentence; quoted values and parentheses do not break one.
const (
	MaxSentences = 2
	MaxLength    = 420
)

// Problem says what a refusal lacks: the field it is about and at most two sentences within
// MaxLength characters; "" when it has them. An Invalid refusal shows its value by construction.
func Problem(e *field.Error) string {
	switch {
	case e.Field == "" || e.Field == "<nil>":
		return "a refusal names no field"
	case sentences(e.Detail) > MaxSentences:
		return fmt.Sprintf("%d sentences, more than %d", sentences(e.Detail), MaxSentences)
	case len(e.Detail) > MaxLength:
		return fmt.Sprintf("%d characters, more than %d", len(e.Detail), MaxLength)
	}
	return ""
}

// sentences counts the sentences of a message: breaks are ". ", "? ", "! " and "; " outside
// quotes, parentheses and brackets, and not after "e.g" or "i.e".
func sentences(s string) int {
	n, depth, quoted := 1, 0, false
	for i, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case quoted:
		case r == '(' || r == '[':
			depth++
		case r == ')' || r == ']':
			depth = max(depth-1, 0)
		case depth == 0 && strings.ContainsRune(".?!;", r) && strings.HasPrefix(s[i+1:], " ") &&
			!strings.HasSuffix(s[:i], "e.g") && !strings.HasSuffix(s[:i], "i.e"):
			n++
		}
	}
	return n
}

// Checked reports each refusal of errs that is not of the shape, and returns errs: a table of
// refusals reads its results through it, so every refusal a test provokes is held to Problem.
func Checked(t *testing.T, errs field.ErrorList) field.ErrorList {
	t.Helper()
	for _, e := range errs {
		if problem := Problem(e); problem != "" {
			t.Errorf("%s: %s", problem, e.Error())
		}
	}
	return errs
}

// Cause reports a refusal that reached a client as a status cause (an admission response) and is
// not of the shape: no field, or more than two sentences.
func Cause(t *testing.T, fieldPath, message string) {
	t.Helper()
	if fieldPath == "" || sentences(message) > MaxSentences {
		t.Errorf("a refusal of %d sentences at field %q (want a field and at most %d): %s", sentences(message), fieldPath, MaxSentences, message)
	}
}
