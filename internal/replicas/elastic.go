package replicas

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// elasticServe is the master's $0 in its shell wrapper.
const elasticServe = "elastic-serve"

// rayJoin is the Ray join fragment a member runs: Ray finds the Pod's GPUs itself (no --num-gpus).
func rayJoin(headAddress string) string {
	return fmt.Sprintf(`ray start --node-ip-address="$%s" --address=%s --labels=gpustack-pod-uid="$%s"`, engine.EnvElasticPodIP, headAddress, engine.EnvElasticPodUID)
}

// elasticMember applies what a member's ordinal makes of it: the master (ordinal 0) wraps the
// rendered argv in the Ray join and the data-parallel flags of its boot width and gets the liveness
// probe that accepts a resize in flight; a worker only joins Ray and serves nothing (no probes, no
// preStop hook, no scrape annotations). false holds the
// member: a master without a boot width is not rendered.
func elasticMember(pod *corev1.Pod, e *v1alpha1.ElasticRole, ordinal, bootWidth int32) bool {
	c := MainContainer(&pod.Spec)
	if c == nil {
		return true
	}
	join := rayJoin(e.HeadAddress)
	hash := pod.Annotations[workerv1.AnnotationPodSpecHash]
	if ordinal > 0 {
		c.Command, c.Args = []string{"/bin/sh", "-ec", join + " --block"}, nil
		c.StartupProbe, c.ReadinessProbe, c.LivenessProbe, c.Lifecycle = nil, nil, nil, nil
		// A worker serves no HTTP: nothing to scrape.
		for _, k := range []string{workerv1.AnnotationScrape, workerv1.AnnotationScrapePath, workerv1.AnnotationScrapePort, workerv1.AnnotationScrapeScheme} {
			delete(pod.Annotations, k)
		}
		pod.Annotations[workerv1.AnnotationPodSpecHash] = sha256Hex([]byte(hash + "/elastic-worker"))
		return true
	}
	if bootWidth < 1 {
		return false
	}
	boot := strconv.Itoa(int(bootWidth))
	argv := append(append([]string(nil), c.Command...), c.Args...)
	argv = append(argv, "--data-parallel-backend", "ray", "--data-parallel-size", boot, "--data-parallel-size-local", "1",
		"--enable-expert-parallel", "--enable-eplb", "--enable-elastic-ep")
	script := fmt.Sprintf(`set -e; %s; exec "$@" --data-parallel-address "$%s"`, join, engine.EnvElasticPodIP)
	c.Command, c.Args = append([]string{"/bin/sh", "-c", script, elasticServe}, argv...), nil
	if c.LivenessProbe != nil {
		c.LivenessProbe = masterLiveness(pod.Annotations[workerv1.AnnotationScrapeScheme], pod.Annotations[workerv1.AnnotationScrapePort])
	}
	pod.Annotations[workerv1.AnnotationElasticBootWidth] = boot
	pod.Annotations[workerv1.AnnotationPodSpecHash] = sha256Hex([]byte(hash + "/elastic-boot-width=" + boot))
	return true
}

// masterLiveness is the master's liveness probe: the health route answering 200, or 503 while
// a native resize is in flight, within one second. Readiness is unchanged, so a resizing master
// leaves the Services without being restarted.
func masterLiveness(scheme, port string) *corev1.Probe {
	if scheme == "" {
		scheme = "http"
	}
	if port == "" {
		port = strconv.Itoa(engine.DefaultPort)
	}
	script := strings.Join([]string{
		"import ssl, sys, urllib.error, urllib.request",
		"try:",
		fmt.Sprintf("    code = urllib.request.urlopen(%q, timeout=1, context=ssl._create_unverified_context()).status", scheme+"://127.0.0.1:"+port+HealthPath),
		"except urllib.error.HTTPError as e:",
		"    code = e.code",
		"except Exception:",
		"    sys.exit(1)",
		"sys.exit(0 if code in (200, 503) else 1)",
	}, "\n")
	return &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"python3", "-c", script}}},
		PeriodSeconds:    ProbePeriodSeconds,
		TimeoutSeconds:   ProbeTimeoutSeconds,
		FailureThreshold: LivenessFailures,
	}
}

// MainContainer is the engine container of a Pod spec, nil when it has none.
func MainContainer(spec *corev1.PodSpec) *corev1.Container {
	for i := range spec.Containers {
		if spec.Containers[i].Name == naming.MainContainer {
			return &spec.Containers[i]
		}
	}
	return nil
}
