package packaging

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser"
	"github.com/crossplane/crossplane-runtime/v2/pkg/xpkg/parser/examples"
	pkgmetav1 "github.com/crossplane/crossplane/apis/v2/pkg/meta/v1"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/spf13/afero"
	"sigs.k8s.io/yaml"
)

// Registry is where mdplane's packages and images are published. A Composition names a Function
// by its repository path without the host (mdplane/function-render-roles becomes the Function
// mdplane-function-render-roles), so a mirror that keeps the paths, reached through a Crossplane
// ImageConfig rewrite, installs under the same names.
const Registry = "ghcr.io/mdplane"

// Version is the release the repository builds by default, and the controllers' image tag in
// package/kustomization.yaml.
const Version = "v0.1.0"

// Architectures are the Linux architectures every image with a runtime is built for, one file per
// architecture: `crossplane xpkg push -f <amd64 file>,<arm64 file>` pushes a Function's files as one
// multi-platform index (Crossplane reads the package layer of any of them; the kubelet pulls the
// node's own), and Index does the same for the controllers' image.
var Architectures = []string{"amd64", "arm64"}

// Artifact is one OCI image `make xpkg` writes: a Crossplane package, or a plain runtime image.
type Artifact struct {
	// Name is the image's repository under Registry, and the stem of its file.
	Name string
	// Meta is the package's crossplane.yaml, relative to the repository root; empty for an image
	// that is not a package.
	Meta string
	// Objects are globs, relative to the root, of the manifests the package carries besides its
	// metadata.
	Objects []string
	// Examples are globs of the manifests shown as the package's examples.
	Examples []string
	// Runtime is the Go main package built into the image, statically, as /<Entrypoint>; empty for
	// a package with no runtime (a Configuration).
	Runtime string
	// Entrypoint is the file name of the runtime binary in the image.
	Entrypoint string
}

// Artifacts are everything `make xpkg` builds, in build order.
var Artifacts = []Artifact{
	{Name: "function-render-roles", Meta: "package/functions/render-roles/crossplane.yaml",
		Runtime: "./cmd/function-render-roles", Entrypoint: "function"},
	{Name: "function-kv-cache", Meta: "package/functions/kv-cache/crossplane.yaml",
		Runtime: "./cmd/function-kv-cache", Entrypoint: "function"},
	{Name: "mdplane", Meta: "package/configuration/crossplane.yaml",
		Objects: []string{"package/xrds/*.yaml", "package/compositions/*.yaml"}, Examples: []string{"examples/*.yaml"}},
	{Name: "mdplane-controllers", Runtime: "./cmd/mdplane-controllers", Entrypoint: "mdplane-controllers"},
}

// Architectures are the architectures the artifact is built for: every one of Architectures when
// it has a runtime, else a single build for none ("").
func (a Artifact) Architectures() []string {
	if a.Runtime == "" {
		return []string{""}
	}
	return Architectures
}

// File is the file name an artifact of a version, built for arch ("" for none), is written to.
func (a Artifact) File(version, arch string) string {
	stem := a.Name + "-" + version
	if arch != "" {
		stem += "-" + arch
	}
	if a.Meta == "" {
		return stem + ".tar"
	}
	return stem + xpkg.XpkgExtension
}

// Reference is the artifact's image reference at a version.
func (a Artifact) Reference(version string) string {
	return Registry + "/" + a.Name + ":" + version
}

// Built is an artifact written to disk, for one architecture.
type Built struct {
	Artifact
	// Arch is the architecture of its runtime; empty for a package with none.
	Arch   string
	Path   string
	Digest v1.Hash
}

// Build builds every artifact of the repository at root for version into out. Every input is
// fixed by the commit and the Go toolchain (no timestamps, no build IDs, no paths), so two builds of
// one commit write the same bytes.
func Build(ctx context.Context, root, version, out string) ([]Built, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	binDir, err := os.MkdirTemp("", "mdplane-xpkg-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	var built []Built
	for _, a := range Artifacts {
		for _, arch := range a.Architectures() {
			b, err := a.build(ctx, root, version, arch, binDir, out)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", a.File(version, arch), err)
			}
			built = append(built, b)
		}
	}
	return built, nil
}

// build builds the artifact for one architecture (none for a package without a runtime) into out.
func (a Artifact) build(ctx context.Context, root, version, arch, binDir, out string) (Built, error) {
	img := empty.Image
	if a.Runtime != "" {
		bin := filepath.Join(binDir, a.Name+"-"+arch)
		if err := goBuild(ctx, root, a.Runtime, version, arch, bin); err != nil {
			return Built{}, err
		}
		var err error
		if img, err = RuntimeImage(bin, a.Entrypoint, arch); err != nil {
			return Built{}, err
		}
	}
	if a.Meta != "" {
		var err error
		if img, err = a.pack(ctx, root, version, img); err != nil {
			return Built{}, err
		}
	}
	path := filepath.Join(out, a.File(version, arch))
	if err := tarball.WriteToFile(path, nil, img); err != nil {
		return Built{}, fmt.Errorf("writing %s: %w", path, err)
	}
	digest, err := img.Digest()
	if err != nil {
		return Built{}, err
	}
	return Built{Artifact: a, Arch: arch, Path: path, Digest: digest}, nil
}

// Image is a build as it is pushed: a package's layers annotated from its config labels, as
// `crossplane xpkg push` does, a plain image as written.
func (b Built) Image() (v1.Image, error) {
	img, err := tarball.ImageFromPath(b.Path, nil)
	if err != nil || b.Meta == "" {
		return img, err
	}
	return xpkg.AnnotateLayers(img)
}

// Index is the multi-platform index a release pushes for the builds of one artifact, one manifest
// per architecture with its platform, as `crossplane xpkg push -f <file>,<file>` makes of a
// Function's files.
func Index(builds []Built) (v1.ImageIndex, error) {
	adds := make([]mutate.IndexAddendum, 0, len(builds))
	for _, b := range builds {
		if b.Arch == "" {
			return nil, fmt.Errorf("%s has no architecture: push it as an image, not in an index", b.Path)
		}
		img, err := b.Image()
		if err != nil {
			return nil, err
		}
		adds = append(adds, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: b.Arch}}})
	}
	return mutate.AppendManifests(empty.Index, adds...), nil
}

// goBuild builds a static, reproducible binary of a main package for Linux on arch.
func goBuild(ctx context.Context, root, pkg, version, arch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", out, pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s for linux/%s: %w\n%s", pkg, arch, err, b)
	}
	return nil
}

// RuntimeImage is a FROM-scratch image for linux/<arch> holding one static binary as
// /<entrypoint>, run as a non-root user, listening where a composition function listens.
func RuntimeImage(binary, entrypoint, arch string) (v1.Image, error) {
	content, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: entrypoint, Mode: 0o755, Size: int64(len(content)),
		Uid: nonRoot, Gid: nonRoot, Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(content); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer,
		History: v1.History{CreatedBy: "mdplane xpkg: " + entrypoint}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", arch
	cfg.Config.Entrypoint = []string{"/" + entrypoint}
	cfg.Config.User = fmt.Sprintf("%d:%d", nonRoot, nonRoot)
	cfg.Config.ExposedPorts = map[string]struct{}{"9443/tcp": {}}
	return mutate.ConfigFile(img, cfg)
}

// nonRoot is the user and group the runtime runs as (distroless's nonroot).
const nonRoot = 65532

// pack builds the package on top of base the way `crossplane xpkg build` does, with
// crossplane-runtime's builder: the metadata and objects are parsed, linted and written as the
// annotated package.yaml layer, the examples as the examples layer.
func (a Artifact) pack(ctx context.Context, root, version string, base v1.Image) (v1.Image, error) {
	pkgFS, exFS := afero.NewMemMapFs(), afero.NewMemMapFs()
	meta, err := pinnedMeta(filepath.Join(root, a.Meta), version)
	if err != nil {
		return nil, err
	}
	if err := afero.WriteFile(pkgFS, "/"+xpkg.MetaFile, meta, 0o644); err != nil {
		return nil, err
	}
	if err := copyGlobs(root, a.Objects, pkgFS); err != nil {
		return nil, err
	}
	if err := copyGlobs(root, a.Examples, exFS); err != nil {
		return nil, err
	}
	metaScheme, err := xpkg.BuildMetaScheme()
	if err != nil {
		return nil, err
	}
	objScheme, err := xpkg.BuildObjectScheme()
	if err != nil {
		return nil, err
	}
	exDir := "/"
	if len(a.Examples) == 0 {
		exDir = "/no-examples" // the builder skips the examples layer when its directory is missing
	}
	builder := xpkg.New(
		parser.NewFsBackend(pkgFS, parser.FsDir("/"), parser.FsFilters(parser.SkipNotYAML())),
		parser.NewFsBackend(exFS, parser.FsDir(exDir), parser.FsFilters(parser.SkipNotYAML())),
		parser.New(metaScheme, objScheme),
		examples.New(),
	)
	img, _, err := builder.Build(ctx, xpkg.WithBase(base))
	return img, err
}

// pinnedMeta is the package metadata with every dependency on one of this repository's own
// packages pinned to version.
func pinnedMeta(path, version string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var c pkgmetav1.Configuration
	if err := yaml.Unmarshal(raw, &c); err != nil || c.Kind != pkgmetav1.ConfigurationKind {
		return raw, err
	}
	for i, d := range c.Spec.DependsOn {
		if d.Package != nil && strings.HasPrefix(*d.Package, Registry+"/") {
			c.Spec.DependsOn[i].Version = version
		}
	}
	return yaml.Marshal(&c)
}

// copyGlobs copies the files matching globs under root into fs, under their base names.
func copyGlobs(root string, globs []string, fs afero.Fs) error {
	var files []string
	for _, g := range globs {
		m, err := filepath.Glob(filepath.Join(root, g))
		if err != nil {
			return err
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, f)
		if err := afero.WriteFile(fs, "/"+filepath.ToSlash(rel), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
