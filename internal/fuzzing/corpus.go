package fuzzing

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// WriteSeedsEnv is the variable that makes TestSeedCorpus tests write their seed corpora instead of
// checking them: `MDPLANE_WRITE_FUZZ_SEEDS=1 go test -run TestSeedCorpus ./...`.
const WriteSeedsEnv = "MDPLANE_WRITE_FUZZ_SEEDS"

// CorpusFile is one fuzz input in Go's corpus file format (`go test fuzz v1`, one value a line),
// the format of testdata/fuzz/<Target>/<name>.
func CorpusFile(values ...any) []byte {
	var b bytes.Buffer
	b.WriteString("go test fuzz v1\n")
	for _, v := range values {
		switch v := v.(type) {
		case []byte:
			fmt.Fprintf(&b, "[]byte(%s)\n", strconv.Quote(string(v)))
		case string:
			fmt.Fprintf(&b, "string(%s)\n", strconv.Quote(v))
		case byte:
			fmt.Fprintf(&b, "byte(%s)\n", strconv.QuoteRune(rune(v)))
		case bool, int, int8, int16, int32, int64, uint, uint16, uint32, uint64:
			fmt.Fprintf(&b, "%T(%v)\n", v, v)
		default:
			panic(fmt.Sprintf("no corpus encoding for %T", v))
		}
	}
	return b.Bytes()
}

// Corpus is a target's seed corpus by file name.
type Corpus map[string][]byte

// Check writes the seed corpus of target under testdata/fuzz/<target>/ when WriteSeedsEnv is set,
// and otherwise fails for every seed that is missing or differs from what the sources give now, so
// a new example or golden case cannot be left out of the corpus. Files beside the seeds (inputs the
// fuzzer found and were kept) are left alone.
func (c Corpus) Check(t *testing.T, target string) {
	t.Helper()
	c.CheckIn(t, ".", target)
}

// CheckIn is Check for the target of the package in dir, relative to the working directory.
func (c Corpus) CheckIn(t *testing.T, pkg, target string) {
	t.Helper()
	dir := filepath.Join(pkg, "testdata", "fuzz", target)
	write := os.Getenv(WriteSeedsEnv) != ""
	if write {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range c {
		path := filepath.Join(dir, name)
		if write {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("seed %s of %s is missing or stale; run `%s=1 go test -run TestSeedCorpus .` in %s", path, target, WriteSeedsEnv, mustWd())
		}
	}
}

func mustWd() string {
	wd, err := os.Getwd()
	if err != nil {
		return "the package directory"
	}
	return wd
}
