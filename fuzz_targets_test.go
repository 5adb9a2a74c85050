package mdplane_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	// fuzzTargetsVar is the Makefile's FUZZ_TARGETS assignment, continuation lines included.
	fuzzTargetsVar = regexp.MustCompile(`(?m)^FUZZ_TARGETS :=((?:.*\\\n)*.*)$`)
	// fuzzFunc is the declaration of a fuzz target.
	fuzzFunc = regexp.MustCompile(`(?m)^func (Fuzz\w*)\(\w+ \*testing\.F\)`)
)

// TestFuzzTargetsAreListed holds the Makefile's FUZZ_TARGETS, which `make fuzz` and make test's short
// pass run, to every fuzz target in the repository (both modules), so a new target cannot be left
// out of them.
func TestFuzzTargetsAreListed(t *testing.T) {
	makefile, err := os.ReadFile("Makefile")
	require.NoError(t, err)
	m := fuzzTargetsVar.FindSubmatch(makefile)
	require.NotNil(t, m, "the Makefile has no FUZZ_TARGETS")
	listed := strings.Fields(strings.ReplaceAll(string(m[1]), "\\\n", " "))

	var declared []string
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, f := range fuzzFunc.FindAllSubmatch(src, -1) {
			declared = append(declared, "./"+filepath.ToSlash(filepath.Dir(path))+":"+string(f[1]))
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, declared)
	slices.Sort(declared)
	sortedListed := slices.Sorted(slices.Values(listed))
	assert.Equal(t, declared, sortedListed, "FUZZ_TARGETS in the Makefile lists every func Fuzz of the repository as <package>:<target>")
	assert.Equal(t, len(listed), len(slices.Compact(sortedListed)), "no target is listed twice")
}
