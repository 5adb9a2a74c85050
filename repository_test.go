package mdplane_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
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

// sectionSign is the section sign, which a citation of a document's section carries.
const sectionSign = "\u00a7"

// specCitation matches what a comment cites: a section sign, or a Markdown file by name.
var specCitation = regexp.MustCompile(sectionSign + `|[\w.-]+\.md\b`)

// TestCommentsStateTheirRules: no Go comment cites a section of a document, or a Markdown file the
// repository does not hold; a comment states the rule itself. A near miss: docs/ pages and the
// README are in the repository and may be cited.
func TestCommentsStateTheirRules(t *testing.T) {
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v)", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	held := map[string]bool{}
	for _, path := range files {
		held[filepath.Base(path)] = true
	}
	cites := func(comment string) bool {
		for _, m := range specCitation.FindAllString(comment, -1) {
			if m == sectionSign || !held[filepath.Base(m)] {
				return true
			}
		}
		return false
	}
	if !cites("the table of "+sectionSign+"2.1") || !cites("the spec's lifecycle.md") || cites("see docs/rollout.md") {
		t.Fatal("the check no longer tells a citation from a docs/ reference")
	}
	for _, path := range files {
		if !strings.HasSuffix(path, ".go") {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if _, comment, ok := strings.Cut(line, "//"); ok && cites(comment) {
				t.Errorf("%s:%d cites a document outside the repository; state the rule instead: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
}
