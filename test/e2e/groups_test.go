package e2e

import (
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Every test of the package says first how it runs: parallel, beside the others, when it creates
// and reads only objects of its own; sequential, with why, when it restarts a component, changes
// something every deployment sees, or needs a shared node or count to itself. Go runs the
// sequential tests one after another and only then releases the parallel ones, so no parallel test
// ever sees a sequential test's disturbance.
var ran struct{ parallel, sequential atomic.Int32 }

// parallel marks a test that creates and reads only its own objects. It runs when one of the
// suite's slots is free, once every parallelLong test has taken one.
func parallel(t *testing.T) {
	t.Helper()
	ran.parallel.Add(1)
	t.Parallel()
	longs.waitForAll()
	takeSlot(t)
}

// parallelLong marks a parallel test that holds its slot a minute or more: it takes a slot before
// the shorter ones do, so that the group does not end on a long test started last (the tests are
// released in the shuffled order).
func parallelLong(t *testing.T) {
	t.Helper()
	ran.parallel.Add(1)
	longs.register()
	t.Parallel()
	takeSlot(t)
	longs.started()
}

// takeSlot waits for one of the suite's slots, holds it until t ends, and times t from then.
func takeSlot(t *testing.T) {
	slots <- struct{}{}
	t.Cleanup(func() { <-slots })
	timeTest(t, parallelGroup)
}

// longs counts the parallelLong tests: each registers before the parallel group is released (Go
// runs a test up to its t.Parallel first), so once the group runs the count is final.
var longs = newLongTests()

type longTests struct {
	mu                  sync.Mutex
	cond                *sync.Cond
	registered, inSlots int
}

func newLongTests() *longTests {
	l := &longTests{}
	l.cond = sync.NewCond(&l.mu)
	return l
}

func (l *longTests) register() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.registered++
}

func (l *longTests) started() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inSlots++
	l.cond.Broadcast()
}

// waitForAll returns once every registered long test holds a slot.
func (l *longTests) waitForAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for l.inSlots < l.registered {
		l.cond.Wait()
	}
}

// parallelWaiting marks a parallel test that spends minutes waiting on one thing (why): it takes no
// slot and starts as soon as the parallel group does, rather than at a random place in the queue,
// where it would outlast every test around it and hold the group open.
func parallelWaiting(t *testing.T, why string) {
	t.Helper()
	ran.parallel.Add(1)
	t.Parallel()
	t.Logf("parallel, without a slot: %s", why)
	timeTest(t, parallelGroup)
}

// slots bounds how many parallel tests run at once: MDPLANE_E2E_PARALLEL (make's E2E_PARALLEL,
// default 8). The suite bounds them itself, and make runs go test with a -parallel above the number
// of tests, so that the tests that mostly wait (parallelWaiting) need no slot.
var slots = make(chan struct{}, parallelSlots())

func parallelSlots() int {
	if n, err := strconv.Atoi(os.Getenv("MDPLANE_E2E_PARALLEL")); err == nil && n > 0 {
		return n
	}
	return 8
}

// sequential marks a test that must run alone; why is the reason, logged with the test. On a stack
// other tests may share (make test-e2e-on-stack), it skips.
func sequential(t *testing.T, why string) {
	t.Helper()
	ran.sequential.Add(1)
	needsOwnStack(t, why)
	t.Logf("sequential: %s", why)
	timeTest(t, sequentialGroup)
}

// needsOwnStack skips a test on a stack the suite attached to rather than started: why names what
// the test needs of the suite's own (its processes, the metrics exporter's bodies, the model hub, the
// real node's containers, the cluster to itself).
func needsOwnStack(t *testing.T, why string) {
	t.Helper()
	if stack.Attached() {
		t.Skipf("needs the suite's own stack (make test-e2e): %s", why)
	}
}

// groupsSummary is the line the suite prints last about how its tests ran.
func groupsSummary() string {
	return fmt.Sprintf("e2e: %d tests ran in parallel, %d in the sequential group", ran.parallel.Load(), ran.sequential.Load())
}

// The two groups, as the timing summary names them.
const (
	sequentialGroup = "the sequential group"
	parallelGroup   = "the parallel group"
)

// took is how long one test ran, from its release (a parallel test waits for the sequential group
// first) to the end of its last cleanup.
type took struct {
	test       string
	start, end time.Time
}

// timings are the tests' times by group, for the summary's split of the suite's time. They are
// printed, never asserted: the split tells a developer where the suite's minutes go.
var timings = struct {
	sync.Mutex
	byGroup map[string][]took
}{byGroup: map[string][]took{}}

// timeTest records t's time in group when t ends. The cleanup is registered before the test's own,
// so it runs after them: a test's teardown counts.
func timeTest(t *testing.T, group string) {
	start := time.Now()
	t.Cleanup(func() {
		timings.Lock()
		defer timings.Unlock()
		timings.byGroup[group] = append(timings.byGroup[group], took{test: t.Name(), start: start, end: time.Now()})
	})
}

// testTimes is every timed test, one line each in the order they were released: its group, its
// start (seconds after the first test's) and its duration, tab-separated, for finding where a
// group's minutes go beyond its three slowest.
func testTimes() string {
	timings.Lock()
	defer timings.Unlock()
	type row struct {
		group string
		took
	}
	var all []row
	for g, tests := range timings.byGroup {
		for _, tt := range tests {
			all = append(all, row{strings.TrimPrefix(g, "the "), tt})
		}
	}
	if len(all) == 0 {
		return ""
	}
	slices.SortFunc(all, func(a, b row) int { return a.start.Compare(b.start) })
	var b strings.Builder
	b.WriteString("group\tstart_s\tseconds\ttest\n")
	for _, r := range all {
		fmt.Fprintf(&b, "%s\t%.0f\t%.0f\t%s\n", r.group, r.start.Sub(all[0].start).Seconds(), r.end.Sub(r.start).Seconds(), r.test)
	}
	return b.String()
}

// timingSummary is the suite's time split into its stages: the stack's start, each group from its
// first test's release to its last test's end with its three slowest tests, and the uninstall.
func timingSummary(stackStart, uninstall time.Duration) string {
	timings.Lock()
	defer timings.Unlock()
	parts := []string{"stack started in " + seconds(stackStart)}
	for _, group := range []string{sequentialGroup, parallelGroup} {
		tests := slices.Clone(timings.byGroup[group])
		if len(tests) == 0 {
			continue
		}
		first, last := tests[0].start, tests[0].end
		for _, tt := range tests {
			if tt.start.Before(first) {
				first = tt.start
			}
			if tt.end.After(last) {
				last = tt.end
			}
		}
		slices.SortFunc(tests, func(a, b took) int { return cmp.Compare(b.end.Sub(b.start), a.end.Sub(a.start)) })
		var slowest []string
		for _, tt := range tests[:min(3, len(tests))] {
			slowest = append(slowest, tt.test+" "+seconds(tt.end.Sub(tt.start)))
		}
		parts = append(parts, fmt.Sprintf("%s %s (slowest: %s)", group, seconds(last.Sub(first)), strings.Join(slowest, ", ")))
	}
	if uninstall > 0 {
		parts = append(parts, "uninstall "+seconds(uninstall))
	}
	return "e2e: " + strings.Join(parts, "; ")
}

func seconds(d time.Duration) string { return fmt.Sprintf("%d s", int(d.Round(time.Second).Seconds())) }

// TestEveryTestSaysHowItRuns: each test's first statement is parallel(t), parallelLong(t),
// parallelWaiting(t, why) or sequential(t, why) with a reason, so the file says why a test runs
// alone or needs no slot.
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

// TestHowATestSaysHowItRuns: the first statements the rule admits, and a near miss beside each.
func TestHowATestSaysHowItRuns(t *testing.T) {
	parallel(t)
	for _, row := range []struct {
		first string
		ok    bool
	}{
		{`parallel(t)`, true},
		{`parallelLong(t)`, true},
		{`parallelLong(t, "long")`, false},
		{`t.Parallel()`, false},
		{`parallelWaiting(t, "waits on a timeout")`, true},
		{`parallelWaiting(t, " ")`, false},
		{`sequential(t, "kills the controllers")`, true},
		{`sequential(t, why)`, false},
	} {
		f, err := parser.ParseFile(token.NewFileSet(), "x_test.go", "package e2e\nfunc TestX(t *testing.T) {\n"+row.first+"\n}\n", 0)
		if err != nil {
			t.Fatal(err)
		}
		if problem := howItRuns(f.Decls[0].(*ast.FuncDecl)); (problem == "") != row.ok {
			t.Errorf("%s: %q, want admitted %v", row.first, problem, row.ok)
		}
	}
}

// howItRuns is what is wrong with a test's first statement, or "".
func howItRuns(fn *ast.FuncDecl) string {
	const want = "does not begin with parallel(t), parallelLong(t), parallelWaiting(t, \"why\") or sequential(t, \"why\")"
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
	case (name.Name == "parallel" || name.Name == "parallelLong") && len(call.Args) == 1:
		return ""
	case (name.Name == "sequential" || name.Name == "parallelWaiting") && len(call.Args) == 2:
		why, ok := call.Args[1].(*ast.BasicLit)
		if !ok || why.Kind != token.STRING {
			return "gives " + name.Name + " a reason that is not a string literal"
		}
		if reason, err := strconv.Unquote(why.Value); err != nil || strings.TrimSpace(reason) == "" {
			return "gives " + name.Name + " no reason"
		}
		return ""
	}
	return want
}

// TestTheInnerLoopRunsOnARunningStack: make test-e2e-on-stack, as docs/testing.md gives it, runs
// the tests asked for in a process of its own against this suite's running stack, starting none: a
// test that only reads passes, and a sequential one skips, saying why.
func TestTheInnerLoopRunsOnARunningStack(t *testing.T) {
	parallel(t)
	if stack.Attached() {
		t.Skip("already attached to a running stack")
	}
	cmd := exec.Command("make", "--no-print-directory", "test-e2e-on-stack", "STACK_DIR="+stack.Dir,
		"RUN=^(TestConformanceInstalled|TestChaos)$")
	cmd.Dir = filepath.Join("..", "..")
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil {
		t.Fatalf("make test-e2e-on-stack: %v\n%s", err, out)
	}
	for _, want := range []string{"e2e: on the stack in " + stack.Dir, "--- PASS: TestConformanceInstalled",
		"--- SKIP: TestChaos", "needs the suite's own stack (make test-e2e): kills and restarts"} {
		if !strings.Contains(out, want) {
			t.Errorf("make test-e2e-on-stack does not print %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "e2e stack: ") {
		t.Errorf("make test-e2e-on-stack started a stack of its own:\n%s", out)
	}
}
