package packaging_test

import (
	"archive/tar"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/internal/packaging"
)

// fallbackRoots is the module that carries CA roots in a binary, used when the system has none.
const fallbackRoots = "golang.org/x/crypto/x509roots/fallback"

// With no container runtime on the machine, each image of this machine's architecture is unpacked
// into a directory and its entrypoint started there, chrooted, as the image's user, with the
// image's environment only: what a kubelet does, short of namespaces and cgroups. The other
// architecture's entrypoints cannot run here; their ELF machine is checked instead.
func TestEveryImageStartsFromItsOwnFilesystemAsItsUser(t *testing.T) {
	images := built(t)
	files := make([]string, 0, len(images))
	for file, b := range images {
		if b.Runtime != "" {
			files = append(files, file)
		}
	}
	sort.Strings(files)
	for _, file := range files {
		b := images[file]
		t.Run(file, func(t *testing.T) {
			root, uid, gid, entrypoint := unpack(t, b)
			binary := filepath.Join(root, entrypoint)
			f, err := os.ReadFile(binary)
			require.NoError(t, err)
			assert.Equal(t, elfMachine[b.Arch], machineOf(t, f))
			assert.NoDirExists(t, filepath.Join(root, "etc"), "the image is FROM scratch: no /etc, so no CA bundle")
			if b.Name == "mdplane-controllers" {
				info, err := buildinfo.ReadFile(binary)
				require.NoError(t, err)
				assert.True(t, hasModule(info, fallbackRoots),
					"the controllers dial Hugging Face and ModelScope over TLS: with no bundle in the image, the binary must carry %s", fallbackRoots)
			}
			if b.Arch != runtime.GOARCH {
				return
			}
			out, err := runChrooted(t, root, uid, gid, entrypoint, "--help")
			require.NoError(t, err, "%s --help in the unpacked image:\n%s", entrypoint, out)
			assert.Contains(t, strings.ToLower(out), "usage", "the entrypoint printed its usage")
			t.Logf("%s --help, chrooted as %d:%d: %s", entrypoint, uid, gid, firstLine(out))
		})
	}
}

// unpack extracts the image's flattened filesystem into a directory, each file owned as in its
// layer, and returns the directory and the image's user, group and entrypoint.
func unpack(t *testing.T, b packaging.Built) (root string, uid, gid int, entrypoint string) {
	t.Helper()
	img, err := tarball.ImageFromPath(b.Path, nil)
	require.NoError(t, err)
	cfg, err := img.ConfigFile()
	require.NoError(t, err)
	_, err = fmt.Sscanf(cfg.Config.User, "%d:%d", &uid, &gid)
	require.NoError(t, err, "user %q is not numeric uid:gid (runAsNonRoot needs numbers)", cfg.Config.User)
	require.NotZero(t, uid, "the image runs as root")
	require.NotZero(t, gid, "the image runs as group root")
	require.Len(t, cfg.Config.Entrypoint, 1)
	entrypoint = cfg.Config.Entrypoint[0]

	root = t.TempDir()
	require.NoError(t, os.Chmod(root, 0o755)) // the image's / is the chroot: its user must enter it
	fs := mutate.Extract(img)
	defer fs.Close()
	tr := tar.NewReader(fs)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return root, uid, gid, entrypoint
		}
		require.NoError(t, err)
		extractEntry(t, root, hdr, tr)
	}
}

func extractEntry(t *testing.T, root string, hdr *tar.Header, r io.Reader) {
	t.Helper()
	path := filepath.Join(root, filepath.Clean("/"+hdr.Name))
	switch hdr.Typeflag {
	case tar.TypeDir:
		require.NoError(t, os.MkdirAll(path, hdr.FileInfo().Mode().Perm()))
	case tar.TypeReg:
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, hdr.FileInfo().Mode().Perm())
		require.NoError(t, err)
		_, err = io.Copy(f, r)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	default:
		t.Fatalf("%s: entry of type %c, which the images do not carry", hdr.Name, hdr.Typeflag)
	}
	if os.Geteuid() == 0 {
		require.NoError(t, os.Lchown(path, hdr.Uid, hdr.Gid))
	}
}

// runChrooted runs the entrypoint with root as its filesystem root, as uid:gid, with an empty
// environment. As root it chroots directly; otherwise it enters a new user namespace that maps
// this user to uid:gid, which grants the chroot. It skips when neither is permitted.
func runChrooted(t *testing.T, root string, uid, gid int, entrypoint string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(entrypoint, args...)
	cmd.Dir = "/"
	cmd.Env = []string{}
	attr := &syscall.SysProcAttr{Chroot: root, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	if os.Geteuid() != 0 {
		attr.Cloneflags = syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: os.Getuid(), Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: os.Getgid(), Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.Credential.NoSetGroups = true
	}
	cmd.SysProcAttr = attr
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Skipf("cannot chroot into the unpacked image (%v): run as root, or where unprivileged user namespaces are allowed", err)
	}
	return string(out), err
}

func hasModule(info *buildinfo.BuildInfo, path string) bool {
	for _, d := range info.Deps {
		if d.Path == path {
			return true
		}
	}
	return false
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
