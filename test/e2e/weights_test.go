package e2e

// Model artifacts on the real stack (docs/decisions/0019-artifact-resolution.md and the records on
// delivery): a claim-delivered deployment runs on the node its volume allows and mounts the weights
// read-only; a deployment naming an artifact the hub does not know yet creates no Pod until the hub
// serves it, and a hub failing on revalidation leaves the running replicas alone.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/hubtest"
)

// a10gEntrance is the LocalQueue of examples/cluster.yaml's a10g InstanceType.
const a10gEntrance = "gpustack-fnv64-7bc37bef52624161"

// The delivery's constants as the spec names them.
const (
	weightsPath   = "/var/lib/gpustack/model"
	weightsVolume = "gpustack-model"
	cacheVolume   = "gpustack-model-cache"
)

// modelDeployment reads a ModelDeployment.
func modelDeployment(ctx context.Context, namespace, name string) (*workerv1.ModelDeployment, error) {
	md := &workerv1.ModelDeployment{}
	return md, stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md)
}

// statusModelBecomes waits until the deployment's status.model is want. It comes from the
// deployment's own render, which follows the artifact's resolution at its next pass; the Pods come
// from the replicas' renders, which may be there first.
func statusModelBecomes(t *testing.T, ctx context.Context, namespace, name string, want workerv1.ModelStatus) {
	t.Helper()
	eventually(t, 30*time.Second, "status.model "+want.Delivery, func() error {
		md, err := modelDeployment(ctx, namespace, name)
		if err != nil {
			return err
		}
		if md.Status.Model == nil || *md.Status.Model != want {
			return fmt.Errorf("status.model is %+v, want %+v", md.Status.Model, want)
		}
		return nil
	})
}

// modelArtifact reads a ModelArtifact.
func modelArtifact(ctx context.Context, namespace, name string) (*workerv1.ModelArtifact, error) {
	a := &workerv1.ModelArtifact{}
	return a, stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, a)
}

// conditionIs reports an error unless the deployment's condition has the status and reason.
func conditionIs(ctx context.Context, namespace, name, typ, status, reason string) error {
	c, err := deploymentConditionOf(ctx, namespace, name, typ)
	if err != nil {
		return err
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("%s is %s/%s (%s), want %s/%s", typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// artifactConditionIs reports an error unless the artifact's condition has the status and reason.
func artifactConditionIs(ctx context.Context, namespace, name, typ string, status metav1.ConditionStatus, reason string) error {
	a, err := modelArtifact(ctx, namespace, name)
	if err != nil {
		return err
	}
	c := meta.FindStatusCondition(a.Status.Conditions, typ)
	if c == nil {
		return fmt.Errorf("ModelArtifact %s has no %s condition yet", name, typ)
	}
	if c.Status != status || c.Reason != reason {
		return fmt.Errorf("ModelArtifact %s: %s is %s/%s (%s), want %s/%s", name, typ, c.Status, c.Reason, c.Message, status, reason)
	}
	return nil
}

// modelArgument is the model the engine's command line serves: the word after "vllm serve".
func modelArgument(p *corev1.Pod) string {
	words := strings.Fields(argsOf(p))
	if i := slices.Index(words, "serve"); i >= 0 && i+1 < len(words) {
		return words[i+1]
	}
	return ""
}

// flagValue is the word after flag on a Pod's main command line, "" when the flag is absent.
func flagValue(p *corev1.Pod, flag string) string {
	words := strings.Fields(argsOf(p))
	if i := slices.Index(words, flag); i >= 0 && i+1 < len(words) {
		return words[i+1]
	}
	return ""
}

func volumeOf(p corev1.Pod, name string) *corev1.Volume {
	for i := range p.Spec.Volumes {
		if p.Spec.Volumes[i].Name == name {
			return &p.Spec.Volumes[i]
		}
	}
	return nil
}

func mountOf(c *corev1.Container, name string) *corev1.VolumeMount {
	for i := range c.VolumeMounts {
		if c.VolumeMounts[i].Name == name {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func envOf(c *corev1.Container, name string) (string, bool) {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value, true
		}
	}
	return "", false
}

// requiresHostname reports whether every term of the Pod's required node affinity (the terms are
// ORed, so each must carry it) requires kubernetes.io/hostname In [node].
func requiresHostname(p corev1.Pod, node string) bool {
	a := p.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return false
	}
	terms := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for _, term := range terms {
		if !slices.ContainsFunc(term.MatchExpressions, func(r corev1.NodeSelectorRequirement) bool {
			return r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn && slices.Equal(r.Values, []string{node})
		}) {
			return false
		}
	}
	return len(terms) > 0
}

// localClaim creates a PersistentVolumeClaim bound to a local PersistentVolume of its own, which
// only node reaches (its required node affinity), with one access mode; the namespace is torn down
// and both are deleted when the test ends.
func localClaim(t *testing.T, ctx context.Context, namespace, claim, volume, node string, mode corev1.PersistentVolumeAccessMode) {
	t.Helper()
	t.Cleanup(func() {
		tearDown(t, ctx, namespace)
		if _, err := stack.Kubectl("delete", "modelartifacts", "--all", "-n", namespace, "--wait=false"); err != nil {
			t.Error(err)
		}
		// The claim first: the volume's protection holds it while it is bound.
		if _, err := stack.Kubectl("delete", "persistentvolumeclaim", claim, "-n", namespace, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Error(err)
		}
		if _, err := stack.Kubectl("delete", "persistentvolume", volume, "--ignore-not-found", "--timeout=60s"); err != nil {
			t.Error(err)
		}
	})
	kubectlApply(t, fmt.Sprintf(`apiVersion: v1
kind: PersistentVolume
metadata: {name: %[1]s}
spec:
  accessModes: [%[5]s]
  capacity: {storage: 100Gi}
  storageClassName: ""
  persistentVolumeReclaimPolicy: Retain
  claimRef: {namespace: %[2]s, name: %[3]s}
  local: {path: /models}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [%[4]s]}]
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: %[3]s, namespace: %[2]s}
spec:
  accessModes: [%[5]s]
  storageClassName: ""
  volumeName: %[1]s
  resources: {requests: {storage: 100Gi}}
`, volume, namespace, claim, node, mode))
	eventually(t, time.Minute, "claim "+claim+" Bound", func() error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: claim}, pvc); err != nil {
			return err
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return fmt.Errorf("claim %s is %q", claim, pvc.Status.Phase)
		}
		return nil
	})
}

// TestAClaimDeliversTheWeights: a ModelArtifact whose source is a PersistentVolumeClaim resolves
// without any hub; a deployment naming it runs its replicas with the claim mounted read-only at
// /var/lib/gpustack/model (the artifact's path as subPath), the engine serving that path under
// spec.model.name, and status.model reporting the artifact and delivery PVC. The claim's volume is
// a local PersistentVolume that only the test's own node can reach: its required node affinity is ANDed into
// each Pod's own when the Pod is created, so every replica lands there.
//
// WeightsReady reads the Pods' PodReadyToStartContainers condition, which a kubelet sets once the
// sandbox and the volumes are up; KWOK's fast pod-ready stage does not set it (it writes
// Initialized, Ready and ContainersReady only). So the running Pods first report
// False/WeightsNotMounted, which is what a real kubelet's Pods report until their volumes mount;
// the test then plays the kubelet's part and sets the condition, and WeightsReady turns
// True/Mounted.
func TestAClaimDeliversTheWeights(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const name, artifact, claim, subPath = "pvc", "weights-claim", "weights", "Qwen3-8B"
	ns, volume, node := ownName(t, "ns"), ownName(t, "weights"), ownNode(t, ctx, "NVIDIA-A10G")
	applyCluster(t, ctx, ns)
	queueOnNode(t, ctx, ownName(t, "queue"), a10gEntrance, ns, node, 8)
	localClaim(t, ctx, ns, claim, volume, node, corev1.ReadOnlyMany)
	kubectlApply(t, fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  source:
    persistentVolumeClaim: {claimName: %[3]s, path: %[4]s}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %[5]s, namespace: %[2]s}
spec:
  model:
    name: Qwen/Qwen3-8B
    artifactRef: {name: %[1]s}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 2, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, artifact, ns, claim, subPath, name))
	eventually(t, 30*time.Second, "the claim's artifact Resolved without a hub", func() error {
		return artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactResolved, metav1.ConditionTrue, workerv1.ReasonArtifactResolved)
	})
	running := runningPods(t, ctx, ns, name, "server", 2)
	for _, p := range running {
		if p.Spec.NodeName != node {
			t.Errorf("Pod %s runs on %s; the claim's volume allows only %s", p.Name, p.Spec.NodeName, node)
		}
		if !requiresHostname(p, node) {
			t.Errorf("Pod %s was created without the volume's node affinity: %+v", p.Name, p.Spec.Affinity)
		}
		v := volumeOf(p, weightsVolume)
		if v == nil || v.PersistentVolumeClaim == nil || v.PersistentVolumeClaim.ClaimName != claim || !v.PersistentVolumeClaim.ReadOnly {
			t.Errorf("Pod %s: volume %s is %+v, want claim %s read-only", p.Name, weightsVolume, v, claim)
		}
		servesMountedWeights(t, p, subPath, "PVC")
	}
	statusModelBecomes(t, ctx, ns, name, workerv1.ModelStatus{Artifact: artifact, Delivery: "PVC"})

	// KWOK runs the Pods without PodReadyToStartContainers: the weights count as not mounted.
	eventually(t, 30*time.Second, "WeightsReady False/WeightsNotMounted on KWOK's Pods", func() error {
		return conditionIs(ctx, ns, name, "WeightsReady", "False", "WeightsNotMounted")
	})
	// The kubelet's part: the sandbox is up and the volumes are mounted.
	setReadyToStartContainers(t, ctx, running)
	eventually(t, 30*time.Second, "WeightsReady True/Mounted", func() error {
		return conditionIs(ctx, ns, name, "WeightsReady", "True", "Mounted")
	})
}

// TestUnresolvedWeightsHoldTheRollout: spec.model (artifactRef with it) is frozen, so a deployment
// cannot be edited onto other weights; what holds a rollout is a deployment whose artifact is not
// resolved. The mdplane-settings EnvironmentConfig points the Hugging Face endpoint at the stack's
// local hub, which the controllers reach from their Pods and which does not know the repository yet:
//
//  1. Blocked: the artifact is Resolved False/RevisionNotFound, the deployment creates no Pod and no
//     Workload, WeightsReady is False/ArtifactNotResolved, ReplicasUpToDate False/
//     RolloutHeldByWeights, and no status.model is written.
//  2. Resumed: once the hub serves the repository, the resolver asks again after
//     --model-artifact-retry-interval (5 s on the stack), and both replicas are created and run
//     under Engine delivery: the engine downloads the repository at the resolved commit
//     (--revision) from the Setting's endpoint (HF_ENDPOINT) into its cache volume, serving it under
//     spec.model.name; status.model pins the commit and manifest digest; WeightsReady is
//     True/Downloaded.
//  3. Untouched: when the hub then fails with 500 on revalidation (due after the Setting
//     model-artifact-revalidate-interval, 1m here, its least), the artifact turns Degraded True/
//     SourceUnavailable while Resolved stays True with the same resolution, and both running Pods
//     are kept, the deployment still reporting its weights ready.
func TestUnresolvedWeightsHoldTheRollout(t *testing.T) {
	// Parallel although it writes the cluster-wide settings: only the Hugging Face endpoint, which only
	// the Pods of an Engine-delivered Hugging Face artifact read (no other test has one), and the
	// revalidate interval, which only changes how often a resolved artifact is asked again.
	parallelWaiting(t, "waits a minute for the artifact's revalidation, the Setting's least interval")
	needsOwnStack(t, "sets what the stack's model hub serves")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, artifact, repo = "hub", "tiny-chat", "acme/tiny-chat"
	hub := stack.Hub // the stack's local hub: the public hubs are not reachable here
	if !onThisMachine(t, stack.HubURL) {
		t.Fatalf("the local hub listens at %s, not on this machine", stack.HubURL)
	}
	applyCluster(t, ctx, ns)
	queue(t, ctx, "weights-hub", a10gEntrance, ns, 8)
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		// The artifact before the Settings and the hub: left behind, a degraded artifact would be
		// retried against the default endpoint. Being deleted, it is not resolved again.
		if _, err := stack.Kubectl("delete", "modelartifacts", "--all", "-n", ns, "--wait=false"); err != nil {
			t.Error(err)
		}
		if _, err := stack.Kubectl("delete", "environmentconfig", "mdplane-settings", "--ignore-not-found"); err != nil {
			t.Error(err)
		}
	})
	kubectlApply(t, fmt.Sprintf(`apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata: {name: mdplane-settings}
data:
  model-artifact-huggingface-endpoint: %q
  model-artifact-revalidate-interval: 1m
`, stack.HubURL))
	kubectlApply(t, fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  source:
    huggingFace: {repository: %[3]s, revision: main}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %[4]s, namespace: %[2]s}
spec:
  model:
    name: tiny-chat
    artifactRef: {name: %[1]s}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 2, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, artifact, ns, repo, name))

	// 1. Blocked.
	eventually(t, time.Minute, "the rollout held by the unresolved artifact", func() error {
		if err := artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactResolved, metav1.ConditionFalse, workerv1.ReasonRevisionNotFound); err != nil {
			return err
		}
		if err := conditionIs(ctx, ns, name, "WeightsReady", "False", "ArtifactNotResolved"); err != nil {
			return err
		}
		return conditionIs(ctx, ns, name, "ReplicasUpToDate", "False", "RolloutHeldByWeights")
	})
	if !slices.ContainsFunc(hub.Requests(), func(uri string) bool { return strings.HasPrefix(uri, "/api/models/"+repo+"/revision/main") }) {
		t.Errorf("the resolver never asked the local hub; it served %q", hub.Requests())
	}
	// Held, not merely slow: through a render the nudge asks for, nothing is created.
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
	if md, err := modelDeployment(ctx, ns, name); err != nil {
		t.Fatal(err)
	} else if md.Status.Model != nil {
		t.Errorf("status.model is %+v before the artifact resolved", md.Status.Model)
	}

	// 2. Resumed once the hub serves the repository.
	commit := hubtest.CommitID(repo + "@1")
	hub.Put(repo, commit, []hubtest.File{
		{Path: "config.json", Size: 700},
		{Path: "model.safetensors", Size: 3 << 30, LFS: true},
		{Path: "tokenizer.json", Size: 7 << 20},
	}, "main")
	served := time.Now()
	eventually(t, 30*time.Second, "the artifact Resolved", func() error {
		return artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactResolved, metav1.ConditionTrue, workerv1.ReasonArtifactResolved)
	})
	t.Logf("resolved %s after the hub served it", time.Since(served).Round(time.Second))
	running := runningPods(t, ctx, ns, name, "server", 2)
	t.Logf("both replicas ran %s after the hub served it", time.Since(served).Round(time.Second))
	a, err := modelArtifact(ctx, ns, artifact)
	if err != nil {
		t.Fatal(err)
	}
	resolved := a.Status.Resolved
	if resolved == nil || resolved.Revision != commit || resolved.FileCount != 3 {
		t.Fatalf("status.resolved is %+v, want commit %s and 3 files", resolved, commit)
	}
	for _, p := range running {
		main := container(p, naming.MainContainer)
		if main == nil {
			t.Fatalf("Pod %s has no %s container", p.Name, naming.MainContainer)
		}
		if got := modelArgument(&p); got != repo {
			t.Errorf("Pod %s serves model %q, want the repository %s: %s", p.Name, got, repo, argsOf(&p))
		}
		if got := flagValue(&p, "--revision"); got != commit {
			t.Errorf("Pod %s: --revision %q, want the resolved commit %s", p.Name, got, commit)
		}
		if got := flagValue(&p, "--served-model-name"); got != "tiny-chat" {
			t.Errorf("Pod %s: --served-model-name %q, want spec.model.name", p.Name, got)
		}
		if v, _ := envOf(main, "HF_ENDPOINT"); v != stack.HubURL {
			t.Errorf("Pod %s: HF_ENDPOINT %q, want the Setting's %s", p.Name, v, stack.HubURL)
		}
		if v := volumeOf(p, cacheVolume); v == nil || v.EmptyDir == nil {
			t.Errorf("Pod %s has no emptyDir %s for the engine's download: %+v", p.Name, cacheVolume, v)
		}
		if volumeOf(p, weightsVolume) != nil {
			t.Errorf("Pod %s mounts %s under Engine delivery", p.Name, weightsVolume)
		}
	}
	eventually(t, 30*time.Second, "status.model pinned and WeightsReady True/Downloaded", func() error {
		md, err := modelDeployment(ctx, ns, name)
		if err != nil {
			return err
		}
		want := workerv1.ModelStatus{Artifact: artifact, Revision: commit, ManifestDigest: resolved.ManifestDigest, Delivery: "Engine"}
		if md.Status.Model == nil || *md.Status.Model != want {
			return fmt.Errorf("status.model is %+v, want %+v", md.Status.Model, want)
		}
		return conditionIs(ctx, ns, name, "WeightsReady", "True", "Downloaded")
	})

	// 3. A failing hub degrades the artifact and touches no running replica.
	hub.Fail(repo, http.StatusInternalServerError)
	eventually(t, 90*time.Second, "the artifact Degraded on revalidation", func() error {
		return artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactDegraded, metav1.ConditionTrue, workerv1.ReasonSourceUnavailable)
	})
	t.Logf("degraded %s after the hub served it", time.Since(served).Round(time.Second))
	if err := artifactConditionIs(ctx, ns, artifact, workerv1.ArtifactResolved, metav1.ConditionTrue, workerv1.ReasonArtifactResolved); err != nil {
		t.Error(err)
	}
	if a, err := modelArtifact(ctx, ns, artifact); err != nil {
		t.Fatal(err)
	} else if a.Status.Resolved == nil || a.Status.Resolved.Revision != commit || a.Status.Resolved.ManifestDigest != resolved.ManifestDigest {
		t.Errorf("a failed revalidation moved status.resolved from %+v to %+v", resolved, a.Status.Resolved)
	}
	// A render that reads the degraded artifact must leave the Pods be.
	nudge(t, ns, name)
	time.Sleep(6 * time.Second)
	now := runningPods(t, ctx, ns, name, "server", 2)
	uids := func(ps []corev1.Pod) []types.UID {
		out := make([]types.UID, 0, len(ps))
		for _, p := range ps {
			out = append(out, p.UID)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(uids(now), uids(running)) {
		t.Errorf("the running replicas changed while the artifact was degraded: %v, then %v", uids(running), uids(now))
	}
	if err := conditionIs(ctx, ns, name, "WeightsReady", "True", "Downloaded"); err != nil {
		t.Error(err)
	}
	hub.Fail(repo, 0)
}

// TestAHeldScaleUpLeavesTheRunningReplica: a rollout held by the weights never touches what runs.
// A deployment on a ReadWriteOnce claim runs one replica; scaling it to two would mount the claim
// in two Pods, which its access mode forbids, so the deployment is blocked (WeightsReady
// False/AccessModeConflict, ReplicasUpToDate False/RolloutHeldByWeights): no second Pod or Workload
// is created, and the running replica keeps its Pod. Scaling back to one lifts the hold, and the
// replica that ran throughout is up to date, still the same Pod.
func TestAHeldScaleUpLeavesTheRunningReplica(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	const name, artifact, claim = "rwo", "weights-rwo", "weights"
	ns, volume, node := ownName(t, "ns"), ownName(t, "weights"), ownNode(t, ctx, "NVIDIA-A10G")
	applyCluster(t, ctx, ns)
	queueOnNode(t, ctx, ownName(t, "queue"), a10gEntrance, ns, node, 8)
	localClaim(t, ctx, ns, claim, volume, node, corev1.ReadWriteOnce)
	kubectlApply(t, fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelArtifact
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  source:
    persistentVolumeClaim: {claimName: %[3]s}
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
    - {name: server, replicas: 1, instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}}
`, artifact, ns, claim, name))
	before := runningPods(t, ctx, ns, name, "server", 1)[0]
	if m := mountOf(container(before, naming.MainContainer), weightsVolume); m == nil || m.SubPath != "" || !m.ReadOnly {
		t.Errorf("Pod %s mounts %+v, want the whole claim read-only", before.Name, m)
	}
	eventually(t, 30*time.Second, "the replica up to date", func() error {
		return conditionIs(ctx, ns, name, "ReplicasUpToDate", "True", "UpToDate")
	})

	patchReplicas(t, ns, name, 2)
	eventually(t, 30*time.Second, "the scale-up held by the claim's access mode", func() error {
		if err := conditionIs(ctx, ns, name, "WeightsReady", "False", "AccessModeConflict"); err != nil {
			return err
		}
		return conditionIs(ctx, ns, name, "ReplicasUpToDate", "False", "RolloutHeldByWeights")
	})
	// Held, not merely slow: through a render the nudge asks for, nothing is added or replaced.
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
		if len(ps) != 1 || ps[0].UID != before.UID || ps[0].DeletionTimestamp != nil || len(wls) != 1 {
			t.Fatalf("a held scale-up has %d Pods and %d Workloads; want only the running Pod %s", len(ps), len(wls), before.Name)
		}
		time.Sleep(time.Second)
	}

	patchReplicas(t, ns, name, 1)
	// Both conditions are awaited together: Crossplane applies the composite's status with the
	// conditions it read before it writes the function's, so a reconcile that read an older copy
	// can show the held ones again for a moment after a newer render lifted them.
	eventually(t, editRendered, "the hold lifted and the replica up to date", func() error {
		if err := conditionIs(ctx, ns, name, "ReplicasUpToDate", "True", "UpToDate"); err != nil {
			return err
		}
		c, err := deploymentConditionOf(ctx, ns, name, "WeightsReady")
		if err != nil {
			return err
		}
		if c.Reason == "AccessModeConflict" {
			return fmt.Errorf("WeightsReady still reports %s/%s after the scale-down: %s", c.Status, c.Reason, c.Message)
		}
		return nil
	})
	if after := runningPods(t, ctx, ns, name, "server", 1)[0]; after.UID != before.UID {
		t.Errorf("the running replica %s was replaced by %s", before.Name, after.Name)
	}
}

// servesMountedWeights checks a Pod of a mounted delivery (PVC, Image): the main container mounts
// the weights read-only at their path (with subPath, "" for none), serves that path under
// spec.model.name, and pins no hub revision.
func servesMountedWeights(t *testing.T, p corev1.Pod, subPath, delivery string) {
	t.Helper()
	main := container(p, naming.MainContainer)
	if main == nil {
		t.Fatalf("Pod %s has no %s container", p.Name, naming.MainContainer)
	}
	if m := mountOf(main, weightsVolume); m == nil || m.MountPath != weightsPath || !m.ReadOnly || m.SubPath != subPath {
		t.Errorf("Pod %s mounts %+v, want %s read-only at %s with subPath %q", p.Name, m, weightsVolume, weightsPath, subPath)
	}
	if got := modelArgument(&p); got != weightsPath {
		t.Errorf("Pod %s serves model %q, want the mount path %s: %s", p.Name, got, weightsPath, argsOf(&p))
	}
	if got := flagValue(&p, "--served-model-name"); got != "Qwen/Qwen3-8B" {
		t.Errorf("Pod %s: --served-model-name %q, want spec.model.name: %s", p.Name, got, argsOf(&p))
	}
	if strings.Contains(argsOf(&p), "--revision") {
		t.Errorf("Pod %s passes a revision under %s delivery: %s", p.Name, delivery, argsOf(&p))
	}
}

// onThisMachine reports whether a URL's host is an address of this machine's own interfaces: the
// stack's servers listen where the real node's Pods reach them, never off the machine.
func onThisMachine(t *testing.T, raw string) bool {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.String() == u.Hostname() {
			return true
		}
	}
	return false
}
