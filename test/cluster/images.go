package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"debug/elf"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The images the stack builds for the real node from programs it builds itself, pushed to its
// registry under StackImages (the Crossplane image under Crossplane's own name), from where the
// node pulls them like any other.
var (
	PauseImage       = StackImages + "/pause:stack"
	CoreDNSImage     = StackImages + "/coredns:" + CoreDNSVersion
	EngineImage      = StackImages + "/engine-stand-in:" + InferenceSimVersion
	CrossplaneImage  = "xpkg.crossplane.io/crossplane/crossplane:" + CrossplaneVersion
	nonRootUser      = "65532:65532"
	imageEnvPath     = "PATH=/usr/local/bin:/usr/bin:/bin"
	imagePasswdFiles = map[string]string{
		"/etc/passwd": "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n",
		"/etc/group":  "root:x:0:\nnonroot:x:65532:\n",
	}
)

// stackImage is an image of programs and files: each program a static binary, the rest small text
// files, on no base.
type stackImage struct {
	ref string
	// programs are the executables, by their path in the image: the host file each is copied from.
	programs map[string]string
	// files are other files, by their path in the image: their content.
	files map[string]string
	// hostFiles are files of this machine copied as they are (shared libraries, an interpreter), by
	// their path in the image.
	hostFiles map[string]string
	// trees are host directories copied in whole, subdirectories too, by their path in the image;
	// names in skip are left out wherever they occur.
	trees map[string]string
	skip  []string
	// links are symbolic links, by their path in the image: their target.
	links      map[string]string
	dirs       []string
	entrypoint []string
	user       string
	env        []string
}

// imageEntry is a regular file of an image: its mode and content.
type imageEntry struct {
	mode    int64
	content []byte
}

// build packs the image for this machine's architecture: one layer, directories first.
func (img stackImage) build() (v1.Image, error) {
	entries, err := img.entries()
	if err != nil {
		return nil, err
	}
	layer, err := img.layer(entries)
	if err != nil {
		return nil, err
	}
	out, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	if err != nil {
		return nil, err
	}
	cfg, err := out.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = img.entrypoint
	cfg.Config.User = img.user
	cfg.Config.Env = append([]string{imageEnvPath}, img.env...)
	return mutate.ConfigFile(out, cfg)
}

// entries are the image's regular files, by path: programs (static only), host files, text files
// and the trees' files.
func (img stackImage) entries() (map[string]imageEntry, error) {
	entries := map[string]imageEntry{}
	for p, src := range img.programs {
		if err := checkStatic(src); err != nil {
			return nil, err
		}
		content, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		entries[p] = imageEntry{0o755, content}
	}
	for p, src := range img.hostFiles {
		info, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		content, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		entries[p] = imageEntry{int64(info.Mode().Perm()), content}
	}
	for p, content := range img.files {
		entries[p] = imageEntry{0o644, []byte(content)}
	}
	for p, src := range img.trees {
		if err := img.addTree(entries, p, src); err != nil {
			return nil, err
		}
	}
	return entries, nil
}

// addTree adds the regular files under src, but the names in skip, at their paths under p.
func (img stackImage) addTree(entries map[string]imageEntry, p, src string) error {
	return filepath.WalkDir(src, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(img.skip, d.Name()) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		content, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, file)
		entries[path.Join(p, filepath.ToSlash(rel))] = imageEntry{0o644, content}
		return nil
	})
}

// layer writes the directories every entry and link needs (and img.dirs, /tmp sticky), the links and
// the entries, in that order, as one uncompressed tar layer.
func (img stackImage) layer(entries map[string]imageEntry) (v1.Layer, error) {
	dirs := map[string]int64{}
	for _, d := range img.dirs {
		dirs[d] = 0o755
	}
	for _, p := range append(slices.Collect(maps.Keys(entries)), slices.Collect(maps.Keys(img.links))...) {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = 0o755
		}
	}
	if _, ok := dirs["/tmp"]; ok {
		dirs["/tmp"] = 0o1777
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range sortedKeys(dirs) {
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(d, "/") + "/", Mode: dirs[d], Typeflag: tar.TypeDir, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedKeys(img.links) {
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Linkname: img.links[p], Mode: 0o777,
			Typeflag: tar.TypeSymlink, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	for _, p := range sortedKeys(entries) {
		e := entries[p]
		if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(p, "/"), Mode: e.mode, Size: int64(len(e.content)),
			Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkStatic refuses a program that needs a dynamic loader: the images have no C library.
func checkStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically, and the real node's images have no C library: delete it and run test/cluster/build.sh, which builds it with CGO_ENABLED=0", file)
		}
	}
	return nil
}

// pushImage uploads an image to the stack's registry under ref's repository path and tag, as the
// node's registry hosts resolve ref there.
func (s *Stack) pushImage(ref string, img v1.Image) error {
	parsed, err := name.ParseReference(ref)
	if err != nil {
		return err
	}
	target, err := name.ParseReference(s.Registry + "/" + parsed.Context().RepositoryStr() + ":" + parsed.Identifier())
	if err != nil {
		return err
	}
	if err := remote.Write(target, img, s.registryTransport()); err != nil {
		return fmt.Errorf("pushing %s: %w", ref, err)
	}
	return nil
}

func (s *Stack) registryTransport() remote.Option {
	pool := x509.NewCertPool()
	if s.ca != nil {
		pool.AppendCertsFromPEM(s.ca.pem)
	} else if pem, err := os.ReadFile(s.RegistryCA()); err == nil { // an attached Stack's
		pool.AppendCertsFromPEM(pem)
	}
	return remote.WithTransport(&http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}})
}

// buildStatic builds the test module's command ./cmd/<name> statically into the stack's directory
// and returns the binary's path.
func (s *Stack) buildStatic(name string) (string, error) {
	here, err := packageDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(s.Dir, name)
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, "./cmd/"+name)
	build.Dir = filepath.Join(here, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if raw, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", name, err, raw)
	}
	return out, nil
}

// PublishCommand builds the test module's command ./cmd/<name> into an image of that one program,
// run as a non-root user, and pushes it to the stack's registry as StackImages/<name>:stack, which
// it returns: for a harness's own program on the real node.
func (s *Stack) PublishCommand(name string) (string, error) {
	program, err := s.buildStatic(name)
	if err != nil {
		return "", err
	}
	img := stackImage{ref: StackImages + "/" + name + ":stack", programs: map[string]string{"/" + name: program},
		entrypoint: []string{"/" + name}, user: nonRootUser, files: imagePasswdFiles}
	built, err := img.build()
	if err != nil {
		return "", fmt.Errorf("building the image %s: %w", img.ref, err)
	}
	return img.ref, s.pushImage(img.ref, built)
}

// stackImages are the images the stack builds for its node.
func (s *Stack) stackImages() ([]stackImage, error) {
	built := map[string]string{}
	for _, name := range []string{"mdplane-pause", "mdplane-engine-stand-in"} {
		program, err := s.buildStatic(name)
		if err != nil {
			return nil, err
		}
		built[name] = program
	}
	pause := built["mdplane-pause"]
	engine, err := engineImage(built["mdplane-engine-stand-in"], s.binary("llm-d-inference-sim", InferenceSimVersion))
	if err != nil {
		return nil, err
	}
	crossplane := s.modules["github.com/crossplane/crossplane/v2"]
	return []stackImage{
		engine,
		{ref: PauseImage, programs: map[string]string{"/pause": pause}, entrypoint: []string{"/pause"}, user: nonRootUser},
		{ref: CoreDNSImage, programs: map[string]string{"/coredns": s.binary("coredns", CoreDNSVersion)}, entrypoint: []string{"/coredns"},
			user: nonRootUser, files: imagePasswdFiles},
		// As Crossplane's release builds it: the binary at /bin/crossplane, its CRDs and webhook
		// configurations, which `crossplane core init` applies, and a writable /tmp.
		{ref: CrossplaneImage, programs: map[string]string{"/bin/crossplane": s.binary("crossplane", CrossplaneVersion)},
			trees: map[string]string{"/crds": filepath.Join(crossplane, "cluster", "crds"),
				"/webhookconfigurations": filepath.Join(crossplane, "cluster", "webhookconfigurations")},
			files: imagePasswdFiles, dirs: []string{"/tmp", "/home/nonroot"},
			entrypoint: []string{"/bin/crossplane"}, user: "65532"},
	}, nil
}

// publishStackImages builds the stack's images and pushes them to its registry.
func (s *Stack) publishStackImages(context.Context) error {
	images, err := s.stackImages()
	if err != nil {
		return err
	}
	for _, img := range images {
		built, err := img.build()
		if err != nil {
			return fmt.Errorf("building the image %s: %w", img.ref, err)
		}
		if err := s.pushImage(img.ref, built); err != nil {
			return err
		}
	}
	return nil
}

// python is the machine's Debian Python, which the engine image carries: mdplane's engine Pods run
// python3 scripts of their own (the drain hook, the wait for a replica's workers) on the engine's
// image, as vLLM's and SGLang's images have it.
const python = "/usr/bin/python3.11"

// sglangLaunchServer is the engine image's sglang.launch_server module: `python3 -m
// sglang.launch_server <args>` runs the stand-in as sglang.
const sglangLaunchServer = `import os, sys
os.execv("/usr/local/bin/mdplane-engine-stand-in", ["sglang"] + sys.argv[1:])
`

// engineImage is the engine stand-in: llm-d-inference-sim behind the stand-in, installed as vllm and
// as SGLang's launch_server module, with the machine's python3 and sh and the shared libraries they
// load.
func engineImage(standIn, sim string) (stackImage, error) {
	libs, err := sharedLibraries(python, "/usr/bin/dash", "/usr/lib/python3.11/lib-dynload")
	if err != nil {
		return stackImage{}, err
	}
	hostFiles := map[string]string{"/usr/bin/python3.11": python, "/bin/dash": "/usr/bin/dash"}
	for _, lib := range libs {
		hostFiles[lib] = lib
	}
	files := map[string]string{
		"/usr/lib/python3/dist-packages/sglang/__init__.py":      "",
		"/usr/lib/python3/dist-packages/sglang/launch_server.py": sglangLaunchServer,
	}
	maps.Copy(files, imagePasswdFiles)
	return stackImage{ref: EngineImage,
		programs:  map[string]string{"/usr/local/bin/mdplane-engine-stand-in": standIn, "/usr/local/bin/llm-d-inference-sim": sim},
		hostFiles: hostFiles,
		trees:     map[string]string{"/usr/lib/python3.11": "/usr/lib/python3.11"},
		skip: []string{"__pycache__", "test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3",
			"pydoc_data", "site-packages", "dist-packages", "config-3.11-x86_64-linux-gnu"},
		links: map[string]string{"/usr/local/bin/vllm": "mdplane-engine-stand-in", "/usr/bin/python3": "python3.11",
			"/bin/sh": "dash"},
		files: files, dirs: []string{"/tmp", "/home/nonroot"},
		user: nonRootUser, env: []string{"PYTHONDONTWRITEBYTECODE=1", "HOME=/home/nonroot"},
	}, nil
}

// sharedLibraries are the shared libraries the programs (and every library under a directory given)
// load, as ldd resolves them on this machine, with the dynamic loader.
func sharedLibraries(paths ...string) ([]string, error) {
	var programs []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("the engine image needs %s (Debian's python3 and dash): %w", p, err)
		}
		if !info.IsDir() {
			programs = append(programs, p)
			continue
		}
		libs, _ := filepath.Glob(filepath.Join(p, "*.so"))
		programs = append(programs, libs...)
	}
	found := map[string]bool{}
	for _, p := range programs {
		out, err := exec.Command("ldd", p).Output()
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			for _, f := range strings.Fields(line) {
				if strings.HasPrefix(f, "/") {
					found[f] = true
				}
			}
		}
	}
	return sortedKeys(found), nil
}

// FunctionRuntimeImage writes, as a docker-save tarball at path, the runtime image of a composition
// Function build.sh builds (name-version, static): the binary as /function, run as a non-root user,
// listening on 9443, as Crossplane's function template builds one; `crossplane xpkg build
// --embed-runtime-image-tarball` packs it with the Function's package.
func (s *Stack) FunctionRuntimeImage(function, version, path string) error {
	img, err := stackImage{ref: function, programs: map[string]string{"/function": s.binary(function, version)},
		entrypoint: []string{"/function"}, user: nonRootUser, files: imagePasswdFiles}.build()
	if err != nil {
		return err
	}
	tag, err := name.NewTag(StackImages + "/" + function + ":" + version)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}
