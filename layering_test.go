package mdplane_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mdplane/mdplane/"

// TestLayering holds the project's layering: apis ← shared code under internal ← composition
// functions and controllers ← cmd; a package imports downward only.
func TestLayering(t *testing.T) {
	imports, withTests := packageImports(t)
	cases := []struct {
		rule     string
		importer func(string) bool
		refused  func(string) bool
		// ownFilesOnly leaves the package's tests out: an API's fuzz test may render through the
		// function it guards.
		ownFilesOnly bool
	}{
		{"a controller never imports a composition function",
			under("controllers/"), under("functions/"), false},
		{"internal/plan never imports a reconciler",
			under("internal/plan"), under("controllers/"), false},
		{"apis import only apis",
			under("apis/"), func(p string) bool { return strings.HasPrefix(p, module) && !under("apis/")(p) }, true},
		{"functions never import controllers",
			under("functions/"), under("controllers/"), false},
		{"internal/replicas and internal/pacing import neither functions nor controllers",
			func(p string) bool { return under("internal/replicas")(p) || under("internal/pacing")(p) },
			func(p string) bool { return under("functions/")(p) || under("controllers/")(p) }, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			graph := withTests
			if tc.ownFilesOnly {
				graph = imports
			}
			for pkg, deps := range graph {
				if !tc.importer(pkg) {
					continue
				}
				for _, dep := range deps {
					if tc.refused(dep) {
						t.Errorf("%s imports %s; move what it needs to the lower layer both can import", pkg, dep)
					}
				}
			}
		})
	}
	t.Run("a near miss: a controller importing internal/replicas is allowed", func(t *testing.T) {
		if !slices.Contains(imports[module+"controllers/members"], module+"internal/replicas") {
			t.Error("controllers/members no longer imports internal/replicas: the table above checks nothing real")
		}
	})
}

// packageImports lists each package of the module with the module's packages it imports: from its
// own files, and from its own files and its tests' (go list; no build).
func packageImports(t *testing.T) (own, withTests map[string][]string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{join .TestImports " "}} {{join .XTestImports " "}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	own, withTests = map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, rest, _ := strings.Cut(line, "|")
		ownDeps, testDeps, _ := strings.Cut(rest, "|")
		own[pkg] = moduleDeps(pkg, strings.Fields(ownDeps))
		all := append(moduleDeps(pkg, strings.Fields(testDeps)), own[pkg]...)
		slices.Sort(all)
		withTests[pkg] = slices.Compact(all)
	}
	return own, withTests
}

// moduleDeps is the packages of this module among deps, other than pkg itself.
func moduleDeps(pkg string, deps []string) []string {
	var out []string
	for _, dep := range deps {
		if strings.HasPrefix(dep, module) && dep != pkg {
			out = append(out, dep)
		}
	}
	return out
}

// under reports whether a package is dir or below it, in this module.
func under(dir string) func(string) bool {
	return func(p string) bool {
		rel, ok := strings.CutPrefix(p, module)
		return ok && (rel == strings.TrimSuffix(dir, "/") || strings.HasPrefix(rel, strings.TrimSuffix(dir, "/")+"/"))
	}
}
