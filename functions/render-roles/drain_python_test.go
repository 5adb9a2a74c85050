package renderroles_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// Engine metrics pages, with the lines exact-name matching must skip: comments and a longer name.
const (
	vllmBusy = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 1.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 0.0 1712345678000
vllm:num_requests_waiting_by_reason{reason="capacity"} 0.0
`
	vllmIdle = `# HELP vllm:num_requests_running Number of requests in model execution batches.
vllm:num_requests_running{engine="0",model_name="qwen"} 0.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 0.0
vllm:num_requests_waiting_by_reason{reason="capacity"} 7.0
vllm:kv_cache_usage_perc{engine="0"} 0.5
`
	vllmUnparsable = `vllm:num_requests_running{engine="0",model_name="qwen"} busy
vllm:num_requests_waiting 0
`
	sglangTransferring = `sglang:num_running_reqs{tp_rank="0"} 0
sglang:num_queue_reqs{tp_rank="0"} 0
sglang:num_decode_transfer_queue_reqs{tp_rank="0"} 2
`
	sglangIdle = `sglang:num_running_reqs{tp_rank="0"} 0
sglang:num_queue_reqs{tp_rank="0"} 0
sglang:num_decode_transfer_queue_reqs{tp_rank="0"} 0
sglang:token_usage{tp_rank="0"} 0.4
`
)

// pages answers /metrics with each page in turn, the last one from then on, and counts the reads.
func pages(reads *atomic.Int32, bodies ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := int(reads.Add(1))
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(bodies[min(n, len(bodies))-1]))
	}
}

// hookRun is one run of a rendered hook: the time on the hook's own clock when it returned, its exit
// and its output.
type hookRun struct {
	took time.Duration
	err  error
	out  []byte
}

// hookClock runs the rendered hook (its program in argv[1]) under a clock whose sleeps pass at once:
// the hook reads time.monotonic() as the real time plus every second it has slept, so its settle,
// its pauses and its deadline keep their meaning while the run takes only as long as its reads. At
// exit it prints its own clock, counted from the start of the hook's program; the interpreter's start
// and imports, which a loaded machine stretches, are not part of it.
const hookClock = `import atexit, socket, ssl, sys, time, urllib.request
slept = 0.0
real = time.monotonic
def sleep(seconds):
    global slept
    slept += seconds
time.sleep = sleep
time.monotonic = lambda: real() + slept
program = sys.argv.pop(1)
begin = time.monotonic()
atexit.register(lambda: print("hook-clock", time.monotonic() - begin))
exec(compile(program, "<preStop>", "exec"), {"__name__": "__main__"})
`

// runHook runs a rendered hook with the real python3, at grace 15 (deadline 10).
// It is called from many goroutines at once, so it reports rather than fails.
func runHook(e workerv1.Engine, target string) hookRun {
	u, err := url.Parse(target)
	if err != nil {
		return hookRun{err: err}
	}
	port, err := strconv.ParseInt(u.Port(), 10, 32)
	if err != nil {
		return hookRun{err: err}
	}
	command := renderroles.DrainHook(e, u.Scheme, int32(port), 15).PreStop.Exec.Command
	if len(command) != 3 || command[0] != "python3" || command[1] != "-c" {
		return hookRun{err: fmt.Errorf("the hook is no longer python3 -c PROGRAM: %q", command)}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "-c", hookClock, command[2])
	// A proxy the engine's environment names must not carry the loopback read: were it used, every
	// read would be refused and each row would return right after the settle.
	cmd.Env = append(os.Environ(), "HTTP_PROXY=http://127.0.0.1:9", "http_proxy=http://127.0.0.1:9",
		"HTTPS_PROXY=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9", "NO_PROXY=", "no_proxy=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return hookRun{err: err, out: out}
	}
	m := regexp.MustCompile(`(?m)^hook-clock ([0-9.]+)$`).FindSubmatch(out)
	if m == nil {
		return hookRun{err: errors.New("the hook printed no clock"), out: out}
	}
	seconds, err := strconv.ParseFloat(string(m[1]), 64)
	return hookRun{took: time.Duration(seconds * float64(time.Second)), err: err, out: out}
}

// TestDrainHookRuns runs the rendered script against local engines and reads the hook's own clock
// when it returns (settle 5 s, 1 s per read and between reads, deadline: the grace period less 5 s).
// The clock counts every sleep in full and the work between them as it really took, so a row returns
// no earlier than its sleeps add up to, and a row that is not held to the deadline returns before it.
func TestDrainHookRuns(t *testing.T) {
	second := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	cases := []struct {
		rule     string
		engine   workerv1.Engine
		serve    func(reads *atomic.Int32) *httptest.Server // nil: nothing listens
		reads    int32                                      // -1: not counted
		from, to time.Duration                              // on the hook's clock
	}{
		{
			rule: "busy, then idle: returns on the second consecutive idle read (settle + 3 reads)", engine: workerv1.EngineVLLM,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewServer(pages(reads, vllmBusy, vllmIdle))
			},
			reads: 3, from: second(7), to: second(10),
		},
		{
			rule: "a sample that is no number counts as busy", engine: workerv1.EngineVLLM,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewServer(pages(reads, vllmUnparsable, vllmIdle))
			},
			reads: 3, from: second(7), to: second(10),
		},
		{
			rule: "SGLang: a request in a P/D transfer queue is busy", engine: workerv1.EngineSGLang,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewServer(pages(reads, sglangTransferring, sglangIdle))
			},
			reads: 3, from: second(7), to: second(10),
		},
		{
			rule: "refused: returns right after the settle", engine: workerv1.EngineVLLM,
			reads: -1, from: second(5), to: second(10),
		},
		{
			rule: "HTTP 500: returns right after the settle", engine: workerv1.EngineVLLM,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					reads.Add(1)
					http.Error(w, "engine failed", http.StatusInternalServerError)
				}))
			},
			reads: 1, from: second(5), to: second(10),
		},
		{
			rule: "TLS with a self-signed certificate is read, not refused", engine: workerv1.EngineVLLM,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewTLSServer(pages(reads, vllmIdle))
			},
			reads: 2, from: second(6), to: second(10),
		},
		{
			rule: "a busy engine holds the hook until the deadline (G − 5 = 10)", engine: workerv1.EngineVLLM,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewServer(pages(reads, vllmBusy))
			},
			reads: -1, from: second(10), to: second(13),
		},
		{
			rule: "no answer within 1 s is busy: returns at the deadline", engine: workerv1.EngineVLLM,
			serve: func(reads *atomic.Int32) *httptest.Server {
				return httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
					reads.Add(1)
					<-r.Context().Done() // held until the hook gives up on the read
				}))
			},
			reads: -1, from: second(10), to: second(14),
		},
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("the drain hook runs on the engine image's python3, and this test runs it the same way: install python3 (%v)", err)
	}
	// Every row's hook runs at once, whatever -parallel allows: they wait on reads, so the test takes
	// as long as its slowest row.
	reads := make([]atomic.Int32, len(cases))
	runs := make([]hookRun, len(cases))
	var wg sync.WaitGroup
	for i, tc := range cases {
		var target string
		if tc.serve == nil {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			target = "http://" + l.Addr().String()
			require.NoError(t, l.Close()) // the port is now refused
		} else {
			srv := tc.serve(&reads[i])
			t.Cleanup(srv.Close)
			target = srv.URL
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			runs[i] = runHook(tc.engine, target)
		}()
	}
	wg.Wait()

	for i, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			run := runs[i]
			t.Logf("the hook returned at %v on its own clock", run.took)
			require.NoError(t, run.err, "the hook always exits 0; output:\n%s", run.out)
			assert.GreaterOrEqual(t, run.took, tc.from)
			assert.Less(t, run.took, tc.to)
			if tc.reads >= 0 {
				assert.Equal(t, tc.reads, reads[i].Load(), "reads")
			}
		})
	}
}

// resolverStandIn replaces python's name resolution for the wait-for-worker script: the names in
// RESOLVABLE (comma-separated, from the environment) resolve to loopback, any other fails as an
// unknown name. The test thus never asks the machine's resolver, and a lookup costs no network wait.
const resolverStandIn = `import os, socket
_resolvable = set(filter(None, os.environ.get("RESOLVABLE", "").split(",")))
def _getaddrinfo(host, *args, **kwargs):
    if host in _resolvable:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
socket.getaddrinfo = _getaddrinfo
`

// runWaitForWorker runs the wait-for-worker program with python3 behind resolverStandIn, until it
// exits (its error, nil for 0) or prints a line containing until (errStillWaiting; it is then
// stopped). The minute's bound only stops a hang; no row comes near it.
func runWaitForWorker(t *testing.T, until string, env ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	program := resolverStandIn + "exec(compile(" + strconv.Quote(renderroles.WaitForWorkerScript()) + `, "wait-for-worker", "exec"))` + "\n"
	cmd := exec.CommandContext(ctx, "python3", "-c", program)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout // a traceback is part of what the row prints
	require.NoError(t, cmd.Start())
	var out strings.Builder
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		out.WriteString(lines.Text() + "\n")
		if until != "" && strings.Contains(lines.Text(), until) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return out.String(), errStillWaiting
		}
	}
	return out.String(), cmd.Wait()
}

var errStillWaiting = errors.New("still waiting")

// TestWaitForWorkerScript runs the wait-for-worker container's program with python3, as the engine
// image would: a worker returns at once; a leader waits, naming them, until every worker's name
// resolves.
func TestWaitForWorkerScript(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed")
	}
	const leader, m1, m2 = "md-s-r0-m0.md-s-r0.invalid", "md-s-r0-m1.md-s-r0.invalid", "md-s-r0-m2.md-s-r0.invalid"
	t.Run("a worker returns at once", func(t *testing.T) {
		_, err := runWaitForWorker(t, "", engine.EnvMemberIndex+"=1", engine.EnvReplicaSize+"=2", engine.EnvLeaderAddress+"="+leader)
		assert.NoError(t, err)
	})
	t.Run("a leader of one member has nobody to wait for", func(t *testing.T) {
		_, err := runWaitForWorker(t, "", engine.EnvMemberIndex+"=0", engine.EnvReplicaSize+"=1", engine.EnvLeaderAddress+"="+leader)
		assert.NoError(t, err)
	})
	t.Run("a leader waits for its workers by name", func(t *testing.T) {
		out, err := runWaitForWorker(t, "waiting for workers", engine.EnvMemberIndex+"=0", engine.EnvReplicaSize+"=3", engine.EnvLeaderAddress+"="+leader, "RESOLVABLE="+m1)
		assert.ErrorIs(t, err, errStillWaiting, "output:\n%s", out)
		assert.Contains(t, out, "waiting for workers: "+m2+"\n", "only the worker whose name does not resolve")
	})
	t.Run("a leader whose workers all resolve returns", func(t *testing.T) {
		out, err := runWaitForWorker(t, "waiting for workers", engine.EnvMemberIndex+"=0", engine.EnvReplicaSize+"=3", engine.EnvLeaderAddress+"="+leader, "RESOLVABLE="+m1+","+m2)
		assert.NoError(t, err, "output:\n%s", out)
	})
}
