package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A goroutine dump (debug=1) prints as its total and its commonest stacks, innermost function
// first, as many as asked for.
func TestPrintGoroutinesListsTheCommonestStacks(t *testing.T) {
	dump := "goroutine profile: total 12\n" +
		"9 @ 0x1 0x2\n" +
		"#\t0x1\tinternal/poll.runtime_pollWait+0x84\t/go/src/runtime/netpoll.go:351\n" +
		"#\t0x2\tnet/http.(*conn).serve+0x5d0\t/go/src/net/http/server.go:2100\n" +
		"\n" +
		"2 @ 0x3\n" +
		"#\t0x3\tsync.(*Mutex).Lock+0x10\t/go/src/sync/mutex.go:90\n" +
		"\n" +
		"1 @ 0x4\n" +
		"#\t0x4\truntime.gopark+0x1\t/go/src/runtime/proc.go:1\n\n"
	file := filepath.Join(t.TempDir(), "goroutine.txt")
	if err := os.WriteFile(file, []byte(dump), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	printGoroutines(&out, "webhooks goroutine", file, 2)
	for _, want := range []string{
		"goroutine profile: total 12",
		"    9  internal/poll.runtime_pollWait < net/http.(*conn).serve\n",
		"    2  sync.(*Mutex).Lock\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "runtime.gopark") {
		t.Errorf("printed a third stack of two asked for:\n%s", out.String())
	}
}

// A histogram's sum and count add up over the series holding every label pair asked for, by the
// value of one label; a series without one of the pairs is left out.
func TestSumsOfAddsTheSeriesThatHoldEveryPair(t *testing.T) {
	raw := []byte(`x_bucket{level="a",execute="true",le="1"} 3
x_sum{level="a",execute="true"} 1.5
x_count{level="a",execute="true"} 3
x_sum{level="a",execute="false"} 9
x_count{level="a",execute="false"} 9
x_sum{level="b",execute="true"} 0.25
x_count{level="b",execute="true"} 1
`)
	got, err := sumsOf(raw, "x", "level", `execute="true"`)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := got["a"], got["b"]; a.Sum != 1.5 || a.Count != 3 || a.Buckets["1"] != 3 || b.Sum != 0.25 || b.Count != 1 || len(got) != 2 {
		t.Errorf("sums = %+v", got)
	}
}

// A quantile of the calls between two readings is read from the buckets' growth, linear within the
// bucket the rank falls in; a rank above every finite bound is the highest bound; no calls, none.
func TestQuantileSinceReadsTheBucketsGrowth(t *testing.T) {
	before := WebhookTime{Buckets: map[string]float64{"0.1": 10, "0.5": 10, "1": 10, "+Inf": 10}}
	after := WebhookTime{Buckets: map[string]float64{"0.1": 60, "0.5": 90, "1": 109, "+Inf": 110}}
	for _, c := range []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"the median falls in the first bucket", 0.5, 100 * time.Millisecond},
		{"p80 falls in the second, linear within it", 0.8, 500 * time.Millisecond},
		{"p99 falls in the third", 0.99, 1 * time.Second},
		{"the maximum falls above every finite bound", 1, 1 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := after.QuantileSince(before, c.q); got != c.want {
				t.Errorf("q%.2f = %s, want %s", c.q, got, c.want)
			}
		})
	}
	if got := before.QuantileSince(before, 0.99); got != 0 {
		t.Errorf("no calls between the readings: %s, want 0", got)
	}
}
