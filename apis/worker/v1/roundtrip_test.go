package v1_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestSpecExamplesRoundTrip decodes every YAML example of the spec strictly into the Go types and
// encodes it again: every field the example sets must come back with the same value.
func TestSpecExamplesRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/spec-examples.yaml")
	require.NoError(t, err)
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		n++
		t.Run(fmt.Sprintf("example %d", n), func(t *testing.T) {
			var original map[string]any
			require.NoError(t, yaml.Unmarshal(doc, &original))

			var md v1.ModelDeployment
			require.NoError(t, yaml.UnmarshalStrict(doc, &md), "every field of the example is a field of the type")
			encoded, err := json.Marshal(&md)
			require.NoError(t, err)
			var again map[string]any
			require.NoError(t, json.Unmarshal(encoded, &again))

			for _, loss := range lost("", original, again) {
				t.Error(loss)
			}
		})
	}
	require.Equal(t, 5, n)
}

// lost lists the leaves of want that got does not hold with an equal value. A quantity may come back
// as its canonical string (accelerator: 2 becomes "2").
func lost(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %v, want an object", path, got)}
		}
		var out []string
		for k, v := range w {
			out = append(out, lost(path+"."+k, v, g[k])...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %d items", path, got, len(w))}
		}
		var out []string
		for i := range w {
			out = append(out, lost(fmt.Sprintf("%s[%d]", path, i), w[i], g[i])...)
		}
		return out
	default:
		if fmt.Sprint(want) == fmt.Sprint(got) || sameQuantity(want, got) {
			return nil
		}
		return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
	}
}

func sameQuantity(want, got any) bool {
	w, err1 := resource.ParseQuantity(fmt.Sprint(want))
	g, err2 := resource.ParseQuantity(fmt.Sprint(got))
	return err1 == nil && err2 == nil && w.Cmp(g) == 0
}
