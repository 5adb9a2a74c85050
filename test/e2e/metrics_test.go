package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// vllmMetrics is a vLLM engine's /metrics after n requests: running and waiting gauges, a TTFT
// histogram of n observations of 0.5 s each, and the prefix cache counters.
func vllmMetrics(running, waiting, n int) string {
	return fmt.Sprintf(`# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="Qwen/Qwen3-8B"} %d
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="Qwen/Qwen3-8B"} %d
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="+Inf"} %d
vllm:time_to_first_token_seconds_sum %g
vllm:time_to_first_token_seconds_count %d
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total %d
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total %d
`, running, waiting, n, 0.5*float64(n), n, 100*n, 25*n)
}

// routerMetrics is a vllm-router's /metrics after n requests.
func routerMetrics(n int) string {
	return fmt.Sprintf(`vllm_router_running_requests 5
vllm_router_active_workers 2
# TYPE vllm_router_requests_total counter
vllm_router_requests_total %d
`, n)
}

// TestTheMetricsSnapshotOnTheStack: the snapshot is read through the kube-apiserver's aggregation
// layer from mdplane-controllers, which scrapes the deployment's KWOK Pods (their /metrics served by
// the stack's exporter): a user granted get modeldeployments/metrics reads the gauges summed over the
// engine Pods and the router's gauge, and windows on a second read; a user without the grant is refused by the kube-apiserver, one
// granted only the proxied group by mdplane's own SubjectAccessReview; a deployment with no metrics
// Pod is unavailable.
func TestTheMetricsSnapshotOnTheStack(t *testing.T) {
	parallel(t)
	needsOwnStack(t, "sets the bodies the metrics exporter serves for its Pods")
	ctx := context.Background()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	queue(t, ctx, "metrics-snapshot", a10gEntrance, ns, 8) // a ClusterQueue of its own
	var addresses []string
	t.Cleanup(func() {
		for _, a := range addresses {
			stack.MetricsExporter.Forget(a)
		}
		tearDown(t, ctx, ns)
		if err := stack.Client.Delete(ctx, &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "metrics-snapshot"}}); err != nil {
			t.Error(err)
		}
	})
	const a10g = "instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}"
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: snap, namespace: `+ns+`}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  router: {name: vllm-router}
  roles:
    - {name: server, replicas: 2, `+a10g+`}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: bespoke, namespace: `+ns+`}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, command: [python3, -m, my.server], `+a10g+`}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-reads-metrics, namespace: `+ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "mdplane:modeldeployment-metrics-reader"}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: proxied-group-only, namespace: `+ns+`}
rules: [{apiGroups: [metrics.worker.gpustack.ai], resources: [modeldeployments/metrics], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: carol-reaches-the-server, namespace: `+ns+`}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: proxied-group-only}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}]
`)
	engines := runningPods(t, ctx, ns, "snap", "server", 2)
	for i, p := range engines {
		a := net.JoinHostPort(p.Status.PodIP, p.Annotations[workerv1.AnnotationScrapePort])
		addresses = append(addresses, a)
		stack.MetricsExporter.Set(a, vllmMetrics(3+i, 1, 10))
	}
	routerSettles(t, ctx, ns, "snap", argvSelector)
	var router corev1.Pod
	eventually(t, 3*time.Minute, "the router Pod Ready", func() error {
		list := &corev1.PodList{}
		if err := stack.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelRouter: "vllm-router"}); err != nil {
			return err
		}
		for _, p := range list.Items {
			if ready(p) && p.DeletionTimestamp == nil {
				router = p
				return nil
			}
		}
		return fmt.Errorf("%d router Pods, none Ready", len(list.Items))
	})
	routerAddress := net.JoinHostPort(router.Status.PodIP, router.Annotations[workerv1.AnnotationScrapePort])
	addresses = append(addresses, routerAddress)
	stack.MetricsExporter.Set(routerAddress, routerMetrics(10))
	path := func(name string) string {
		return "/apis/metrics.worker.gpustack.ai/v1/namespaces/" + ns + "/modeldeployments/" + name + "/metrics"
	}
	read := func(user string) *metricsv1.ModelDeploymentMetrics {
		t.Helper()
		var m metricsv1.ModelDeploymentMetrics
		eventually(t, 2*time.Minute, "the snapshot served to "+user, func() error {
			out, err := stack.Kubectl("get", "--raw", path("snap"), "--as="+user)
			if err != nil {
				return err
			}
			return json.Unmarshal([]byte(out), &m)
		})
		return &m
	}
	first := read("alice")
	engineRunning := false
	for _, g := range first.Processing {
		engineRunning = engineRunning || g.Name == "running" && g.Scope == "engine/server" && g.Value == 7 && g.PodCount == 2
	}
	if !engineRunning {
		t.Errorf("the running gauge is not summed over both engine Pods: %+v", first.Processing)
	}
	if len(first.Queueing) != 1 || first.Queueing[0].Value != 2 {
		t.Errorf("waiting: %+v", first.Queueing)
	}
	routerRunning := false
	for _, g := range first.Processing {
		routerRunning = routerRunning || g.Name == "router-running" && g.Scope == "router" && g.Value == 5 && g.PodCount == 1
	}
	if !routerRunning {
		t.Errorf("the router Pod, owned through its ReplicaSet and Deployment, is not read: %+v, missing %+v", first.Processing, first.Missing)
	}
	if first.Kind != "ModelDeploymentMetrics" || first.Name != "snap" || first.Namespace != ns {
		t.Errorf("object: %+v %+v", first.TypeMeta, first.ObjectMeta)
	}

	time.Sleep(1100 * time.Millisecond)
	for _, a := range addresses[:2] {
		stack.MetricsExporter.Set(a, vllmMetrics(2, 0, 30))
	}
	stack.MetricsExporter.Set(routerAddress, routerMetrics(30))
	second := read("alice")
	ttft := 0
	for _, w := range second.Latency {
		if w.Name == "ttft" && w.Value == 0.5 && w.Samples == 20 && w.WindowSeconds > 0 {
			ttft++
		}
	}
	hits := 0
	for _, h := range second.CacheHits {
		if h.Scope == "local-prefix" && h.Rate == 0.25 {
			hits++
		}
	}
	successful := false
	for _, w := range second.Traffic {
		successful = successful || w.Name == "successful-requests" && w.Pod == router.Name && w.Samples == 20 && w.Unit == "requests/second"
	}
	if ttft != 2 || hits != 2 || !successful {
		t.Errorf("the second read's windows: latency %+v, cache hits %+v, missing %+v", second.Latency, second.CacheHits, second.Missing)
	}

	// The group's discovery, as the aggregator and every kubectl read it: no warning about it.
	out, err := stack.Kubectl("get", "--raw", "/apis/metrics.worker.gpustack.ai/v1")
	if err != nil || !strings.Contains(out, `"name":"modeldeployments/metrics"`) {
		t.Errorf("the group-version's discovery: %v\n%s", err, out)
	}
	out, err = stack.Kubectl("api-resources")
	if err != nil || strings.Contains(out, "metrics.worker.gpustack.ai") {
		t.Errorf("discovery through the aggregator complains about the snapshot's group: %v\n%s", err, out)
	}
	out, err = stack.Kubectl("get", "--raw", path("snap"), "--as=bob")
	if err == nil || !strings.Contains(out, "Forbidden") && !strings.Contains(out, "forbidden") {
		t.Errorf("a user without the grant read the snapshot: %v\n%s", err, out)
	}
	out, err = stack.Kubectl("get", "--raw", path("snap"), "--as=carol")
	if err == nil || !strings.Contains(out, `cannot get resource "modeldeployments/metrics" in API group "worker.gpustack.ai"`) {
		t.Errorf("a user granted only the proxied group was not refused by the SubjectAccessReview: %v\n%s", err, out)
	}
	out, err = stack.Kubectl("get", "--raw", path("bespoke"), "--as=alice")
	if err == nil || !strings.Contains(out, "ModelDeployment has no owned metrics Pods") || !strings.Contains(out, "ServiceUnavailable") {
		t.Errorf("a deployment with no metrics Pod: %v\n%s", err, out)
	}
}
