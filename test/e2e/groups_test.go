package e2e

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

// Every test of the package says first how it runs: parallel, beside the others, when it creates
// and reads only objects of its own; sequential, with why, when it restarts a component, changes
// something every deployment sees, or needs a shared node or count to itself. Go runs the
// sequential tests one after another and only then releases the parallel ones, so no parallel test
// ever sees a sequential test's disturbance.
var ran struct{ parallel, sequential atomic.Int32 }

// parallel marks a test that creates and reads only its own objects.
func parallel(t *testing.T) {
	t.Helper()
	ran.parallel.Add(1)
	t.Parallel()
}

// sequential marks a test that must run alone; why is the reason, logged with the test.
func sequential(t *testing.T, why string) {
	t.Helper()
	ran.sequential.Add(1)
	t.Logf("sequential: %s", why)
}

// groupsSummary is the line the suite prints last about how its tests ran.
func groupsSummary() string {
	return fmt.Sprintf("e2e: %d tests ran in parallel, %d in the sequential group", ran.parallel.Load(), ran.sequential.Load())
}

// TestEveryTestSaysHowItRuns: each test's first statement is parallel(t) or sequential(t, why)
// with a reason, so the file says why a test runs alone.
func TestEveryTestSaysHowItRuns(t *testing.T) {
	parallel(t)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" {
				continue
			}
			if problem := howItRuns(fn); problem != "" {
				t.Errorf("%s: %s %s", fset.Position(fn.Pos()), fn.Name.Name, problem)
			}
		}
	}
}

// howItRuns is what is wrong with a test's first statement, or "".
func howItRuns(fn *ast.FuncDecl) string {
	const want = "does not begin with parallel(t) or sequential(t, \"why\")"
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return want
	}
	stmt, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return want
	}
	call, ok := stmt.X.(*ast.CallExpr)
	if !ok {
		return want
	}
	name, ok := call.Fun.(*ast.Ident)
	if !ok {
		return want
	}
	switch {
	case name.Name == "parallel" && len(call.Args) == 1:
		return ""
	case name.Name == "sequential" && len(call.Args) == 2:
		why, ok := call.Args[1].(*ast.BasicLit)
		if !ok || why.Kind != token.STRING {
			return "gives sequential a reason that is not a string literal"
		}
		if reason, err := strconv.Unquote(why.Value); err != nil || strings.TrimSpace(reason) == "" {
			return "gives sequential no reason"
		}
		return ""
	}
	return want
}
