package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// npuKey is the Ascend device plugin's resource key.
const npuKey corev1.ResourceName = "huawei.com/npu"

// npuNode adds a fake Ascend node KWOK keeps Ready, with eight NPUs, labelled as GPUStack's device
// manager labels an Ascend 910B node: its accelerator group ascend-910b, the product and the memory
// of one NPU.
func npuNode(t *testing.T, ctx context.Context, i int) *corev1.Node {
	t.Helper()
	const group = "acceleratable.feature.gpustack.ai/ascend-910b"
	n, err := stack.AddNode(ctx, cluster.NodeOptions{Name: fmt.Sprintf("npu-node-%d", i), GPUs: 8, Resource: npuKey, Arch: "arm64",
		Labels: map[string]string{group: "true", group + ".product": "Ascend-910B", group + ".memory": "64Gi"}, Taints: []corev1.Taint{ownerTaint(t)}})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// ascendType makes an Ascend InstanceType of two fake 910B nodes (npu-node-<first> and the next),
// used by namespace, and waits until it is Active with their 16 NPUs and its ClusterQueue is sized in
// NPUs. The type, the nodes and the namespace go when the test ends.
func ascendType(t *testing.T, ctx context.Context, namespace, typeName string, first int) {
	t.Helper()
	cleanup := []client.Object{&workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: typeName}}}
	t.Cleanup(func() {
		tearDown(t, ctx, namespace)
		for _, o := range cleanup {
			_ = stack.Client.Delete(ctx, o)
		}
	})
	for i := range 2 {
		cleanup = append(cleanup, npuNode(t, ctx, first+i))
	}
	applyManagedType(t, namespace, typeName, `
  acceleratable: true
  acceleratorGroup: ascend-910b
  os: linux
  arch: arm64
  unitResources: {cpu: "16", ram: 64Gi}
  localStorage: 100Gi`)
	it := awaitInstanceType(t, ctx, typeName, workerv1.InstanceTypePhaseActive)
	eventually(t, time.Minute, "the type's capacity from its two nodes and its ClusterQueue sized in NPUs", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, it); err != nil {
			return err
		}
		if d := it.Status.Detail; d == nil || d.Manufacturer != "ascend" || d.Product != "Ascend-910B" || d.Memory == nil || d.Memory.Cmp(resource.MustParse("64Gi")) != 0 {
			return fmt.Errorf("status.detail %+v, want ascend Ascend-910B 64Gi from the nodes' labels", d)
		}
		if v := it.Status.Accelerator; v == nil || v.Capacity == nil || v.Capacity.Value() != 16 {
			return fmt.Errorf("status.accelerator %+v, want capacity 16", v)
		}
		return clusterQueueHolds(ctx, typeName, corev1.ResourceList{npuKey: resource.MustParse("16"),
			corev1.ResourceCPU: resource.MustParse("256"), corev1.ResourceMemory: resource.MustParse("1Ti"), corev1.ResourceEphemeralStorage: resource.MustParse("1600Gi")})
	})
}

// TestAscendRoles: on an Ascend InstanceType (huawei.com/npu nodes labelled by GPUStack's device
// manager), mdplane derives the type's capacity from the nodes and sizes its ClusterQueue in NPUs,
// and an SGLang role and a vLLM-Ascend prefill/decode pair under llm-d-router run: their Pods request
// huawei.com/npu and carry the ascend RuntimeClass (it exists), the pair's leg is MooncakeConnectorV1
// with each half's degrees and the host driver mounted, the decoder's routing proxy speaks nixlv2,
// and a pair whose prefill is narrower than its decode is refused.
func TestAscendRoles(t *testing.T) {
	parallelLong(t)
	// Both count the group's nodes, which each adds and deletes; the RuntimeClass ascend is this one's.
	exclusive(t, "the ascend-910b NPU group")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const typeName = "e2e-ascend-910b-linux-arm64"
	runtimeClass := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "ascend"}, Handler: "ascend"}
	t.Cleanup(func() { _ = stack.Client.Delete(ctx, runtimeClass) })
	if err := stack.Client.Create(ctx, runtimeClass); err != nil {
		t.Fatal(err)
	}
	ascendType(t, ctx, ns, typeName, 0)

	role := func(name, kind string, tp int) string {
		return fmt.Sprintf("    - {name: %s, kind: %s, instanceType: %s, resources: {accelerator: %d}, extraArgs: [--tensor-parallel-size, %q]}\n", name, kind, typeName, tp, fmt.Sprint(tp))
	}
	deployment := func(name, engine, image, router, roles string) string {
		return fmt.Sprintf("apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\nmetadata: {name: %s, namespace: %s}\nspec:\n  model: {name: Qwen/Qwen3-8B}\n  engine: {name: %s, image: %s}\n%s  roles:\n%s",
			name, ns, engine, image, router, roles)
	}

	t.Run("a pair whose prefill is narrower than its decode is refused", func(t *testing.T) {
		out := applyRefused(t, deployment("narrow", "vLLM", "quay.io/ascend/vllm-ascend:v0.11.0", llmdRouter, role("prefill", "Prefill", 1)+role("decode", "Decode", 2)))
		if want := "the vLLM-Ascend transfer leg requires the prefill tp_size to be at least the decode one, but the pair declares prefill 1 and decode 2"; !strings.Contains(out, want) {
			t.Fatalf("kubectl said:\n%s\nwant it to say %q", out, want)
		}
	})

	kubectlApply(t, deployment("sgl", "SGLang", "lmsysorg/sglang:v0.5.21-cann8.2.rc1-910b", "", role("server", "Server", 2)))
	kubectlApply(t, deployment("vasc", "vLLM", "quay.io/ascend/vllm-ascend:v0.11.0", llmdRouter, role("prefill", "Prefill", 2)+role("decode", "Decode", 2)))
	server := runningPods(t, ctx, ns, "sgl", "server", 1)
	prefill := runningPods(t, ctx, ns, "vasc", "prefill", 1)
	decode := runningPods(t, ctx, ns, "vasc", "decode", 1)
	eventually(t, 3*time.Minute, "vasc's router Ready", func() error {
		c, err := deploymentConditionOf(ctx, ns, "vasc", "RouterReady")
		if err != nil || c.Status != "True" {
			return fmt.Errorf("RouterReady %+v: %v", c, err)
		}
		return nil
	})

	for _, p := range []corev1.Pod{server[0], prefill[0], decode[0]} {
		if got := p.Spec.Containers[0].Resources.Requests[npuKey]; got.Value() != 2 {
			t.Errorf("Pod %s requests %s %s, want 2", p.Name, npuKey, got.String())
		}
		if got := ptr.Deref(p.Spec.RuntimeClassName, ""); got != "ascend" {
			t.Errorf("Pod %s runs under RuntimeClass %q, want ascend (the class exists)", p.Name, got)
		}
	}
	for _, p := range []corev1.Pod{prefill[0], decode[0]} {
		args := strings.Join(p.Spec.Containers[0].Args, " ")
		for _, want := range []string{`"kv_connector":"MooncakeConnectorV1"`, `"kv_port":8998`, `"prefill":{"dp_size":1,"tp_size":2}`, `"decode":{"dp_size":1,"tp_size":2}`} {
			if !strings.Contains(args, want) {
				t.Errorf("Pod %s: the transfer config lacks %s: %s", p.Name, want, args)
			}
		}
		if strings.Contains(args, "--kv-events-config") {
			t.Errorf("Pod %s publishes KV events on Ascend: %s", p.Name, args)
		}
		driver := false
		for _, v := range p.Spec.Volumes {
			driver = driver || v.Name == "gpustack-ascend-driver" && v.HostPath != nil && v.HostPath.Path == "/usr/local/Ascend/driver"
		}
		if !driver {
			t.Errorf("Pod %s does not mount the Ascend driver from the host", p.Name)
		}
		for _, e := range p.Spec.Containers[0].Env {
			if e.Name == "VLLM_MOONCAKE_BOOTSTRAP_PORT" {
				t.Errorf("Pod %s sets VLLM_MOONCAKE_BOOTSTRAP_PORT, which only native vLLM reads", p.Name)
			}
		}
	}
	proxy := container(decode[0], "routing-proxy")
	if proxy == nil || !strings.Contains(strings.Join(proxy.Args, " "), "--kv-connector=nixlv2") {
		t.Errorf("the decoder's routing proxy does not speak nixlv2: %+v", proxy)
	}
}
