package renderroles

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The preStop drain hook: before the kubelet sends SIGTERM, the engine
// container waits until the engine has nothing running or queued, or until the grace period is
// nearly spent, so a replica leaving takes no request down with it.
const (
	// DefaultTerminationGracePeriodSeconds is the grace of a managed role that names none.
	DefaultTerminationGracePeriodSeconds = 30
	// DrainSettleSeconds is how long the hook waits before its first read, so the endpoints and the
	// router stop sending new requests before "idle" is believed.
	DrainSettleSeconds = 5
)

// terminationGrace is the grace period a role's Pods are rendered with: the role's own, else the
// default on a managed role, whose drain hook budgets within it. A take-over role gets no hook, so
// it keeps the API server's default when it names none.
func terminationGrace(role workerv1.ModelDeploymentRole) *int64 {
	if role.TerminationGracePeriodSeconds != nil || role.TakesOver() {
		return role.TerminationGracePeriodSeconds
	}
	return ptr.To[int64](DefaultTerminationGracePeriodSeconds)
}

// configuredGrace is the grace as the configuration digest records it: on a managed role the default
// written out is the default left unwritten, so both render one Pod and one pod-spec-hash, and a
// deployment naming none keeps its hash across the release that began rendering the default.
func configuredGrace(role workerv1.ModelDeploymentRole) *int64 {
	if !role.TakesOver() && ptr.Deref(role.TerminationGracePeriodSeconds, 0) == DefaultTerminationGracePeriodSeconds {
		return nil
	}
	return role.TerminationGracePeriodSeconds
}

// DrainHook is the preStop hook of a managed role's engine container: the engine image's own python3
// reads the engine's gauges at scheme://127.0.0.1:port/metrics (the scrape annotations' scheme and
// port) and returns once the engine is idle, or at the deadline of grace minus the settle, so the
// engine still has its last seconds of grace after SIGTERM.
func DrainHook(e workerv1.Engine, scheme string, port int32, graceSeconds int64) *corev1.Lifecycle {
	return &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{
		Command: []string{"python3", "-c", drainScript(engine.DrainGauges(e), fmt.Sprintf("%s://127.0.0.1:%d/metrics", scheme, port), graceSeconds-DrainSettleSeconds)},
	}}}
}

// drainScript is the hook's program with its values inlined. Its reads are counted from a monotonic
// start, with one second of timeout each and one second between them:
//   - a timeout is a busy engine (still there, too loaded to answer);
//   - any other failure (refused, an HTTP error status, TLS) means no engine to wait for: return;
//   - a read sums the first number of the sample of every line whose exact metric name is a gauge
//     (text before "{" or the first space; the sample follows the last "}" when labels are present,
//     else the name); a sample that is no number counts 1;
//   - the second idle read in a row returns.
//
// TLS verifies neither hostname nor certificate (the engine's own certificate names no loopback
// address), and no proxy is used: a proxy the engine's environment names must not carry a loopback
// read. The script exits 0 in every case, the deadline included.
func drainScript(gauges []string, url string, deadlineSeconds int64) string {
	quoted := make([]string, len(gauges))
	for i, g := range gauges {
		quoted[i] = strconv.Quote(g)
	}
	return fmt.Sprintf(`import socket, ssl, sys, time, urllib.request
start = time.monotonic()
time.sleep(%d)
gauges = (%s)
tls = ssl.create_default_context()
tls.check_hostname = False
tls.verify_mode = ssl.CERT_NONE
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), urllib.request.HTTPSHandler(context=tls))

def load():
    try:
        text = opener.open(%s, timeout=1).read().decode(errors="replace")
    except Exception as e:
        if isinstance(getattr(e, "reason", e), socket.timeout):
            return 1
        sys.exit(0)
    total = 0
    for line in text.splitlines():
        name = line.split(" ")[0].split("{")[0]
        if name in gauges:
            try:
                sample = line.rsplit("}", 1)[1] if line[len(name):].startswith("{") else line[len(name):]
                total += float(sample.split()[0])
            except (IndexError, ValueError):
                total += 1
    return total

idle = 0
while time.monotonic() - start < %d:
    idle = idle + 1 if load() == 0 else 0
    if idle == 2:
        break
    time.sleep(1)
`, DrainSettleSeconds, strings.Join(quoted, ", "), strconv.Quote(url), deadlineSeconds)
}
