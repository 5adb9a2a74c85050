package mdplane_test

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// maxTrackedFileSize is the largest file the repository may hold: anything larger is a build output,
// a download or a generated image, none of which belong in a commit.
const maxTrackedFileSize = 1 << 20

// executableMagic are the leading bytes of compiled programs: ELF, Mach-O (both widths, both byte
// orders, and universal), PE and WebAssembly.
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{0xca, 0xfe, 0xba, 0xbe},
	[]byte("MZ"),
	[]byte("\x00asm"),
}

// TestNoBinariesTracked fails when a tracked file is larger than 1 MiB or is a compiled program, so
// a binary built at the repository root cannot ride along with a commit unnoticed.
func TestNoBinariesTracked(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): nothing is tracked", err)
	}
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a symbolic link
		}
		if info.Size() > maxTrackedFileSize {
			t.Errorf("%s is tracked and %d bytes, over the %d-byte limit: remove it with `git rm --cached %s` and add it to .gitignore", path, info.Size(), maxTrackedFileSize, path)
			continue
		}
		if magic := leadingBytes(t, path, 4); isExecutable(magic) {
			t.Errorf("%s is tracked and is a compiled program: remove it with `git rm --cached %s` and add it to .gitignore", path, path)
		}
	}
}

// leadingBytes reads up to n bytes from the start of path.
func leadingBytes(t *testing.T, path string, n int) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	defer f.Close()
	buf := make([]byte, n)
	read, _ := f.Read(buf)
	return buf[:read]
}

func isExecutable(head []byte) bool {
	for _, magic := range executableMagic {
		if bytes.HasPrefix(head, magic) {
			return true
		}
	}
	return false
}

// specCitation matches a comment's reference to a specification file that is not in the
// repository: its name, or a section sign.
var specCitation = regexp.MustCompile(`related[- ]facts|router-artifact-drain|backend-devices-settings|elastic-dp-lifecycle|model-deployment\.md|\.\./shared/|§`)

// TestCommentsStateTheirRules: no Go comment cites a file a reader of the code does not have; a
// comment states the rule itself. A near miss: docs/ pages are in the repository and may be cited.
func TestCommentsStateTheirRules(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z", "*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v)", err)
	}
	if !specCitation.MatchString("the table of elastic-dp-lifecycle §2.1") || specCitation.MatchString("see docs/rollout.md") {
		t.Fatal("the pattern no longer tells a citation from a docs/ reference")
	}
	for _, path := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if _, comment, ok := strings.Cut(line, "//"); ok && specCitation.MatchString(comment) {
				t.Errorf("%s:%d cites a specification outside the repository; state the rule instead: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
}
