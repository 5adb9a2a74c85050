package packaging_test

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mdplane/mdplane/internal/generate"
	"github.com/mdplane/mdplane/internal/packaging"
)

const version = "v1.2.3"

// buildDir holds the one `make xpkg` run the tests share: building costs a minute on a cold build
// cache.
var buildDir string

var buildOnce = sync.OnceValues(func() (map[string]packaging.Built, error) {
	var err error
	if buildDir, err = os.MkdirTemp("", "mdplane-xpkg-test-"); err != nil {
		return nil, err
	}
	bs, err := packaging.Build(context.Background(), "../..", version, buildDir)
	byName := map[string]packaging.Built{}
	for _, b := range bs {
		byName[b.Name] = b
	}
	return byName, err
})

func built(t *testing.T) map[string]packaging.Built {
	t.Helper()
	skipShort(t)
	b, err := buildOnce()
	require.NoError(t, err)
	return b
}

// skipShort leaves the package builds out of the unit tier (go test -short): they compile three
// static binaries, most of the unit tier's time. make test runs them.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the packages (compiles the function and controller binaries): run without -short, as make test does")
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func TestTwoBuildsOfOneCommitAreByteIdentical(t *testing.T) {
	first := built(t)
	again, err := packaging.Build(context.Background(), "../..", version, t.TempDir())
	require.NoError(t, err)
	require.Len(t, again, len(packaging.Artifacts))
	for _, b := range again {
		want, err := os.ReadFile(first[b.Name].Path)
		require.NoError(t, err)
		got, err := os.ReadFile(b.Path)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s differs between two builds", b.File(version))
		assert.Equal(t, first[b.Name].Digest, b.Digest, b.Name)
	}
}

// parsed is a package file read the way Crossplane's package manager reads it: the layer annotated
// io.crossplane.xpkg=base holds package.yaml, parsed and linted by crossplane-runtime's parser.
type parsed struct {
	image   v1.Image
	meta    runtime.Object
	objects []runtime.Object
}

func parse(t *testing.T, path string, linter parser.Linter) parsed {
	t.Helper()
	img, err := tarball.ImageFromPath(path, nil)
	require.NoError(t, err)
	img, err = xpkg.AnnotateLayers(img) // what `crossplane xpkg push` does before pushing
	require.NoError(t, err)
	manifest, err := img.Manifest()
	require.NoError(t, err)
	var stream []byte
	for _, l := range manifest.Layers {
		if l.Annotations[xpkg.AnnotationKey] != xpkg.PackageAnnotation {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		require.NoError(t, err)
		stream = fileInLayer(t, layer, xpkg.StreamFile)
	}
	require.NotNil(t, stream, "%s has no layer annotated %s=%s", path, xpkg.AnnotationKey, xpkg.PackageAnnotation)
	metaScheme, err := xpkg.BuildMetaScheme()
	require.NoError(t, err)
	objScheme, err := xpkg.BuildObjectScheme()
	require.NoError(t, err)
	pkg, err := parser.New(metaScheme, objScheme).Parse(context.Background(), io.NopCloser(bytes.NewReader(stream)))
	require.NoError(t, err)
	require.NoError(t, linter.Lint(pkg))
	return parsed{image: img, meta: pkg.GetMeta()[0], objects: pkg.GetObjects()}
}

func fileInLayer(t *testing.T, layer v1.Layer, file string) []byte {
	t.Helper()
	rc, err := layer.Uncompressed()
	require.NoError(t, err)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		require.NoError(t, err)
		if strings.TrimPrefix(hdr.Name, "/") == file {
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			return b
		}
	}
}

func TestTheConfigurationCarriesTheXRDsAndCompositionsAndPinsItsFunctions(t *testing.T) {
	pkg := parse(t, built(t)["mdplane"].Path, xpkg.NewConfigurationLinter())
	meta, ok := pkg.meta.(*pkgmetav1.Configuration)
	require.True(t, ok, "meta is a %T", pkg.meta)
	assert.Equal(t, "mdplane", meta.Name)
	require.NotNil(t, meta.Spec.Crossplane)
	assert.Equal(t, ">=v2.4.0-0", meta.Spec.Crossplane.Version)

	var deps []string
	for _, d := range meta.Spec.DependsOn {
		require.NotNil(t, d.Package)
		assert.Equal(t, "Function", *d.Kind)
		assert.Equal(t, version, d.Version, "a dependency on one of our Functions is pinned to the release")
		ref, err := name.ParseReference(*d.Package)
		require.NoError(t, err)
		// The name Crossplane's dependency resolution gives the Function it installs.
		deps = append(deps, xpkg.ToDNSLabel(ref.Context().RepositoryStr()))
	}
	sort.Strings(deps)
	assert.Equal(t, []string{"mdplane-function-kv-cache", "mdplane-function-render-roles"}, deps)
	assert.Equal(t, []string{generate.FunctionKVCache, generate.FunctionRenderRoles}, deps,
		"the Compositions call the Functions by the names their dependencies install them under")

	var kinds []string
	compositions := 0
	for _, o := range pkg.objects {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
		if c, ok := o.(*xpv1.Composition); ok {
			compositions++
			for _, step := range c.Spec.Pipeline {
				assert.Contains(t, deps, step.FunctionRef.Name, "Composition %s step %s", c.Name, step.Step)
			}
		}
	}
	sort.Strings(kinds)
	assert.Equal(t, []string{"CompositeResourceDefinition", "CompositeResourceDefinition", "Composition", "Composition"}, kinds)
	assert.Equal(t, 2, compositions)
}

func TestEachFunctionPackageEmbedsItsRuntime(t *testing.T) {
	for _, fn := range []string{"function-render-roles", "function-kv-cache"} {
		t.Run(fn, func(t *testing.T) {
			pkg := parse(t, built(t)[fn].Path, xpkg.NewFunctionLinter())
			meta, ok := pkg.meta.(*pkgmetav1.Function)
			require.True(t, ok, "meta is a %T", pkg.meta)
			assert.Equal(t, fn, meta.Name)
			assert.Equal(t, []string{"composition"}, meta.Spec.Capabilities)
			assert.Empty(t, pkg.objects, "a Function package ships no input CRD: neither function takes input")

			cfg, err := pkg.image.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, []string{"/function"}, cfg.Config.Entrypoint)
			assert.Equal(t, "65532:65532", cfg.Config.User)
			assert.Contains(t, cfg.Config.ExposedPorts, "9443/tcp")
			layers, err := pkg.image.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 2, "the runtime layer, then the package layer")
			binary := fileInLayer(t, layers[0], "function")
			require.NotNil(t, binary)
			assert.True(t, bytes.HasPrefix(binary, []byte("\x7fELF")), "the runtime is a Linux executable")
		})
	}
}

func TestTheControllersImageRunsTheControllers(t *testing.T) {
	img, err := tarball.ImageFromPath(built(t)["mdplane-controllers"].Path, nil)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	assert.Equal(t, []string{"/mdplane-controllers"}, cfg.Config.Entrypoint)
	assert.Empty(t, cfg.Config.Labels, "not a package: no xpkg layer labels")
}
