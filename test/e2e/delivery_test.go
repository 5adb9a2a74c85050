package e2e

// Model delivery on the real stack, continued (docs/decisions/0017-model-delivery.md and 0018):
// an image artifact's Pods mount the image and prefer the Node that already holds it, and a claim no
// Pod would bind holds the deployment until a volume binds it.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// prefersHostname reports whether the Pod's preferred node affinity has a term of weight 100 on
// kubernetes.io/hostname In exactly nodes, and nothing else in it.
func prefersHostname(p corev1.Pod, nodes ...string) bool {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return false
	}
	return slices.ContainsFunc(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution, func(term corev1.PreferredSchedulingTerm) bool {
		exprs := term.Preference.MatchExpressions
		return term.Weight == 100 && len(term.Preference.MatchFields) == 0 && len(exprs) == 1 &&
			exprs[0].Key == corev1.LabelHostname && exprs[0].Operator == corev1.NodeSelectorOpIn && slices.Equal(exprs[0].Values, nodes)
	})
}

// nodeImages reads the image names a Node reports holding.
func nodeImages(ctx context.Context, node string) ([]string, error) {
	n := &corev1.Node{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Name: node}, n); err != nil {
		return nil, err
	}
	var names []string
	for _, image := range n.Status.Images {
		names = append(names, image.Names...)
	}
	return names, nil
}

// setReadyToStartContainers plays the kubelet's part KWOK leaves out: the sandbox is up and the
// volumes are mounted.
func setReadyToStartContainers(t *testing.T, ctx context.Context, running []corev1.Pod) {
	t.Helper()
	for i := range running {
		orig := running[i].DeepCopy()
		running[i].Status.Conditions = append(running[i].Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now(),
		})
		if err := stack.Client.Status().Patch(ctx, &running[i], client.StrategicMergeFrom(orig)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnImageDeliversTheWeights: a ModelArtifact whose source is an OCI image by digest resolves at
// once, without any hub; a deployment naming it runs its replicas with the image as the
// gpustack-model image volume, mounted read-only at /var/lib/gpustack/model, the engine serving
// that path. The members controller gives each Pod, as it creates it, one preferred node-affinity
// term (weight 100) on kubernetes.io/hostname In the Nodes whose status.images lists exactly that
// reference: here gpu-node-1, whose status the test patches as a kubelet that pulled the image
// would. KWOK's node stages write only conditions (heartbeat) and, once, the node's addresses and
// info (initialize): they leave status.images alone, which the test checks again at the end.
//
// The API server must admit the image volume: ImageVolume is beta and on by default in Kubernetes
// v1.35, the stack's version, and the stack starts kube-apiserver without feature gates.
//
// As in TestAClaimDeliversTheWeights, KWOK never sets PodReadyToStartContainers, so WeightsReady is
// first False/WeightsNotMounted, and True/Mounted once the test sets it as a kubelet would.
func TestAnImageDeliversTheWeights(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, artifact, node = "image", "weights-image", "gpu-node-1"
	digest := sha256.Sum256([]byte("Qwen/Qwen3-8B weights as an OCI artifact"))
	const repository = "registry.example.com/models/qwen3-8b"
	reference := repository + "@sha256:" + hex.EncodeToString(digest[:])

	if raw, err := stack.Kubectl("get", "--raw", "/metrics"); err == nil {
		for _, line := range strings.Split(raw, "\n") {
			if strings.HasPrefix(line, `kubernetes_feature_enabled{name="ImageVolume"`) {
				t.Logf("kube-apiserver: %s", line)
			}
		}
	}

	applyCluster(t, ctx, ns)
	queue(t, ctx, "weights-image", a10gEntrance, ns, 8)
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		if _, err := stack.Kubectl("delete", "modelartifacts", "--all", "-n", ns, "--wait=false"); err != nil {
			t.Error(err)
		}
		// The node forgets the image: no other test names it, but the nodes are shared.
		if _, err := stack.Kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", `{"status":{"images":null}}`); err != nil {
			t.Error(err)
		}
	})
	// The node holds the image, under its digest reference and a tag, as a kubelet reports it.
	if _, err := stack.Kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p",
		fmt.Sprintf(`{"status":{"images":[{"names":[%q,%q],"sizeBytes":16000000000}]}}`, reference, repository+":v1")); err != nil {
		t.Fatal(err)
	}
	if names, err := nodeImages(ctx, node); err != nil {
		t.Fatal(err)
	} else if !slices.Contains(names, reference) {
		t.Fatalf("node %s reports images %q after the patch, without %s", node, names, reference)
	}
	// The controllers' Node cache follows the patch through a watch; give it a moment before the
	// first Pod can be created (the composition alone takes longer).
	time.Sleep(time.Second)

	kubectlApply(t, fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  source:
    image: {reference: %[3]q}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %[4]s, namespace: %[2]s}
spec:
  model:
    name: Qwen/Qwen3-8B
    artifactRef: {name: %[1]s}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 2, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, artifact, ns, reference, name))
	eventually(t, 30*time.Second, "the image artifact Resolved without a hub", func() error {
		return artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactResolved, metav1.ConditionTrue, workerv1.ReasonArtifactResolved)
	})
	running := runningPods(t, ctx, ns, name, "server", 2)
	for _, p := range running {
		if !prefersHostname(p, node) {
			t.Errorf("Pod %s was created without the preferred term for %s, the node holding the image: %+v", p.Name, node, p.Spec.Affinity)
		}
		if p.Spec.NodeName != node {
			// Preferred, not required: the scheduler weighs it with its other scores.
			t.Logf("Pod %s runs on %s, not on %s which holds the image", p.Name, p.Spec.NodeName, node)
		}
		v := volumeOf(p, weightsVolume)
		if v == nil || v.Image == nil || v.Image.Reference != reference || v.Image.PullPolicy != "" && v.Image.PullPolicy != corev1.PullIfNotPresent {
			t.Errorf("Pod %s: volume %s is %+v, want image %s", p.Name, weightsVolume, v, reference)
		}
		if volumeOf(p, cacheVolume) != nil {
			t.Errorf("Pod %s has the engine's cache volume under Image delivery", p.Name)
		}
		servesMountedWeights(t, p, "", "Image")
	}
	statusModelBecomes(t, ctx, ns, name, workerv1.ModelStatus{Artifact: artifact, Delivery: "Image"})

	eventually(t, 30*time.Second, "WeightsReady False/WeightsNotMounted on KWOK's Pods", func() error {
		return conditionIs(ctx, ns, name, "WeightsReady", "False", "WeightsNotMounted")
	})
	setReadyToStartContainers(t, ctx, running)
	eventually(t, 30*time.Second, "WeightsReady True/Mounted", func() error {
		return conditionIs(ctx, ns, name, "WeightsReady", "True", "Mounted")
	})
	// KWOK's node stages, which write the conditions, have kept the images.
	if names, err := nodeImages(ctx, node); err != nil {
		t.Fatal(err)
	} else if !slices.Contains(names, reference) {
		t.Errorf("node %s lost the image after KWOK's stages: %q", node, names)
	}
}

// TestAPendingClaimHoldsTheDeployment: a claim of a StorageClass binding Immediately, with no
// provisioner behind it, stays Pending, and no Pod would bind it. Its artifact resolves (a claim
// resolves when it exists), but the deployment naming it is held: WeightsReady False/ClaimNotBound,
// ReplicasUpToDate False/RolloutHeldByWeights, and no Pod or Workload is created. Once a
// PersistentVolume pre-bound to the claim appears, kube-controller-manager's binder binds them, the
// claim's watch re-enqueues the deployment, and its replica is created and runs.
func TestAPendingClaimHoldsTheDeployment(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, artifact, claim = "pending", "weights-pending", "weights"
	const class, volume = "team-f-immediate", "team-f-weights"
	applyCluster(t, ctx, ns)
	queue(t, ctx, "weights-pending", a10gEntrance, ns, 8)
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		if _, err := stack.Kubectl("delete", "modelartifacts", "--all", "-n", ns, "--wait=false"); err != nil {
			t.Error(err)
		}
		if _, err := stack.Kubectl("delete", "persistentvolumeclaim", claim, "-n", ns, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Error(err)
		}
		if _, err := stack.Kubectl("delete", "persistentvolume", volume, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Error(err)
		}
		if _, err := stack.Kubectl("delete", "storageclass", class, "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	kubectlApply(t, fmt.Sprintf(`apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: %[1]s}
provisioner: example.com/absent
volumeBindingMode: Immediate
reclaimPolicy: Retain
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %[3]s, namespace: %[2]s}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: %[1]s
  resources: {requests: {storage: 100Gi}}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: %[4]s, namespace: %[2]s}
spec:
  source:
    persistentVolumeClaim: {claimName: %[3]s}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %[5]s, namespace: %[2]s}
spec:
  model:
    name: Qwen/Qwen3-8B
    artifactRef: {name: %[4]s}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 1, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, class, ns, claim, artifact, name))

	eventually(t, 30*time.Second, "the deployment held by the Pending claim", func() error {
		if err := artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactResolved, metav1.ConditionTrue, workerv1.ReasonArtifactResolved); err != nil {
			return err
		}
		if err := conditionIs(ctx, ns, name, "WeightsReady", "False", "ClaimNotBound"); err != nil {
			return err
		}
		return conditionIs(ctx, ns, name, "ReplicasUpToDate", "False", "RolloutHeldByWeights")
	})
	// Held, not merely slow: through a render the nudge asks for, nothing is created, and the
	// claim is still Pending.
	nudge(t, ns, name)
	for range 8 {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		wls, err := workloads(ctx, ns)
		if err != nil {
			t.Fatal(err)
		}
		if len(ps)+len(wls) > 0 {
			t.Fatalf("a held deployment has %d Pods and %d Workloads", len(ps), len(wls))
		}
		time.Sleep(time.Second)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
		t.Fatal(err)
	}
	if pvc.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim %s is %q, want Pending while no volume exists", claim, pvc.Status.Phase)
	}

	// A volume pre-bound to the claim: the binder completes the binding at once.
	kubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s}
spec:
  accessModes: [ReadOnlyMany]
  capacity: {storage: 100Gi}
  storageClassName: %[2]s
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: %[3]s, name: %[4]s}
  hostPath: {path: /models}
`, volume, class, ns, claim))
	bound := time.Now()
	eventually(t, 30*time.Second, "claim "+claim+" Bound", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, pvc); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s is %q", claim, pvc.Status.Phase)
		}
		return nil
	})
	running := runningPods(t, ctx, ns, name, "server", 1)
	t.Logf("the replica ran %s after the volume appeared", time.Since(bound).Round(time.Second))
	if v := volumeOf(running[0], weightsVolume); v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim {
		t.Errorf("Pod %s: volume %s is %+v, want claim %s", running[0].Name, weightsVolume, v, claim)
	}
	eventually(t, 30*time.Second, "the hold lifted", func() error {
		if err := conditionIs(ctx, ns, name, "ReplicasUpToDate", "True", "UpToDate"); err != nil {
			return err
		}
		return conditionIs(ctx, ns, name, "WeightsReady", "False", "WeightsNotMounted")
	})
}
