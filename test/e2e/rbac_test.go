package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"sort"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/mdplane/mdplane/functions"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

// composedAnnotation marks an object a Composition's function composed, which Crossplane writes.
const composedAnnotation = "crossplane.io/composition-resource-name"

// crossplaneVerbs are the verbs Crossplane uses on what it composes.
var crossplaneVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// TestCrossplaneMayComposeEveryKind: every kind either function composes, in every golden case and
// every example, is one Crossplane's ServiceAccount may get, list, watch, create, update, patch and
// delete, and every kind they ask to read one it may get, list and watch, with the rights the stack
// gives it: its chart's ClusterRoles, the RBAC manager's, and mdplane's package. A kind it may not
// write or read would leave a deployment composing forever on a real install.
func TestCrossplaneMayComposeEveryKind(t *testing.T) {
	parallel(t)
	composed, required := functionKinds(t)
	if len(composed) < 5 || len(required) < 5 {
		t.Fatalf("found only %v composed and %v required kinds: the cases or examples did not render", composed, required)
	}
	for _, gvk := range composed {
		crossplaneMay(t, gvk, crossplaneVerbs...)
	}
	for _, gvk := range required {
		crossplaneMay(t, gvk, "get", "list", "watch")
	}
	t.Logf("Crossplane may write every composed kind %v and read every required kind %v", composed, required)
}

// crossplaneMay fails the test for each verb Crossplane may not use on the kind.
func crossplaneMay(t *testing.T, gvk schema.GroupVersionKind, verbs ...string) {
	t.Helper()
	mapping, err := stack.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Errorf("%s: %v", gvk, err)
		return
	}
	namespace := ""
	if mapping.Scope.Name() == "namespace" {
		namespace = "any-team"
	}
	for _, verb := range verbs {
		allowed, reason, err := stack.CrossplaneMay(context.Background(), verb, mapping.Resource.Group, mapping.Resource.Resource, namespace)
		if err != nil {
			t.Fatal(err)
		}
		if !allowed {
			t.Errorf("Crossplane may not %s %s (%s): %s", verb, mapping.Resource.GroupResource(), gvk.Kind, reason)
		}
	}
}

// TestCrossplaneCannotMintRights: what mdplane grants Crossplane lets it write the routers' Role
// and RoleBinding only with rights it holds itself: it may neither escalate nor bind.
func TestCrossplaneCannotMintRights(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	for _, c := range []struct{ verb, resource string }{
		{"escalate", "roles"}, {"escalate", "clusterroles"}, {"bind", "roles"}, {"bind", "clusterroles"},
		{"create", "clusterroles"}, {"create", "clusterrolebindings"},
	} {
		allowed, _, err := stack.CrossplaneMay(ctx, c.verb, "rbac.authorization.k8s.io", c.resource, "any-team")
		if err != nil {
			t.Fatal(err)
		}
		if allowed {
			t.Errorf("Crossplane may %s %s", c.verb, c.resource)
		}
	}
}

// functionKinds renders every golden case (with the goldens' cluster) and the examples through the
// Compositions' own functions, as `mdplane render` does, and returns the kinds of every object the
// functions composed and of every object they asked to read, each sorted.
func functionKinds(t *testing.T) (composed, required []schema.GroupVersionKind) {
	t.Helper()
	root := filepath.Join("..", "..")
	checker, err := schemacheck.ForPackage(manifests.FS)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := functions.Engine()
	if err != nil {
		t.Fatal(err)
	}
	cases, err := filepath.Glob(filepath.Join(root, "functions", "testdata", "cases", "*.yaml"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no golden cases: %v", err)
	}
	// The examples as `mdplane render -f examples` reads them; each case with the goldens' cluster.
	sets := [][]string{{filepath.Join(root, "examples")}}
	for _, c := range cases {
		sets = append(sets, []string{c, filepath.Join(root, "functions", "testdata", "cluster.yaml")})
	}
	seen := map[schema.GroupVersionKind]bool{}
	for _, files := range sets {
		docs, err := schemacheck.ReadFiles(files...)
		if err != nil {
			t.Fatal(err)
		}
		out, msgs, err := engine.RenderDocuments(context.Background(), checker, docs)
		if err != nil || len(msgs) > 0 {
			t.Fatalf("rendering %v: %v %v", files, err, msgs)
		}
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := decoder.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			if obj.Object != nil && obj.GetAnnotations()[composedAnnotation] != "" {
				seen[obj.GroupVersionKind()] = true
			}
		}
	}
	for k := range seen {
		composed = append(composed, k)
	}
	for k := range engine.Required {
		required = append(required, k)
	}
	byName := func(kinds []schema.GroupVersionKind) {
		sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	}
	byName(composed)
	byName(required)
	return composed, required
}
