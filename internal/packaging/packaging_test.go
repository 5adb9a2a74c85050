package packaging_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"io"
	"os"
	"path/filepath"
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
	byFile := map[string]packaging.Built{}
	for _, b := range bs {
		byFile[filepath.Base(b.Path)] = b
	}
	return byFile, err
})

// built is the shared build's artifacts by file name.
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

// Every image with a runtime is built once per architecture; the Configuration, which has none,
// once.
func TestTheBuildWritesOneFilePerArchitectureOfEachRuntime(t *testing.T) {
	var files []string
	for f := range built(t) {
		files = append(files, f)
	}
	sort.Strings(files)
	assert.Equal(t, []string{
		"function-kv-cache-v1.2.3-amd64.xpkg",
		"function-kv-cache-v1.2.3-arm64.xpkg",
		"function-render-roles-v1.2.3-amd64.xpkg",
		"function-render-roles-v1.2.3-arm64.xpkg",
		"mdplane-controllers-v1.2.3-amd64.tar",
		"mdplane-controllers-v1.2.3-arm64.tar",
		"mdplane-v1.2.3.xpkg",
	}, files)
}

func TestTwoBuildsOfOneCommitAreByteIdentical(t *testing.T) {
	first := built(t)
	again, err := packaging.Build(context.Background(), "../..", version, t.TempDir())
	require.NoError(t, err)
	require.Len(t, again, len(first))
	for _, b := range again {
		file := filepath.Base(b.Path)
		want, err := os.ReadFile(first[file].Path)
		require.NoError(t, err)
		got, err := os.ReadFile(b.Path)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "%s differs between two builds", file)
		assert.Equal(t, first[file].Digest, b.Digest, file)
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
	pkg := parse(t, built(t)["mdplane-v1.2.3.xpkg"].Path, xpkg.NewConfigurationLinter())
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
	assert.Equal(t, []string{"CompositeResourceDefinition", "Composition"}, kinds, "ModelDeployment is the one composite")
	assert.Equal(t, 1, compositions)
}

func TestEachFunctionPackageEmbedsItsRuntimeForItsArchitecture(t *testing.T) {
	for _, c := range []struct{ fn, arch string }{
		{"function-render-roles", "amd64"}, {"function-render-roles", "arm64"},
		{"function-kv-cache", "amd64"}, {"function-kv-cache", "arm64"},
	} {
		fn := c.fn
		t.Run(fn+"/"+c.arch, func(t *testing.T) {
			pkg := parse(t, built(t)[fn+"-v1.2.3-"+c.arch+".xpkg"].Path, xpkg.NewFunctionLinter())
			meta, ok := pkg.meta.(*pkgmetav1.Function)
			require.True(t, ok, "meta is a %T", pkg.meta)
			assert.Equal(t, fn, meta.Name)
			assert.Equal(t, []string{"composition"}, meta.Spec.Capabilities)
			assert.Empty(t, pkg.objects, "a Function package ships no input CRD: neither function takes input")

			cfg, err := pkg.image.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, []string{"/function"}, cfg.Config.Entrypoint)
			assert.Equal(t, "65532:65532", cfg.Config.User)
			assert.Equal(t, "linux", cfg.OS)
			assert.Equal(t, c.arch, cfg.Architecture)
			assert.Contains(t, cfg.Config.ExposedPorts, "9443/tcp")
			layers, err := pkg.image.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 2, "the runtime layer, then the package layer")
			binary := fileInLayer(t, layers[0], "function")
			require.NotNil(t, binary)
			assert.Equal(t, elfMachine[c.arch], machineOf(t, binary), "the runtime is a Linux executable for %s", c.arch)
		})
	}
}

func TestTheControllersImageRunsTheControllersAsNonRoot(t *testing.T) {
	for _, arch := range packaging.Architectures {
		t.Run(arch, func(t *testing.T) {
			img, err := tarball.ImageFromPath(built(t)["mdplane-controllers-v1.2.3-"+arch+".tar"].Path, nil)
			require.NoError(t, err)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, []string{"/mdplane-controllers"}, cfg.Config.Entrypoint)
			assert.Equal(t, "65532:65532", cfg.Config.User)
			assert.Equal(t, "linux", cfg.OS)
			assert.Equal(t, arch, cfg.Architecture)
			assert.Empty(t, cfg.Config.Labels, "not a package: no xpkg layer labels")
		})
	}
}

// A release pushes each artifact with a runtime as one index: a node of either architecture pulls
// its own image, and a client with no platform (Crossplane's package manager) reads linux/amd64.
func TestTheIndexOfAnArtifactNamesEachArchitecture(t *testing.T) {
	for _, name := range []string{"function-render-roles", "mdplane-controllers"} {
		t.Run(name, func(t *testing.T) {
			var builds []packaging.Built
			for _, b := range built(t) {
				if b.Name == name {
					builds = append(builds, b)
				}
			}
			sort.Slice(builds, func(i, j int) bool { return builds[i].Arch < builds[j].Arch })
			index, err := packaging.Index(builds)
			require.NoError(t, err)
			manifest, err := index.IndexManifest()
			require.NoError(t, err)
			require.Len(t, manifest.Manifests, len(builds))
			for i, m := range manifest.Manifests {
				require.NotNil(t, m.Platform)
				assert.Equal(t, v1.Platform{OS: "linux", Architecture: builds[i].Arch}, *m.Platform)
				img, err := index.Image(m.Digest)
				require.NoError(t, err)
				cfg, err := img.ConfigFile()
				require.NoError(t, err)
				assert.Equal(t, builds[i].Arch, cfg.Architecture, "the manifest's platform is its image's")
			}
		})
	}
	_, err := packaging.Index([]packaging.Built{built(t)["mdplane-v1.2.3.xpkg"]})
	assert.ErrorContains(t, err, "has no architecture", "the Configuration has no runtime: it is pushed as one image")
}

// elfMachine is the ELF machine of a Linux executable built for each architecture.
var elfMachine = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func machineOf(t *testing.T, binary []byte) elf.Machine {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	require.NoError(t, err, "not an ELF executable")
	return f.Machine
}
