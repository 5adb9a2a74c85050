package renderroles_test

import (
	"encoding/json"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

const (
	vllmGauges   = `gauges = ("vllm:num_requests_running", "vllm:num_requests_waiting")`
	sglangGauges = `gauges = ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs", "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs")`
)

// script is the program a preStop hook runs, after checking it is run by the image's python3.
func script(t *testing.T, hook *corev1.Lifecycle) string {
	t.Helper()
	require.NotNil(t, hook, "a preStop hook")
	require.NotNil(t, hook.PreStop, "a preStop hook")
	require.NotNil(t, hook.PreStop.Exec, "an exec hook: no binary, no httpGet")
	command := hook.PreStop.Exec.Command
	require.Len(t, command, 3)
	assert.Equal(t, []string{"python3", "-c"}, command[:2], "the engine image's own Python")
	return command[2]
}

// deadlineOf reads the deadline D inlined in a hook's loop, `start < D:`.
func deadlineOf(t *testing.T, s string) int64 {
	t.Helper()
	m := regexp.MustCompile(`start < (\d+):`).FindStringSubmatch(s)
	require.NotNil(t, m, "the loop runs while the elapsed time is below the deadline: `start < D:`")
	d, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return d
}

// TestDrainHookScript: the generator's values, inlined.
func TestDrainHookScript(t *testing.T) {
	cases := []struct {
		rule   string
		engine workerv1.Engine
		scheme string
		port   int32
		grace  int64
		gauges string
		url    string
	}{
		{"vLLM reads its running and waiting gauges", workerv1.EngineVLLM, "http", 8000, 30, vllmGauges, `"http://127.0.0.1:8000/metrics"`},
		{"SGLang reads its running and waiting gauges and its four P/D queues", workerv1.EngineSGLang, "http", 8000, 30, sglangGauges, `"http://127.0.0.1:8000/metrics"`},
		{"the URL is the scrape scheme and port on the loopback address", workerv1.EngineVLLM, "https", 9000, 30, vllmGauges, `"https://127.0.0.1:9000/metrics"`},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			s := script(t, renderroles.DrainHook(tc.engine, tc.scheme, tc.port, tc.grace))
			assert.Contains(t, s, tc.gauges)
			assert.Contains(t, s, "opener.open("+tc.url+", timeout=1)")
			assert.Contains(t, s, "time.sleep(5)", "the settle")
			assert.Contains(t, s, "start < 25:", "the deadline is the grace minus the settle")
			assert.Contains(t, s, "start = time.monotonic()", "the deadline counts on a monotonic clock")
			assert.Contains(t, s, "tls.check_hostname = False\ntls.verify_mode = ssl.CERT_NONE", "TLS verifies neither hostname nor certificate")
		})
	}

	t.Run("the hook is deterministic: its bytes are part of the Pod", func(t *testing.T) {
		assert.Equal(t, renderroles.DrainHook(workerv1.EngineSGLang, "http", 8000, 45), renderroles.DrainHook(workerv1.EngineSGLang, "http", 8000, 45))
	})

	// The settle and at least two reads fit before the deadline, and the last read's overrun of at
	// most 2 s still leaves the engine time between SIGTERM and the kubelet's kill.
	for _, grace := range []int64{15, renderroles.DefaultTerminationGracePeriodSeconds, 3600} {
		t.Run("at grace "+strconv.FormatInt(grace, 10)+": 5 + 2 <= D and D + 2 < G", func(t *testing.T) {
			d := deadlineOf(t, script(t, renderroles.DrainHook(workerv1.EngineVLLM, "http", 8000, grace)))
			assert.Equal(t, grace-renderroles.DrainSettleSeconds, d)
			assert.LessOrEqual(t, int64(renderroles.DrainSettleSeconds+2), d)
			assert.Less(t, d+2, grace)
		})
	}
}

// TestDrainHookWiring: which containers get the hook, where it reads, and the grace it budgets in.
func TestDrainHookWiring(t *testing.T) {
	vllm, sglang := workerv1.EngineVLLM, workerv1.EngineSGLang
	llmd := &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	server, decode := serverRole, decodeRole
	withGrace := func(r workerv1.ModelDeploymentRole, seconds int64) workerv1.ModelDeploymentRole {
		r.TerminationGracePeriodSeconds = ptr.To(seconds)
		return r
	}

	where := []struct {
		rule   string
		engine workerv1.Engine
		router *workerv1.ModelDeploymentRouter
		role   workerv1.ModelDeploymentRole
		url    string
		gauges string
	}{
		{"a vLLM role reads vLLM's gauges on its serving port", vllm, nil, server(), "http://127.0.0.1:8000/metrics", vllmGauges},
		{"an SGLang role reads SGLang's gauges", sglang, nil, server(), "http://127.0.0.1:8000/metrics", sglangGauges},
		{"a TLS role reads https on its own port", vllm, nil, server("--ssl-certfile", "/tls/tls.crt", "--port", "9000"), "https://127.0.0.1:9000/metrics", vllmGauges},
		{"a direct decoder reads its engine behind the routing proxy", vllm, llmd, decode(), "http://127.0.0.1:8200/metrics", vllmGauges},
		{"a direct decoder's own --port is where its engine listens", vllm, llmd, decode("--port", "9200"), "http://127.0.0.1:9200/metrics", vllmGauges},
		{"a decoder no routing proxy fronts reads its serving port", sglang, nil, decode(), "http://127.0.0.1:8000/metrics", sglangGauges},
	}
	for _, tc := range where {
		t.Run(tc.rule, func(t *testing.T) {
			main, rendered := renderOn(t, tc.engine, tc.router, tc.role)
			s := script(t, main.Lifecycle)
			assert.Contains(t, s, `opener.open("`+tc.url+`", timeout=1)`)
			assert.Contains(t, s, tc.gauges)
			a := rendered.Template.Annotations
			assert.Equal(t, tc.url, a["prometheus.io/scheme"]+"://127.0.0.1:"+a["prometheus.io/port"]+"/metrics",
				"the hook reads where the Pod is scraped")
		})
	}

	grace := []struct {
		rule     string
		role     workerv1.ModelDeploymentRole
		grace    *int64
		deadline int64 // 0: no hook
	}{
		{"a managed role naming no grace gets 30 and drains until 25", server(), ptr.To[int64](30), 25},
		{"a managed role's own grace is kept and moves the deadline", withGrace(server(), 120), ptr.To[int64](120), 115},
		{"a take-over role gets no hook and no default grace", workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Command: []string{"my-engine"}}, nil, 0},
		{"a take-over role keeps its own grace, without a hook", withGrace(workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Command: []string{"my-engine"}}, 60), ptr.To[int64](60), 0},
	}
	for _, tc := range grace {
		t.Run(tc.rule, func(t *testing.T) {
			main, rendered := renderOn(t, vllm, nil, tc.role)
			assert.Equal(t, tc.grace, rendered.Template.Spec.TerminationGracePeriodSeconds)
			if tc.deadline == 0 {
				assert.Nil(t, main.Lifecycle)
				return
			}
			assert.Equal(t, tc.deadline, deadlineOf(t, script(t, main.Lifecycle)))
		})
	}

	t.Run("writing the default grace renders the identical Pod and hash", func(t *testing.T) {
		_, unwritten := renderOn(t, vllm, nil, server())
		_, written := renderOn(t, vllm, nil, withGrace(server(), renderroles.DefaultTerminationGracePeriodSeconds))
		assert.Equal(t, unwritten.Template, written.Template)
		assert.Equal(t, unwritten.ConfigDigest, written.ConfigDigest)
		assert.Equal(t, unwritten.Revision, written.Revision)
	})

	t.Run("an amount spelled another way renders the identical Pod and hash", func(t *testing.T) {
		two, spelled := server(), server()
		two.Resources = &workerv1.ModelDeploymentRoleResources{Accelerator: ptr.To(resource.MustParse("2"))}
		var q resource.Quantity
		require.NoError(t, json.Unmarshal([]byte(`"02"`), &q), "apimachinery keeps this spelling as written")
		spelled.Resources = &workerv1.ModelDeploymentRoleResources{Accelerator: &q}
		_, canonical := renderOn(t, vllm, nil, two)
		_, other := renderOn(t, vllm, nil, spelled)
		assert.Equal(t, canonical.Template, other.Template)
		assert.Equal(t, canonical.ConfigDigest, other.ConfigDigest)
	})

	t.Run("near miss: another grace is another configuration", func(t *testing.T) {
		_, unwritten := renderOn(t, vllm, nil, server())
		_, other := renderOn(t, vllm, nil, withGrace(server(), 31))
		assert.NotEqual(t, unwritten.ConfigDigest, other.ConfigDigest)
	})

	t.Run("every member of a multi-Pod replica gets the hook", func(t *testing.T) {
		role := server()
		role.Size = 3
		pods := members(t, role, 0)
		require.Len(t, pods, 3)
		for _, pod := range pods {
			require.Len(t, pod.Spec.Containers, 1)
			assert.Equal(t, pods[0].Spec.Containers[0].Lifecycle, pod.Spec.Containers[0].Lifecycle)
			assert.NotNil(t, pod.Spec.Containers[0].Lifecycle)
			assert.Equal(t, ptr.To[int64](30), pod.Spec.TerminationGracePeriodSeconds)
		}
	})
}
