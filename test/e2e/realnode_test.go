package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
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

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/schemacheck"
	"github.com/mdplane/mdplane/test/cluster"
)

// The real node: what mdplane renders, run by a kubelet with containerd and runc on this machine,
// on the engine stand-in (llm-d-inference-sim behind vLLM's command line, with the python3 the
// rendered hooks run on).

// realModel is the model examples/on-the-stack.yaml serves.
const realModel = "Qwen/Qwen2.5-0.5B-Instruct"

// standInFlags make each answer of the stand-in take half a second and its engine run one request
// at a time, so that requests are in flight when a replica is retired and queue when several come.
const standInFlags = `[{name: ENGINE_STAND_IN_FLAGS, value: "--max-num-seqs 1 --time-to-first-token 500ms"}]`

// onTheStack is examples/on-the-stack.yaml in namespace ns, its role given extra (flow-style fields).
func onTheStack(t *testing.T, ns, extra string) string {
	t.Helper()
	manifest := readExample(t, "on-the-stack.yaml", "name: on-the-stack\n", "name: "+ns+"\n", "namespace: on-the-stack", "namespace: "+ns)
	if extra != "" {
		manifest = strings.Replace(manifest, "      resources:\n        accelerator: 1\n", "      resources:\n        accelerator: 1\n"+extra, 1)
	}
	return manifest
}

// TestTheRealNodeRunsWhatMdplaneRenders: examples/on-the-stack.yaml's deployment (one role, two
// replicas of two Pods) turns Ready with every Pod Running on the real node's containerd, its
// probes passing against the engine; each member reaches its peer by the replica's headless
// Service; inside the containers the environment, downward-API values and mounts are what `mdplane
// render` printed; a chat completion through the deployment's Service names the model; the metrics
// snapshot reads the engine's own queue depth from the running Pods; a container killed on the node
// comes back and serves, reported as a restart; and a rolling edit under a steady request loop
// through the Service loses no request and ends at the new revision.
func TestTheRealNodeRunsWhatMdplaneRenders(t *testing.T) {
	parallelWaiting(t, "waits about three minutes on the real node's containers: starts, probes, a kill and a rolling edit")
	needsOwnStack(t, "kills a container on the real node's containerd")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "chat"
	manifest := onTheStack(t, ns, "      env: "+standInFlags+"\n")
	kubectlApply(t, manifest)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	members := realPodsReady(t, ctx, ns, name, 4, "")

	t.Run("every Pod runs on the real node's containerd, its probes passing", func(t *testing.T) {
		for _, p := range members {
			if p.Spec.NodeName != cluster.RealNodeName {
				t.Errorf("%s runs on %s", p.Name, p.Spec.NodeName)
			}
			engine := p.Status.ContainerStatuses[0]
			if !strings.HasPrefix(engine.ContainerID, "containerd://") || engine.State.Running == nil {
				t.Errorf("%s: container %s, state %+v", p.Name, engine.ContainerID, engine.State)
			}
			main := p.Spec.Containers[0]
			if main.StartupProbe == nil || main.ReadinessProbe == nil || main.LivenessProbe == nil {
				t.Errorf("%s: the engine container is not probed", p.Name)
			}
			if !ptrTrue(engine.Started) || !engine.Ready || engine.RestartCount != 0 {
				t.Errorf("%s: started %v, ready %v, %d restarts", p.Name, ptrTrue(engine.Started), engine.Ready, engine.RestartCount)
			}
		}
	})

	t.Run("each member reaches its peers by the replica's headless Service", func(t *testing.T) {
		ips := map[string]string{}
		for _, p := range members {
			ips[p.Name] = p.Status.PodIP
		}
		for _, p := range members {
			out := execPython(t, ns, p.Name, peersScript)
			peers := 0
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				dnsName, ip, _ := strings.Cut(line, " ")
				pod, _, _ := strings.Cut(dnsName, ".")
				if ips[pod] != ip {
					t.Errorf("%s resolved %s to %s, the Pod's address is %s", p.Name, dnsName, ip, ips[pod])
				}
				peers++
			}
			if peers != 1 {
				t.Errorf("%s reached %d peers:\n%s", p.Name, peers, out)
			}
		}
	})

	t.Run("inside the containers: the environment, downward API and mounts mdplane render printed", func(t *testing.T) {
		rendered := renderPods(t, manifest)
		for _, p := range members {
			want, ok := rendered[podKey(&p)]
			if !ok {
				t.Fatalf("mdplane render printed no Pod %s", podKey(&p))
			}
			matchesRender(t, ns, &p, want)
		}
	})

	t.Run("a chat completion through the deployment's Service names the model", func(t *testing.T) {
		address := serviceAddress(t, ctx, ns, name)
		got, err := chat(ctx, &http.Client{Timeout: 30 * time.Second}, "http://"+address)
		if err != nil {
			t.Fatal(err)
		}
		if got != realModel {
			t.Fatalf("the answer names the model %q, want %q", got, realModel)
		}
	})

	t.Run("the metrics snapshot reads the engine's own queue depth", func(t *testing.T) {
		address := serviceAddress(t, ctx, ns, name)
		load, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				c := &http.Client{Timeout: time.Minute}
				for load.Err() == nil {
					_, _ = chat(load, c, "http://"+address)
				}
			})
		}
		defer wg.Wait()
		defer cancel()
		path := "/apis/metrics.worker.gpustack.ai/v1/namespaces/" + ns + "/modeldeployments/" + name + "/metrics"
		eventually(t, 2*time.Minute, "a waiting request in the snapshot", func() error {
			out, err := stack.Kubectl("get", "--raw", path)
			if err != nil {
				return err
			}
			var m metricsv1.ModelDeploymentMetrics
			if err := json.Unmarshal([]byte(out), &m); err != nil {
				return err
			}
			for _, g := range m.Queueing {
				if g.Name == "waiting" && g.Scope == "engine/server" && g.Value > 0 {
					return nil
				}
			}
			return fmt.Errorf("queueing %+v", m.Queueing)
		})
	})

	t.Run("a container killed on the node comes back, is reported and serves", func(t *testing.T) {
		victim := members[0]
		if err := stack.KillContainer(ctx, victim.Status.ContainerStatuses[0].ContainerID); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, victim.Name+" restarted and Ready", func() error {
			p := &corev1.Pod{}
			if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(&victim), p); err != nil {
				return err
			}
			if st := p.Status.ContainerStatuses[0]; st.RestartCount < 1 || !st.Ready || p.UID != victim.UID {
				return fmt.Errorf("restarts %d, ready %v", st.RestartCount, st.Ready)
			}
			return nil
		})
		eventually(t, 2*time.Minute, "the restart reported", func() error {
			return warningOn(ctx, ns, name, "ReplicaRestarted", victim.Name)
		})
		address := net.JoinHostPort(victim.Status.PodIP, "8000")
		if got, err := chat(ctx, &http.Client{Timeout: 30 * time.Second}, "http://"+address); err != nil || got != realModel {
			t.Fatalf("the restarted engine answered %q: %v", got, err)
		}
	})

	t.Run("a rolling edit under a steady request loop loses no request", func(t *testing.T) {
		address := serviceAddress(t, ctx, ns, name)
		load, cancel := context.WithCancel(ctx)
		var sent, failed atomic.Int64
		var firstFailure atomic.Value
		var wg sync.WaitGroup
		// A failure below stops the loop too, before the next test begins.
		defer wg.Wait()
		defer cancel()
		for range 2 {
			wg.Go(func() {
				// A connection per request, as kube-proxy balances connections: a kept-alive one
				// would stay on a retired engine past its drain.
				c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{DisableKeepAlives: true}}
				for load.Err() == nil {
					sent.Add(1)
					if _, err := chat(load, c, "http://"+address); err != nil && load.Err() == nil {
						failed.Add(1)
						firstFailure.CompareAndSwap(nil, err.Error())
					}
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
			"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","2048"]}]`); err != nil {
			t.Fatal(err)
		}
		realPodsReady(t, ctx, ns, name, 4, "--max-model-len 2048")
		time.Sleep(2 * time.Second)
		cancel()
		wg.Wait()
		t.Logf("%d requests through the Service during the rollout, %d failed", sent.Load(), failed.Load())
		if failed.Load() > 0 {
			t.Fatalf("%d of %d requests failed during the rollout, the first: %v", failed.Load(), sent.Load(), firstFailure.Load())
		}
		if sent.Load() < 20 {
			t.Fatalf("only %d requests were sent during the rollout", sent.Load())
		}
	})

	t.Run("a member the kubelet ends for good has its replica rebuilt", func(t *testing.T) {
		// An active deadline shortened on a running Pod makes the real kubelet stop it and leave it
		// in phase Failed (DeadlineExceeded), as a kubelet eviction leaves a Pod: nothing restarts it.
		// (The rebuilt replica turning Ready is the KWOK test's; here the real kubelet's Pod counts.)
		victim := realPodsReady(t, ctx, ns, name, 4, "--max-model-len 2048")[0]
		if err := stack.Client.Patch(ctx, &victim, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"activeDeadlineSeconds":1}}`))); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the ended member reported and a new member in its place", func() error {
			if err := warningOn(ctx, ns, name, "ReplicaLeaving", "the Pod ended in phase Failed (DeadlineExceeded"); err != nil {
				return err
			}
			all, err := pods(ctx, ns, name)
			if err != nil {
				return err
			}
			for _, p := range all {
				if p.UID != victim.UID && p.DeletionTimestamp == nil && p.Labels[workerv1.LabelPodOrdinal] == victim.Labels[workerv1.LabelPodOrdinal] &&
					p.Labels[workerv1.LabelMemberIndex] == victim.Labels[workerv1.LabelMemberIndex] {
					return nil
				}
			}
			return fmt.Errorf("no new member in %s's place yet", victim.Name)
		})
	})
}

// TestTheMooncakeClientConfigOnTheRealNode: a deployment with a KVCachePoolBinding reads, inside its
// engine container, the mooncake.json and environment `mdplane render` printed for it.
func TestTheMooncakeClientConfigOnTheRealNode(t *testing.T) {
	parallelLong(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "chat"
	applyCluster(t, ctx, ns)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	deployment := strings.Replace(onTheStack(t, ns, ""), "      replicas: 2\n      size: 2\n", "      replicas: 1\n", 1)
	deployment = strings.Replace(deployment, "  roles:\n", "  kvCache:\n    poolRef:\n      name: team-a-dram\n    connector: Mooncake\n  roles:\n", 1)
	kubectlApply(t, deployment)
	p := realPodsReady(t, ctx, ns, name, 1, "")[0]
	cluster := readExample(t, "cluster.yaml", "name: team-a\n---", "name: "+ns+"\n---", "namespace: team-a", "namespace: "+ns,
		"    name: team-a\n    blockSize", "    name: "+ns+"\n    blockSize")
	rendered := renderPods(t, cluster+"\n---\n"+deployment)
	want, ok := rendered[podKey(&p)]
	if !ok {
		t.Fatalf("mdplane render printed no Pod %s", podKey(&p))
	}
	if _, ok := envOf(&want.Spec.Containers[0], "MOONCAKE_CONFIG_PATH"); !ok {
		t.Fatalf("the render gives %s no Mooncake client config", p.Name)
	}
	matchesRender(t, ns, &p, want)
}

// realPodsReady waits until want Pods of the deployment run Ready on the real node (each with args
// on its command line, when given) and the deployment is Ready, and returns them by name.
func realPodsReady(t *testing.T, ctx context.Context, ns, name string, want int, args string) []corev1.Pod {
	t.Helper()
	var up []corev1.Pod
	eventually(t, 5*time.Minute, fmt.Sprintf("%d Pods of %s Ready on the real node", want, name), func() error {
		all, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		up = up[:0]
		for _, p := range all {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("%s is leaving", p.Name)
			}
			if !ready(p) || (args != "" && !strings.Contains(argsOf(&p), args)) {
				return fmt.Errorf("%s not Ready with %q yet (%s)", p.Name, args, p.Status.Phase)
			}
			up = append(up, p)
		}
		if len(up) != want {
			return fmt.Errorf("%d of %d Pods Ready", len(up), want)
		}
		if status, err := deploymentCondition(ctx, ns, name, "Ready"); err != nil || status != "True" {
			return fmt.Errorf("the deployment is Ready=%s (%v)", status, err)
		}
		return nil
	})
	slices.SortFunc(up, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return up
}

func ptrTrue(b *bool) bool { return b != nil && *b }

// peersScript prints, for each other member of the Pod's replica, its name behind the replica's
// headless Service and the address it resolves to, once a TCP connection to its serving port is
// made: the names a multi-host engine joins by.
const peersScript = `import os, socket
leader = os.environ["GPUSTACK_REPLICA_LEADER_ADDRESS"]
host, _, domain = leader.partition(".")
base = host[:-len("-m0")]
me = int(os.environ["GPUSTACK_MEMBER_INDEX"])
for m in range(int(os.environ["GPUSTACK_REPLICA_SIZE"])):
    if m == me:
        continue
    name = "%s-m%d.%s" % (base, m, domain)
    socket.create_connection((name, 8000), timeout=10).close()
    print(name, socket.getaddrinfo(name, 8000, socket.AF_INET)[0][4][0])
`

// execPython runs a python3 program in a Pod's engine container, as kubectl exec does, and returns
// what it printed.
func execPython(t *testing.T, ns, pod, program string) string {
	t.Helper()
	out, err := stack.Kubectl("exec", "-n", ns, pod, "-c", "main", "--", "python3", "-c", program)
	if err != nil {
		t.Fatalf("exec in %s: %v", pod, err)
	}
	return out
}

// renderPods runs `mdplane render` on a manifest, as a user trying it offline would, and returns the
// Pods it printed, by podKey.
func renderPods(t *testing.T, manifest string) map[string]corev1.Pod {
	t.Helper()
	cli, err := stack.CLI()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(file, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(cli, "render", "-f", file)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("mdplane render: %v\n%s", err, stderr.String())
	}
	docs, err := schemacheck.SplitDocuments("render", stdout.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]corev1.Pod{}
	for _, d := range docs {
		if d.Object.GetKind() != "Pod" {
			continue
		}
		var p corev1.Pod
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(d.Object.Object, &p); err != nil {
			t.Fatal(err)
		}
		out[podKey(&p)] = p
	}
	return out
}

// podKey names a Pod as the render does: by its name, or the prefix of the name the API server
// generates (a single-Pod replica's).
func podKey(p *corev1.Pod) string {
	if p.GenerateName != "" {
		return p.GenerateName
	}
	return p.Name
}

// containerView is what a python3 program in a container reads of it: its environment, and each
// mounted path with the files under it and their contents.
const containerView = `import json, os, sys
files = {}
for root in sys.argv[1:]:
    for dirpath, _, names in os.walk(root, followlinks=True):
        for n in names:
            if n.startswith(".."):
                continue
            p = os.path.join(dirpath, n)
            try:
                with open(p, errors="replace") as f:
                    files[p] = f.read()
            except OSError as e:
                files[p] = "unreadable: %s" % e
    if not os.path.exists(root):
        files[root] = "missing"
print(json.dumps({"env": dict(os.environ), "files": files}))
`

// matchesRender checks a running Pod's engine container against the Pod mdplane render printed for
// it: the command line in the Pod's spec; inside the container, each rendered variable's value (a
// literal as written, a downward-API field as the running Pod's); and each rendered mount present,
// with the rendered ConfigMap data, where a volume carries it, read back from the files.
func matchesRender(t *testing.T, ns string, live *corev1.Pod, want corev1.Pod) {
	t.Helper()
	wantMain, liveMain := want.Spec.Containers[0], live.Spec.Containers[0]
	if !slices.Equal(wantMain.Command, liveMain.Command) || !slices.Equal(wantMain.Args, liveMain.Args) {
		t.Errorf("%s runs %q %q, the render printed %q %q", live.Name, liveMain.Command, liveMain.Args, wantMain.Command, wantMain.Args)
	}
	var mounts []string
	for _, m := range wantMain.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	cmd := append([]string{"exec", "-n", ns, live.Name, "-c", wantMain.Name, "--", "python3", "-c", containerView}, mounts...)
	out, err := stack.Kubectl(cmd...)
	if err != nil {
		t.Fatal(err)
	}
	var view struct {
		Env   map[string]string `json:"env"`
		Files map[string]string `json:"files"`
	}
	if err := json.Unmarshal([]byte(out), &view); err != nil {
		t.Fatalf("%s: %v\n%s", live.Name, err, out)
	}
	for _, e := range wantMain.Env {
		got, set := view.Env[e.Name]
		want, known := envValue(live, e)
		switch {
		case !set:
			t.Errorf("%s: %s is not set in the container", live.Name, e.Name)
		case known && got != want:
			t.Errorf("%s: %s is %q in the container, the render says %q", live.Name, e.Name, got, want)
		}
	}
	for _, m := range wantMain.VolumeMounts {
		if view.Files[m.MountPath] == "missing" {
			t.Errorf("%s: %s is not mounted", live.Name, m.MountPath)
		}
	}
	for file, content := range projectedFiles(t, ns, &want, wantMain) {
		if got, ok := view.Files[file]; !ok || got != content {
			t.Errorf("%s: %s in the container is %q, the render says %q", live.Name, file, got, content)
		}
	}
}

// envValue is the value a rendered variable has in the running Pod, when the test can tell it: a
// literal, or a downward-API field of the Pod's metadata, status or spec.
func envValue(live *corev1.Pod, e corev1.EnvVar) (string, bool) {
	if e.ValueFrom == nil {
		return e.Value, true
	}
	ref := e.ValueFrom.FieldRef
	if ref == nil {
		return "", false
	}
	path := ref.FieldPath
	switch {
	case path == "metadata.name":
		return live.Name, true
	case path == "metadata.namespace":
		return live.Namespace, true
	case path == "status.podIP":
		return live.Status.PodIP, true
	case path == "spec.nodeName":
		return live.Spec.NodeName, true
	case strings.HasPrefix(path, "metadata.labels['"):
		return live.Labels[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.labels['"), "']")], true
	case strings.HasPrefix(path, "metadata.annotations['"):
		return live.Annotations[strings.TrimSuffix(strings.TrimPrefix(path, "metadata.annotations['"), "']")], true
	}
	return "", false
}

// projectedFiles are the files the engine container reads from its volumes, by path, with the
// contents it must find: a downward-API file of an annotation as the render printed the annotation
// (the Mooncake client config among them), a ConfigMap's key as the cluster holds it.
func projectedFiles(t *testing.T, ns string, p *corev1.Pod, c corev1.Container) map[string]string {
	t.Helper()
	files := map[string]string{}
	for _, m := range c.VolumeMounts {
		for _, v := range p.Spec.Volumes {
			if v.Name != m.Name {
				continue
			}
			if v.DownwardAPI != nil {
				for _, item := range v.DownwardAPI.Items {
					if item.FieldRef == nil {
						continue
					}
					if key, ok := strings.CutPrefix(item.FieldRef.FieldPath, "metadata.annotations['"); ok {
						files[filepath.Join(m.MountPath, item.Path)] = p.Annotations[strings.TrimSuffix(key, "']")]
					}
				}
			}
			if v.ConfigMap == nil {
				continue
			}
			cm := &corev1.ConfigMap{}
			if err := stack.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v.ConfigMap.Name}, cm); err != nil {
				t.Fatal(err)
			}
			for key, value := range cm.Data {
				path := key
				for _, item := range v.ConfigMap.Items {
					if item.Key == key {
						path = item.Path
					}
				}
				switch m.SubPath {
				case "":
					files[filepath.Join(m.MountPath, path)] = value
				case path:
					files[m.MountPath] = value
				}
			}
		}
	}
	return files
}

// serviceAddress is the ClusterIP and serving port of a deployment's Service, which this machine
// reaches through kube-proxy.
func serviceAddress(t *testing.T, ctx context.Context, ns, name string) string {
	t.Helper()
	svc := &corev1.Service{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("Service %s/%s has no address: %+v", ns, name, svc.Spec)
	}
	return net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
}

// chat sends one chat completion to an OpenAI-compatible server and returns the model its answer
// names.
func chat(ctx context.Context, c *http.Client, base string) (string, error) {
	body := `{"model":"` + realModel + `","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, raw)
	}
	var answer struct {
		Model   string `json:"model"`
		Choices []any  `json:"choices"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || len(answer.Choices) == 0 {
		return "", fmt.Errorf("not a chat completion (%v): %s", err, raw)
	}
	return answer.Model, nil
}
