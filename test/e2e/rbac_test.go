package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// composedAnnotation marks an object a Composition's function composed, which Crossplane writes.
const composedAnnotation = "crossplane.io/composition-resource-name"

// crossplaneVerbs are the verbs Crossplane uses on what it composes.
var crossplaneVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// TestCrossplaneMayComposeEveryKind: every kind either function composes, in every golden render
// and every example, is one Crossplane's ServiceAccount may get, list, watch, create, update, patch
// and delete with the rights the stack gives it: its chart's ClusterRoles, the RBAC manager's, and
// mdplane's package. A kind it may not write would leave a deployment composing forever on a real
// install.
func TestCrossplaneMayComposeEveryKind(t *testing.T) {
	ctx := context.Background()
	kinds := composedKinds(t)
	if len(kinds) < 5 {
		t.Fatalf("found only %v composed kinds: the goldens or examples did not render", kinds)
	}
	for _, gvk := range kinds {
		mapping, err := stack.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Errorf("%s: %v", gvk, err)
			continue
		}
		namespace := ""
		if mapping.Scope.Name() == "namespace" {
			namespace = "any-team"
		}
		for _, verb := range crossplaneVerbs {
			allowed, reason, err := stack.CrossplaneMay(ctx, verb, mapping.Resource.Group, mapping.Resource.Resource, namespace)
			if err != nil {
				t.Fatal(err)
			}
			if !allowed {
				t.Errorf("Crossplane may not %s %s (%s): %s", verb, mapping.Resource.GroupResource(), gvk.Kind, reason)
			}
		}
	}
	t.Logf("Crossplane may %s every composed kind: %v", strings.Join(crossplaneVerbs, ", "), kinds)
}

// TestCrossplaneCannotMintRights: what mdplane grants Crossplane lets it write the routers' Role
// and RoleBinding only with rights it holds itself: it may neither escalate nor bind.
func TestCrossplaneCannotMintRights(t *testing.T) {
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

// composedKinds are the kinds of every object the functions composed in the goldens and in the
// examples rendered offline, sorted.
func composedKinds(t *testing.T) []schema.GroupVersionKind {
	t.Helper()
	root := filepath.Join("..", "..")
	var sources [][]byte
	goldens, err := filepath.Glob(filepath.Join(root, "functions", "testdata", "golden", "*.yaml"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no goldens: %v", err)
	}
	for _, g := range goldens {
		raw, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, raw)
	}
	cli, err := stack.CLI()
	if err != nil {
		t.Fatal(err)
	}
	render := exec.Command(cli, "render", "-f", filepath.Join(root, "examples"))
	out, err := render.Output()
	if err != nil {
		t.Fatalf("mdplane render -f examples: %v", err)
	}
	sources = append(sources, out)
	seen := map[schema.GroupVersionKind]bool{}
	for _, src := range sources {
		decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(src), 4096)
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
	kinds := make([]schema.GroupVersionKind, 0, len(seen))
	for k := range seen {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i].String() < kinds[j].String() })
	return kinds
}
