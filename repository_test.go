package mdplane_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
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

// projectIssue matches a reference to one of this project's issues: the word issue and a number, or
// a bare hash sign and a number (an upstream one names its repository first and is not matched).
var projectIssue = regexp.MustCompile(`(?i)\bissues? #?[0-9]+|(^|[^\w/&-])#[0-9]+\b`)

// trackedFiles are the files git tracks, and a citation check: whether a text cites a section of a
// document or a Markdown file the repository does not hold.
func trackedFiles(t *testing.T) ([]string, func(text string) bool) {
	t.Helper()
	out, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout (%v)", err)
	}
	files := strings.Split(strings.TrimRight(string(out), "\x00"), "\x00")
	held := map[string]bool{}
	for _, path := range files {
		held[filepath.Base(path)] = true
	}
	cites := func(text string) bool {
		for _, m := range specCitation.FindAllString(text, -1) {
			if m == sectionSign || !held[filepath.Base(m)] {
				return true
			}
		}
		return false
	}
	if !cites("the table of "+sectionSign+"2.1") || !cites("the spec's lifecycle.md") || cites("see docs/rollout.md") {
		t.Fatal("the check no longer tells a citation from a docs/ reference")
	}
	return files, cites
}

// TestCommentsStateTheirRules: no Go comment cites a section of a document, a Markdown file the
// repository does not hold, or one of the project's issues; a comment states the rule itself. A
// near miss: docs/ pages and the README are in the repository and may be cited.
func TestCommentsStateTheirRules(t *testing.T) {
	files, cites := trackedFiles(t)
	for _, path := range files {
		if !strings.HasSuffix(path, ".go") {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			if _, comment, ok := strings.Cut(line, "//"); ok && (cites(comment) || projectIssue.MatchString(comment)) {
				t.Errorf("%s:%d cites a document outside the repository or an issue; state the rule instead: %s", path, i+1, strings.TrimSpace(line))
			}
		}
	}
}

// maxDocLines is the longest a page of docs/ may be: longer, it is a log, not a page.
const maxDocLines = 500

// runsBehindFigures is the one section of a figures page that dates runs: the runs the page's current
// figures were measured in, replaced with the figures. A date there says when, not what changed.
const runsBehindFigures = "### Runs behind these figures"

// figurePages are the pages of measured figures: the test suite's times and the benchmarks'.
var figurePages = []string{"docs/testing.md", "docs/performance.md"}

// datesAllowedAt says, line by line, where the page at path may date a run: under a figures page's
// runsBehindFigures heading, up to the next heading.
func datesAllowedAt(path string, lines []string) []bool {
	allowed, in := make([]bool, len(lines)), false
	for i, line := range lines {
		if strings.HasPrefix(line, "#") {
			in = slices.Contains(figurePages, path) && line == runsBehindFigures
		}
		allowed[i] = in
	}
	return allowed
}

// TestDatesStandOnlyBehindTheFigures: the one section that may date runs, and the near misses.
func TestDatesStandOnlyBehindTheFigures(t *testing.T) {
	page := []string{"## How long things take", "| warm | 800 s |", runsBehindFigures, "| 1 | 2026-12-05 03:20 |", "## Generated files", "made 2026-12-05"}
	for _, row := range []struct {
		rule, path string
		line       int
		allowed    bool
	}{
		{"a run listed behind the figures", "docs/testing.md", 3, true},
		{"a figure above that section", "docs/testing.md", 1, false},
		{"a line after the next heading", "docs/testing.md", 5, false},
		{"the benchmarks' runs behind their figures", "docs/performance.md", 3, true},
		{"the same section on a page of no figures", "docs/operations.md", 3, false},
	} {
		if got := datesAllowedAt(row.path, page)[row.line]; got != row.allowed {
			t.Errorf("%s: dates allowed %v, want %v", row.rule, got, row.allowed)
		}
	}
}

// TestDocsAreCurrentAndSelfContained: every page of docs/ and the README is short enough to read,
// cites no document outside the repository and no issue of the project, and carries no dated run
// (figures are the current ones; history is git's) outside the testing page's runsBehindFigures.
// The changelog alone dates its releases.
func TestDocsAreCurrentAndSelfContained(t *testing.T) {
	files, cites := trackedFiles(t)
	dated := regexp.MustCompile(`\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b`)
	for _, row := range []struct {
		text           string
		issue, hasDate bool
	}{
		{"the reliability work of issue 21", true, false},
		{"see #33", true, false},
		{"upstream crossplane/crossplane#7062", false, false},
		{"measured 2026-12-01 17:10", false, true},
		{"SEED=20261201", false, false},
	} {
		if projectIssue.MatchString(row.text) != row.issue || dated.MatchString(row.text) != row.hasDate {
			t.Fatalf("the check misreads %q", row.text)
		}
	}
	for _, path := range files {
		page := strings.HasPrefix(path, "docs/") || path == "README.md"
		if !page || !strings.HasSuffix(path, ".md") {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(raw), "\n")
		if strings.HasPrefix(path, "docs/") && len(lines) > maxDocLines {
			t.Errorf("%s is %d lines, over %d: split it into pages a reader can finish", path, len(lines), maxDocLines)
		}
		datesAllowed := datesAllowedAt(path, lines)
		for i, line := range lines {
			switch {
			case cites(line):
				t.Errorf("%s:%d cites a document outside the repository; state the fact instead: %s", path, i+1, line)
			case projectIssue.MatchString(line):
				t.Errorf("%s:%d names an issue; say what is true instead: %s", path, i+1, line)
			case dated.MatchString(line) && !datesAllowed[i]:
				t.Errorf("%s:%d dates a run; give the current figures, history is git's: %s", path, i+1, line)
			}
		}
	}
}

// markdownLink is a link's target in a page: [text](target).
var markdownLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// headingAnchor is the anchor a heading gets when the page is shown: lower case, punctuation other
// than hyphens and underscores dropped, spaces as hyphens.
func headingAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#"))) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchorsOf are the heading anchors of a page, outside its code blocks.
func anchorsOf(page string) map[string]bool {
	anchors, fenced := map[string]bool{}, false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if !fenced && strings.HasPrefix(line, "#") {
			anchors[headingAnchor(line)] = true
		}
	}
	return anchors
}

// TestDocLinksResolve: every relative link of docs/ and the README names a file the repository
// holds, and its #anchor a heading of that page, so moving a section or a page breaks this test,
// not a reader's click. Links to the web are not followed.
func TestDocLinksResolve(t *testing.T) {
	for _, row := range []struct{ heading, anchor string }{
		{"## Chaos during rollouts", "chaos-during-rollouts"},
		{"### Capacity-preserving cadence (opt-in)", "capacity-preserving-cadence-opt-in"},
		{"## `make test`, warm", "make-test-warm"},
	} {
		if got := headingAnchor(row.heading); got != row.anchor {
			t.Fatalf("the check anchors %q as %q, want %q", row.heading, got, row.anchor)
		}
	}
	files, _ := trackedFiles(t)
	for _, path := range files {
		if !strings.HasSuffix(path, ".md") || (!strings.HasPrefix(path, "docs/") && path != "README.md") {
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fenced := false
		for i, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "```") {
				fenced = !fenced
			}
			if fenced {
				continue
			}
			for _, m := range markdownLink.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				file, anchor, _ := strings.Cut(target, "#")
				linked := path
				if file != "" {
					linked = filepath.Join(filepath.Dir(path), file)
				}
				text, err := os.ReadFile(linked)
				if err != nil {
					if _, dirErr := os.Stat(linked); dirErr == nil && anchor == "" {
						continue // a directory
					}
					t.Errorf("%s:%d links %s, which is not in the repository", path, i+1, target)
					continue
				}
				if anchor != "" && strings.HasSuffix(linked, ".md") && !anchorsOf(string(text))[anchor] {
					t.Errorf("%s:%d links %s, but %s has no heading with that anchor", path, i+1, target, linked)
				}
			}
		}
	}
}
