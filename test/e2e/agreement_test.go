package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The rows of the upstream operator's own suite that only the real stack can show: a
// deployment the webhook would refuse today is still deleted, an edit that creates a port collision
// is refused by kubectl, and decoders and SGLang roles whose own arguments move a listener run.

// applyRefused applies a manifest that the webhooks must refuse and returns kubectl's output.
func applyRefused(t *testing.T, manifest string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "refused.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := stack.Kubectl("apply", "-f", f)
	if err == nil {
		t.Fatalf("kubectl apply was admitted:\n%s", out)
	}
	return out
}

// runningPods waits until a deployment's role has n Ready Pods and returns them.
func runningPods(t *testing.T, ctx context.Context, namespace, deployment, role string, n int) []corev1.Pod {
	t.Helper()
	var running []corev1.Pod
	eventually(t, 3*time.Minute, fmt.Sprintf("%d Ready Pods of role %s", n, role), func() error {
		ps, err := pods(ctx, namespace, deployment)
		if err != nil {
			return err
		}
		running = running[:0]
		for _, p := range ps {
			if p.Labels[workerv1.LabelComponent] == role && p.DeletionTimestamp == nil && ready(p) {
				running = append(running, p)
			}
		}
		if len(running) != n {
			return fmt.Errorf("%d of %d Ready", len(running), n)
		}
		return nil
	})
	return running
}

func container(p corev1.Pod, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

const agreementDeployment = `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: team-u}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: %s, image: %s}
%s  roles:
%s`

func agreementManifest(name, engine, router, roles string) string {
	image := "vllm/vllm-openai:v0.25.1"
	if engine == "SGLang" {
		image = "lmsysorg/sglang:v0.5.21"
	}
	return fmt.Sprintf(agreementDeployment, name, engine, image, router, roles)
}

const llmdRouter = "  router: {name: llm-d-router}\n"

func TestUpstreamAgreementOnTheStack(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-u")
	queue(t, ctx, "upstream-agreement", "gpustack-fnv64-7bc37bef52624161", "team-u", 8) // a ClusterQueue of its own: the smoke test makes the type's
	const a10g = "instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}"

	t.Run("adding a router that makes a role's --port a reserved one is refused", func(t *testing.T) {
		server := "    - {name: server, " + a10g + `, extraArgs: ["--port=5557"]}` + "\n"
		kubectlApply(t, agreementManifest("reserved", "vLLM", "", server))
		out := applyRefused(t, agreementManifest("reserved", "vLLM", llmdRouter, server))
		for _, part := range []string{"spec.roles[0].extraArgs", "port 5557 is reserved", "spec.router names llm-d-router"} {
			if !strings.Contains(out, part) {
				t.Errorf("kubectl did not print %q:\n%s", part, out)
			}
		}
		if _, err := stack.Kubectl("delete", "modeldeployment", "reserved", "-n", "team-u", "--wait=false"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a decoder behind the routing proxy keeps its own --port, in an abbreviation, and runs", func(t *testing.T) {
		decoder := func(args string) string {
			return "    - {name: prefill, kind: Prefill, " + a10g + "}\n    - {name: decode, kind: Decode, " + a10g + ", extraArgs: " + args + "}\n"
		}
		out := applyRefused(t, agreementManifest("proxied", "vLLM", llmdRouter, decoder(`["--port=8000"]`)))
		if !strings.Contains(out, "routing proxy") || !strings.Contains(out, "--port 8000") {
			t.Errorf("kubectl did not name the proxy's port:\n%s", out)
		}
		kubectlApply(t, agreementManifest("proxied", "vLLM", llmdRouter, decoder(`["--por", "9000"]`)))
		p := runningPods(t, ctx, "team-u", "proxied", "decode", 1)[0]
		engine := container(p, "main")
		if engine == nil {
			t.Fatalf("no main container in %s", p.Name)
		}
		line := strings.Join(append(slices.Clone(engine.Command), engine.Args...), " ")
		if !strings.Contains(line, "--por 9000") || strings.Contains(line, "--port") {
			t.Errorf("the engine line is not the decoder's own --por 9000, unmerged: %s", line)
		}
		proxyPort := ""
		for _, c := range append(slices.Clone(p.Spec.InitContainers), p.Spec.Containers...) {
			if c.Name == "main" {
				continue
			}
			args := append(slices.Clone(c.Command), c.Args...)
			for i, a := range args {
				if v, ok := strings.CutPrefix(a, "--model-server-port="); ok {
					proxyPort = v
				} else if a == "--model-server-port" && i+1 < len(args) {
					proxyPort = args[i+1]
				}
			}
		}
		if proxyPort != "9000" {
			t.Errorf("the routing proxy forwards to %q, not the decoder's own 9000", proxyPort)
		}
		if _, err := stack.Kubectl("delete", "modeldeployment", "proxied", "-n", "team-u", "--wait=false"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("an SGLang role passing its own --host gets no probes and runs", func(t *testing.T) {
		kubectlApply(t, agreementManifest("own-host", "SGLang", "", "    - {name: server, "+a10g+`, extraArgs: ["--ho", "0.0.0.0"]}`+"\n"))
		p := runningPods(t, ctx, "team-u", "own-host", "server", 1)[0]
		engine := container(p, "main")
		if engine == nil || engine.ReadinessProbe != nil || engine.LivenessProbe != nil || engine.StartupProbe != nil {
			t.Errorf("the engine of %s has probes while it binds its own --host", p.Name)
		}
		if _, err := stack.Kubectl("delete", "modeldeployment", "own-host", "-n", "team-u", "--wait=false"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a deployment stored with --kv-cache-dtype before the refusal is refused an edit and deleted", func(t *testing.T) {
		withCache := strings.Replace(agreementManifest("stored-dtype", "vLLM", "  kvCache: {poolRef: {name: team-a-dram}}\n",
			"    - {name: server, "+a10g+`, extraArgs: ["--kv-cache-dtype", "fp8"]}`+"\n"),
			"namespace: team-u}", "namespace: team-u, labels: {e2e.mdplane.io/stored-before-the-refusal: \"true\"}}", 1)
		md := &unstructured.Unstructured{}
		md.SetAPIVersion(workerv1.SchemeGroupVersion.String())
		md.SetKind(workerv1.ModelDeploymentKind)
		key := client.ObjectKey{Namespace: "team-u", Name: "stored-dtype"}
		// As an older release would have left it: stored, and reconciled by Crossplane (its finalizer
		// added) before today's refusal judged the object's updates.
		storeUnjudged(t, ctx, withCache, func() error {
			if err := stack.Client.Get(ctx, key, md); err != nil {
				return err
			}
			if len(md.GetFinalizers()) == 0 {
				return fmt.Errorf("no finalizer yet")
			}
			return nil
		})
		edit := filepath.Join(t.TempDir(), "edit.yaml")
		if err := os.WriteFile(edit, []byte(strings.Replace(withCache, "accelerator: 1}", "accelerator: 1}, replicas: 2", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		// A server-side dry run is judged by the webhooks and stores nothing, so it can be asked again
		// until the API server has picked the restored configuration up.
		eventually(t, 30*time.Second, "an edit refused for the owned flag", func() error {
			out, err := stack.Kubectl("apply", "--dry-run=server", "-f", edit)
			if err == nil || !strings.Contains(out, "carries the KVCachePoolBinding's dtype") {
				return fmt.Errorf("not refused for the owned flag: %v\n%s", err, out)
			}
			return nil
		})
		if _, err := stack.Kubectl("delete", "modeldeployment", "stored-dtype", "-n", "team-u", "--wait=false"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the deployment gone", func() error {
			err := stack.Client.Get(ctx, key, md)
			if err == nil {
				return fmt.Errorf("still there, finalizers %v", md.GetFinalizers())
			}
			return client.IgnoreNotFound(err)
		})
	})
}

// storeUnjudged stores a labelled manifest as a release before today's refusals would have: the
// validating webhook is told to skip objects with the label while it is applied and until settled
// holds, then judges everything again.
func storeUnjudged(t *testing.T, ctx context.Context, manifest string, settled func() error) {
	t.Helper()
	cfg := &unstructured.Unstructured{}
	cfg.SetAPIVersion("admissionregistration.k8s.io/v1")
	cfg.SetKind("ValidatingWebhookConfiguration")
	patch := func(op string, value any) {
		t.Helper()
		p := map[string]any{"op": op, "path": "/webhooks/0/objectSelector"}
		if value != nil {
			p["value"] = value
		}
		raw, err := json.Marshal([]any{p})
		if err != nil {
			t.Fatal(err)
		}
		cfg.SetName("mdplane")
		if err := stack.Client.Patch(ctx, cfg, client.RawPatch(types.JSONPatchType, raw)); err != nil {
			t.Fatal(err)
		}
	}
	patch("add", map[string]any{"matchExpressions": []any{map[string]any{"key": "e2e.mdplane.io/stored-before-the-refusal", "operator": "DoesNotExist"}}})
	restored := false
	defer func() {
		if !restored {
			patch("remove", nil)
		}
	}()
	// The API server reads webhook configurations through an informer: retry until the skip holds.
	eventually(t, 30*time.Second, "the manifest stored past the validating webhook", func() error {
		f := filepath.Join(t.TempDir(), "stored.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			return err
		}
		_, err := stack.Kubectl("apply", "-f", f)
		return err
	})
	eventually(t, time.Minute, "the stored object settled", settled)
	patch("remove", nil)
	restored = true
}

// TestAMixedTransportBackendRefusesANewBinding: a deployment binding a pool whose backend's groups
// mix transports is refused by kubectl with the lines `mdplane validate` prints offline,
// and one on a single transport is admitted.
func TestAMixedTransportBackendRefusesANewBinding(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-m")
	chain := `apiVersion: worker.gpustack.ai/v1
kind: KVCacheBackend
metadata: {name: mixed-%[1]s}
spec:
  transport: {protocol: RDMA}
  connection:
    managed:
      leader: {}
      members:
        - {nodeSelector: {gpustack.ai/kv-cache: a}, medium: DRAM, capacityPerMember: 64Gi}
        - {nodeSelector: {gpustack.ai/kv-cache: b}, medium: DRAM, capacityPerMember: 64Gi, transport: {protocol: %[2]s}}
---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePool
metadata: {name: mixed-%[1]s}
spec: {backends: [mixed-%[1]s], quota: {total: 1Ti}}
---
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: mixed-%[1]s, namespace: team-m}
spec: {poolRef: {name: mixed-%[1]s}, domain: {name: chat, blockSize: 16, dtype: bfloat16}, quota: {ceiling: 1Gi}}
`
	deployment := `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: bound-%[1]s, namespace: team-m}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  kvCache: {poolRef: {name: mixed-%[1]s}}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`
	kubectlApply(t, fmt.Sprintf(chain, "tcp", "TCP"))
	kubectlApply(t, fmt.Sprintf(chain, "rdma", "RDMA"))
	out := applyRefused(t, fmt.Sprintf(deployment, "tcp"))

	md := &workerv1.ModelDeployment{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(deployment, "tcp")), md); err != nil {
		t.Fatal(err)
	}
	chainOf := func(name string) validation.KVCacheChain {
		t.Helper()
		c := validation.KVCacheChain{Binding: &workerv1.KVCachePoolBinding{}, Pool: &workerv1.KVCachePool{}, Backend: &workerv1.KVCacheBackend{}}
		for _, o := range []client.Object{c.Binding, c.Pool, c.Backend} {
			key := client.ObjectKey{Name: name}
			if _, namespaced := o.(*workerv1.KVCachePoolBinding); namespaced {
				key.Namespace = "team-m"
			}
			if err := stack.Client.Get(ctx, key, o); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	it := &workerv1.InstanceType{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Name: "gpustack-nvidia-a10g-linux-amd64"}, it); err != nil {
		t.Fatal(err)
	}
	errs := validation.ValidateCreate(md, validation.Cluster{InstanceTypes: map[string]*workerv1.InstanceType{it.Name: it}, KVCache: ptr.To(chainOf("mixed-tcp"))})
	if len(errs) == 0 {
		t.Fatal("mdplane validate admits what kubectl refused")
	}
	for _, e := range errs {
		if !strings.Contains(out, e.Error()) {
			t.Errorf("kubectl did not print %q:\n%s", e.Error(), out)
		}
	}
	kubectlApply(t, fmt.Sprintf(deployment, "rdma")) // one transport: admitted
	if _, err := stack.Kubectl("delete", "modeldeployment", "bound-rdma", "-n", "team-m", "--wait=false"); err != nil {
		t.Fatal(err)
	}

	// The backend's own webhook: its groups are not reordered (a group's index is its identity);
	// appending one is admitted.
	backend := `apiVersion: worker.gpustack.ai/v1
kind: KVCacheBackend
metadata: {name: mixed-rdma}
spec:
  transport: {protocol: RDMA}
  connection:
    managed:
      leader: {}
      members:
`
	group := func(kv string) string {
		return "        - {nodeSelector: {gpustack.ai/kv-cache: " + kv + "}, medium: DRAM, capacityPerMember: 64Gi}\n"
	}
	out = applyRefused(t, backend+group("b")+group("a"))
	if want := "spec.connection.managed.members[0]: Forbidden: the group with nodeSelector map[gpustack.ai/kv-cache:b] was stored at index 1"; !strings.Contains(out, want) {
		t.Errorf("kubectl did not print %q:\n%s", want, out)
	}
	kubectlApply(t, backend+group("a")+group("b")+group("c"))
}
