package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/internal/packaging"
)

// ModelDeploymentComposition is the Composition mdplane's Configuration installs for
// ModelDeployments.
const ModelDeploymentComposition = "modeldeployments.worker.gpustack.ai"

// SpareFunction installs a copy of one of mdplane's Functions under a name of its own,
// mdplane-spare-<function without mdplane->, with its package pushed again under that name, and
// composition, a copy of mdplane's ModelDeployment Composition that calls the spare in the
// Function's place. A deployment naming the composition (spec.crossplane.compositionRef) is composed
// through the spare, so a test can take the spare down (KillFunction) without disturbing any other
// deployment: mdplane's own Function is one package and one Pod for every deployment. It waits until
// the spare is Healthy and returns its name; the caller deletes the Function and the Composition.
func (s *Stack) SpareFunction(ctx context.Context, function, composition string) (string, error) {
	original := &unstructured.Unstructured{}
	original.SetAPIVersion("pkg.crossplane.io/v1")
	original.SetKind("Function")
	if err := s.Client.Get(ctx, client.ObjectKey{Name: function}, original); err != nil {
		return "", err
	}
	pkg, _, _ := unstructured.NestedString(original.Object, "spec", "package")
	path, ok := strings.CutPrefix(pkg, packaging.Registry+"/")
	if !ok {
		return "", fmt.Errorf("the Function %s installs %s, not a package of %s", function, pkg, packaging.Registry)
	}
	// The mirror ImageConfig rewrites packaging.Registry to the stack's registry, where the spare's
	// package is pushed again, and KillFunction matches the spare's images by its name alone.
	sparePath := "spare-" + path
	spare := "mdplane-" + strings.SplitN(sparePath, ":", 2)[0]
	if err := s.copyImage(s.Registry+"/mdplane/"+path, s.Registry+"/mdplane/"+sparePath); err != nil {
		return "", err
	}
	fn := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": "Function",
		"metadata": map[string]any{"name": spare}}}
	spec, _, _ := unstructured.NestedMap(original.Object, "spec")
	spec["package"] = packaging.Registry + "/" + sparePath
	fn.Object["spec"] = spec
	if err := client.IgnoreAlreadyExists(s.Client.Create(ctx, fn)); err != nil {
		return "", err
	}

	mdplane := &unstructured.Unstructured{}
	mdplane.SetAPIVersion("apiextensions.crossplane.io/v1")
	mdplane.SetKind("Composition")
	if err := s.Client.Get(ctx, client.ObjectKey{Name: ModelDeploymentComposition}, mdplane); err != nil {
		return "", err
	}
	steps, _, _ := unstructured.NestedSlice(mdplane.Object, "spec", "pipeline")
	replaced := false
	for _, step := range steps {
		ref, _, _ := unstructured.NestedString(step.(map[string]any), "functionRef", "name")
		if ref == function {
			_ = unstructured.SetNestedField(step.(map[string]any), spare, "functionRef", "name")
			replaced = true
		}
	}
	if !replaced {
		return "", fmt.Errorf("the Composition %s does not call %s", ModelDeploymentComposition, function)
	}
	copied := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.crossplane.io/v1", "kind": "Composition",
		"metadata": map[string]any{"name": composition}}}
	compositionSpec, _, _ := unstructured.NestedMap(mdplane.Object, "spec")
	compositionSpec["pipeline"] = steps
	copied.Object["spec"] = compositionSpec
	if err := client.IgnoreAlreadyExists(s.Client.Create(ctx, copied)); err != nil {
		return "", err
	}
	return spare, waitFor(ctx, nil, 3*time.Minute, "the spare Function "+spare+" Healthy", func() error {
		if err := s.Client.Get(ctx, client.ObjectKey{Name: spare}, fn); err != nil {
			return err
		}
		return conditionsTrue(fn, "Installed", "Healthy")
	})
}

// copyImage copies an image or index within the stack's registry.
func (s *Stack) copyImage(from, to string) error {
	src, err := name.ParseReference(from)
	if err != nil {
		return err
	}
	dst, err := name.ParseReference(to)
	if err != nil {
		return err
	}
	desc, err := remote.Get(src, s.registryTransport())
	if err != nil {
		return fmt.Errorf("reading %s: %w", from, err)
	}
	if desc.MediaType.IsIndex() {
		index, err := desc.ImageIndex()
		if err == nil {
			err = remote.WriteIndex(dst, index, s.registryTransport())
		}
		return err
	}
	img, err := desc.Image()
	if err == nil {
		err = remote.Write(dst, img, s.registryTransport())
	}
	return err
}
