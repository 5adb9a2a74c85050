package mdplane_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoPath is a backquoted path into the repository's own top-level directories.
var repoPath = regexp.MustCompile("`((?:apis|cmd|controllers|docs|examples|functions|internal|package|snapshot|test|webhooks)/[^` ]*)`")

// inRepository reports whether a path a page names exists (see TestDocsNameFilesThatExist).
func inRepository(p string) bool {
	p, _, _ = strings.Cut(p, "#")
	p = strings.TrimSuffix(strings.TrimSuffix(p, ":"), ",")
	if strings.Contains(p, "...") || strings.ContainsAny(p, "<>") {
		return true // a pattern of packages, or a placeholder
	}
	for _, root := range []string{".", "examples/team-api"} {
		full := filepath.Join(root, p)
		if strings.ContainsAny(full, "*?[") {
			if m, _ := filepath.Glob(full); len(m) > 0 {
				return true
			}
			continue
		}
		if _, err := os.Stat(full); err == nil {
			return true
		}
		// internal/plan.Plan: a symbol of a package that exists.
		if dir, _, ok := strings.Cut(full, "."); ok && !strings.Contains(filepath.Base(full), "_") {
			if st, err := os.Stat(dir); err == nil && st.IsDir() {
				return true
			}
		}
	}
	return false
}

// TestDocsNameFilesThatExist: every repository path a page names in backquotes exists: a file, a
// directory, a glob that matches, or a Go symbol of a package that exists. A path in a table about
// the team API example is read from examples/team-api.
func TestDocsNameFilesThatExist(t *testing.T) {
	for _, row := range []struct {
		path string
		want bool
	}{
		{"docs/install.md", true}, {"docs/nowhere.md", false},
		{"examples/*.yaml", true}, {"examples/*.json", false},
		{"internal/plan.Plan", true}, {"internal/nowhere.Plan", false},
		{"package/definition.yaml", true}, // the team API example's own package
	} {
		if got := inRepository(row.path); got != row.want {
			t.Fatalf("inRepository(%q) = %t, want %t", row.path, got, row.want)
		}
	}
	for _, page := range docPages(t) {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(raw), "\n") {
			for _, m := range repoPath.FindAllStringSubmatch(line, -1) {
				if !inRepository(m[1]) {
					t.Errorf("%s:%d names %s, which is not in the repository", page, i+1, m[1])
				}
			}
		}
	}
}

// controllerFlag is a flag mdplane-controllers defines: fs.<Type>Var(&x, "name", ...).
var controllerFlag = regexp.MustCompile(`fs\.\w+Var\([^,]+, "([a-z0-9-]+)"`)

// TestTheShippedArgsAreFlagsOfTheBinary: every argument the install manifests give mdplane's
// Deployments, and every flag the install page's table lists, is a flag mdplane-controllers defines
// (or controller-runtime's zap logging flags), so a renamed flag cannot leave a Deployment crashing
// on start.
func TestTheShippedArgsAreFlagsOfTheBinary(t *testing.T) {
	defined := map[string]bool{}
	sources, err := filepath.Glob("cmd/mdplane-controllers/*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sources {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range controllerFlag.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
	}
	if !defined["leader-elect"] || !defined["metrics-api-cert-secret"] {
		t.Fatalf("read no flags of mdplane-controllers (%d): the pattern no longer matches bindFlags", len(defined))
	}
	known := func(arg string) bool {
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
		return defined[name] || strings.HasPrefix(name, "zap-")
	}
	manifests, err := filepath.Glob("package/*/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	shipped := 0
	for _, f := range manifests {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---") {
			var d struct {
				Kind string
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Image string
								Args  []string
							}
						}
					}
				}
			}
			if yaml.Unmarshal([]byte(doc), &d) != nil || d.Kind != "Deployment" {
				continue
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				if !strings.Contains(c.Image, "mdplane-controllers") {
					continue
				}
				for _, arg := range c.Args {
					shipped++
					if !known(arg) {
						t.Errorf("%s passes %s, which mdplane-controllers does not define", f, arg)
					}
				}
			}
		}
	}
	if shipped == 0 {
		t.Fatal("found no arguments of mdplane-controllers in package/: the manifests moved")
	}
	page, err := os.ReadFile("docs/install.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(page), "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`mdplane-") {
			continue
		}
		for _, arg := range regexp.MustCompile(`--[a-z0-9-]+`).FindAllString(cells[3], -1) {
			if !known(arg) {
				t.Errorf("docs/install.md lists %s for %s, which mdplane-controllers does not define", arg, strings.TrimSpace(cells[1]))
			}
		}
	}
}

// docPages are the tracked README and pages under docs/ (the decision records among them), as
// TestDocLinksResolve reads them.
func docPages(t *testing.T) []string {
	t.Helper()
	files, _ := trackedFiles(t)
	var pages []string
	for _, path := range files {
		if path == "README.md" || strings.HasPrefix(path, "docs/") && strings.HasSuffix(path, ".md") {
			pages = append(pages, path)
		}
	}
	return pages
}
