package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
	"github.com/mdplane/mdplane/internal/replicas"
)

const commit = "a09a35458c702b33eeacc393d103063234e8bc28"

// artifactOf is a resolved ModelArtifact of a source.
func artifactOf(src workerv1.ModelArtifactSource, edits ...func(*workerv1.ModelArtifact)) *workerv1.ModelArtifact {
	a := &workerv1.ModelArtifact{
		ObjectMeta: metav1.ObjectMeta{Name: "weights", Namespace: "team-a", UID: "6d1c0a52-0000-4000-8000-000000000001"},
		Spec:       workerv1.ModelArtifactSpec{Source: src},
		Status: workerv1.ModelArtifactStatus{
			Resolved:   &workerv1.ResolvedArtifact{SizeBytes: 100 << 30},
			Conditions: []metav1.Condition{{Type: "Resolved", Status: metav1.ConditionTrue, Reason: "Resolved"}},
		},
	}
	if src.HuggingFace != nil || src.ModelScope != nil {
		a.Status.Resolved.Revision, a.Status.Resolved.ManifestDigest = commit, "sha256:5e1f0c2b9d8a7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d3e2f"
	}
	for _, e := range edits {
		e(a)
	}
	return a
}

var (
	hf    = workerv1.ModelArtifactSource{HuggingFace: &workerv1.HubSource{Repository: "Qwen/Qwen3-32B", SecretRef: &workerv1.LocalReference{Name: "hf"}}}
	claim = workerv1.ModelArtifactSource{PersistentVolumeClaim: &workerv1.ClaimSource{ClaimName: "w"}}
	image = workerv1.ModelArtifactSource{Image: &workerv1.ImageSource{Reference: "r.example.com/m@sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}}
)

func deploymentWith(replicas int32) *workerv1.ModelDeployment {
	role := serverRole()
	role.Replicas = replicas
	return &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen", Namespace: "team-a"},
		Spec: workerv1.ModelDeploymentSpec{Model: workerv1.ModelDeploymentModel{Name: "qwen3", ArtifactRef: &workerv1.LocalReference{Name: "weights"}},
			Roles: []workerv1.ModelDeploymentRole{role}}}
}

func pvc(phase corev1.PersistentVolumeClaimPhase, class string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes, VolumeName: "pv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: phase}}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	return c
}

func storageClass(mode storagev1.VolumeBindingMode, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{Provisioner: provisioner, VolumeBindingMode: ptr.To(mode)}
}

// TestChooseDelivery has one row per rule of the delivery choice, each with its near miss.
func TestChooseDelivery(t *testing.T) {
	node := renderroles.DefaultDeliverySettings()
	node.Mode = renderroles.DeliveryNode
	engine := renderroles.DefaultDeliverySettings()
	wffc := storageClass(storagev1.VolumeBindingWaitForFirstConsumer, "ebs.csi.aws.com")
	cases := []struct {
		rule     string
		md       *workerv1.ModelDeployment
		objs     renderroles.DeliveryObjects
		settings renderroles.DeliverySettings
		mode     renderroles.DeliveryMode
		blocked  string
	}{
		{"artifact missing", deploymentWith(1), renderroles.DeliveryObjects{}, engine, "", renderroles.ArtifactNotFound},
		{"artifact not resolved yet: no mode", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf, func(a *workerv1.ModelArtifact) { a.Status.Resolved = nil })}, engine, "", renderroles.ArtifactNotResolved},
		{"Resolved False: the mode is known, blocked", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf, func(a *workerv1.ModelArtifact) {
			a.Status.Conditions[0].Status, a.Status.Conditions[0].Reason = metav1.ConditionFalse, "AccessDenied"
		})}, engine, renderroles.DeliveryEngine, renderroles.ArtifactNotResolved},
		{"hub under Engine", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf)}, engine, renderroles.DeliveryEngine, ""},
		{"hub under Node with the CSIDriver", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf), CSIDriver: true}, node, renderroles.DeliveryNode, ""},
		{"hub under Node without the CSIDriver", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf)}, node, renderroles.DeliveryNode, renderroles.NodeDeliveryUnavailable},
		{"Engine with allow patterns", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf, func(a *workerv1.ModelArtifact) { a.Spec.AllowPatterns = []string{"*.json"} })}, engine, renderroles.DeliveryEngine, renderroles.FilterNeedsNodeDelivery},
		{"Engine with ignore patterns", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf, func(a *workerv1.ModelArtifact) { a.Spec.IgnorePatterns = []string{"*.bin"} })}, engine, renderroles.DeliveryEngine, renderroles.FilterNeedsNodeDelivery},
		{"near miss: Node applies the patterns", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf, func(a *workerv1.ModelArtifact) { a.Spec.AllowPatterns = []string{"*.json"} }), CSIDriver: true}, node, renderroles.DeliveryNode, ""},
		{"Engine with an expected digest", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf, func(a *workerv1.ModelArtifact) { a.Spec.ExpectedDigest = "sha256:00" })}, engine, renderroles.DeliveryEngine, renderroles.AnchorNeedsNodeDelivery},
		{"an image is Image whatever the Setting", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(image)}, node, renderroles.DeliveryImage, ""},
		{"a claim that does not exist", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim)}, node, renderroles.DeliveryPVC, renderroles.ArtifactNotResolved},
		{"a bound ReadWriteOnce claim under one Pod", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimBound, "", corev1.ReadWriteOnce)}, engine, renderroles.DeliveryPVC, ""},
		{"a ReadWriteOnce claim under two Pods", deploymentWith(2), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimBound, "", corev1.ReadWriteOnce)}, engine, renderroles.DeliveryPVC, renderroles.AccessModeConflict},
		{"near miss: ReadWriteMany under two Pods", deploymentWith(2), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimBound, "", corev1.ReadWriteOnce, corev1.ReadWriteMany)}, engine, renderroles.DeliveryPVC, ""},
		{"a Pending claim under WaitForFirstConsumer with a provisioner proceeds", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimPending, "wffc", corev1.ReadOnlyMany), StorageClass: wffc}, engine, renderroles.DeliveryPVC, ""},
		{"a Pending claim under WaitForFirstConsumer without a provisioner", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimPending, "local", corev1.ReadOnlyMany),
			StorageClass: storageClass(storagev1.VolumeBindingWaitForFirstConsumer, "kubernetes.io/no-provisioner")}, engine, renderroles.DeliveryPVC, renderroles.ClaimNotBound},
		{"a Pending claim under Immediate binding", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimPending, "now", corev1.ReadOnlyMany),
			StorageClass: storageClass(storagev1.VolumeBindingImmediate, "ebs.csi.aws.com")}, engine, renderroles.DeliveryPVC, renderroles.ClaimNotBound},
		{"a Lost claim", deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimLost, "", corev1.ReadOnlyMany)}, engine, renderroles.DeliveryPVC, renderroles.ClaimNotBound},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			d := renderroles.ChooseDelivery(tc.md, tc.objs, tc.settings)
			require.NotNil(t, d)
			assert.Equal(t, tc.mode, d.Mode)
			assert.Equal(t, tc.blocked, d.Blocked, d.Message)
			if tc.blocked != "" {
				assert.Contains(t, d.Held(), "RolloutHeldByWeights: "+tc.blocked+": ")
			}
			if tc.mode == "" {
				assert.Nil(t, d.ModelStatus(), "no status.model before the first resolution")
			} else {
				assert.Equal(t, string(tc.mode), d.ModelStatus().Delivery)
			}
		})
	}
	assert.Nil(t, renderroles.ChooseDelivery(&workerv1.ModelDeployment{}, renderroles.DeliveryObjects{}, engine), "no artifactRef: no delivery")
}

// renderWith renders the server role, and a take-over role, under a delivery.
func renderWith(t *testing.T, e workerv1.Engine, d *renderroles.Delivery, role workerv1.ModelDeploymentRole) corev1.PodSpec {
	t.Helper()
	s := spec(role)
	s.Engine.Name = e
	s.Model.Name = "qwen3"
	r, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: s, Role: role, InstanceType: h100(), Artifact: d.Artifact, Delivery: d})
	require.NoError(t, err)
	return r.Template.Spec
}

func volumeNamed(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

func envOf(c corev1.Container) map[string]string {
	out := map[string]string{}
	for _, e := range c.Env {
		out[e.Name] = e.Value
	}
	return out
}

// TestEngineDelivery: the owned and defaulted variables and their merge order, the revision on the
// launch line, the cache and the ephemeral-storage limit.
func TestEngineDelivery(t *testing.T) {
	settings := renderroles.DefaultDeliverySettings()
	settings.HTTPSProxy, settings.NoProxy = "http://proxy:3128", "10.0.0.0/8"
	d := renderroles.ChooseDelivery(deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf)}, settings)
	role := serverRole()
	role.Env = []workerv1.ModelDeploymentEnvVar{{Name: "HF_ENDPOINT", Value: "https://mirror"}, {Name: "HTTPS_PROXY", Value: "http://mine:3128"}, {Name: "FOO", Value: "bar"}}
	pod := renderWith(t, workerv1.EngineVLLM, d, role)
	main := pod.Containers[0]
	assert.Equal(t, []string{"vllm", "serve", "Qwen/Qwen3-32B", "--revision", commit}, main.Command)
	assert.Equal(t, []string{"--served-model-name", "qwen3"}, main.Args[:2])
	names := []string{}
	for _, e := range main.Env {
		names = append(names, e.Name)
	}
	assert.Equal(t, []string{"HF_HOME", "HF_ENDPOINT", "HF_TOKEN", "VLLM_CACHE_ROOT", "NO_PROXY", "HTTPS_PROXY", "FOO"}, names,
		"owned first, then defaulted unless the user sets them, then the user's less the owned names")
	env := envOf(main)
	assert.Equal(t, "https://huggingface.co", env["HF_ENDPOINT"], "a user HF_ENDPOINT is ignored")
	assert.Equal(t, "http://mine:3128", env["HTTPS_PROXY"], "the role's HTTPS_PROXY wins")
	assert.Equal(t, &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}, main.Env[2].ValueFrom.SecretKeyRef)
	cache := volumeNamed(pod, "gpustack-model-cache")
	require.NotNil(t, cache)
	assert.Equal(t, "110Gi", cache.EmptyDir.SizeLimit.String())
	limit := main.Resources.Limits[corev1.ResourceEphemeralStorage]
	request := main.Resources.Requests[corev1.ResourceEphemeralStorage]
	assert.Equal(t, "125Gi", limit.String(), "15Gi + 110Gi")
	assert.Equal(t, "15Gi", request.String(), "the request is unchanged")

	takeover := serverRole()
	takeover.Command = []string{"vllm", "serve", "Qwen/Qwen3-32B"}
	tp := renderWith(t, workerv1.EngineVLLM, d, takeover)
	assert.Nil(t, volumeNamed(tp, "gpustack-model-cache"), "a take-over role gets nothing under Engine delivery")
	assert.NotContains(t, envOf(tp.Containers[0]), "HF_HOME")

	ms := artifactOf(workerv1.ModelArtifactSource{ModelScope: &workerv1.HubSource{Repository: "Qwen/Qwen3-32B"}}, func(a *workerv1.ModelArtifact) { a.Status.Resolved.SizeBytes = 1 << 20 })
	d = renderroles.ChooseDelivery(deploymentWith(1), renderroles.DeliveryObjects{Artifact: ms}, renderroles.DefaultDeliverySettings())
	pod = renderWith(t, workerv1.EngineVLLM, d, serverRole())
	env = envOf(pod.Containers[0])
	assert.Equal(t, "www.modelscope.cn", env["MODELSCOPE_DOMAIN"])
	assert.Equal(t, "true", env["VLLM_USE_MODELSCOPE"])
	assert.NotContains(t, env, "SGLANG_USE_MODELSCOPE")
	assert.NotContains(t, env, "MODELSCOPE_API_TOKEN", "no secretRef")
	assert.NotContains(t, env, "HTTPS_PROXY", "blank Settings default nothing")
	assert.Equal(t, "1025Mi", volumeNamed(pod, "gpustack-model-cache").EmptyDir.SizeLimit.String())
}

// TestMountedDeliveries: Node's CSI volume only while the driver exists, and the mounts a take-over
// role gets; a bound PV's affinity reaches the Pods at creation, crossed into theirs.
func TestMountedDeliveries(t *testing.T) {
	node := renderroles.DefaultDeliverySettings()
	node.Mode = renderroles.DeliveryNode
	d := renderroles.ChooseDelivery(deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf), CSIDriver: true}, node)
	pod := renderWith(t, workerv1.EngineSGLang, d, serverRole())
	v := volumeNamed(pod, "gpustack-model")
	require.NotNil(t, v)
	assert.Equal(t, &corev1.CSIVolumeSource{Driver: "model.csi.gpustack.ai", ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{
		"artifact": "weights", "artifactUID": "6d1c0a52-0000-4000-8000-000000000001", "manifestDigest": d.Artifact.Status.Resolved.ManifestDigest,
	}, NodePublishSecretRef: &corev1.LocalObjectReference{Name: "hf"}}, v.CSI)
	assert.Equal(t, []string{"python3", "-m", "sglang.launch_server", "--model-path", "/var/lib/gpustack/model", "--enable-metrics"}, pod.Containers[0].Command, "no --revision off Engine delivery")
	assert.NotContains(t, envOf(pod.Containers[0]), "HF_TOKEN", "the token reaches the plugin through the kubelet")

	blocked := renderroles.ChooseDelivery(deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(hf)}, node)
	assert.Nil(t, volumeNamed(renderWith(t, workerv1.EngineSGLang, blocked, serverRole()), "gpustack-model"), "no CSI volume without its driver")

	takeover := serverRole()
	takeover.Command = []string{"python3", "-m", "sglang.launch_server", "--model-path", "/var/lib/gpustack/model"}
	for _, src := range []workerv1.ModelArtifactSource{claim, image} {
		objs := renderroles.DeliveryObjects{Artifact: artifactOf(src), Claim: pvc(corev1.ClaimBound, "", corev1.ReadOnlyMany)}
		tp := renderWith(t, workerv1.EngineSGLang, renderroles.ChooseDelivery(deploymentWith(1), objs, node), takeover)
		assert.NotNil(t, volumeNamed(tp, "gpustack-model"), "a take-over role gets the weights mount")
		assert.Contains(t, tp.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "gpustack-model", MountPath: "/var/lib/gpustack/model", ReadOnly: true})
	}

	zone := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	pv := &corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{zone}}}}}
	d = renderroles.ChooseDelivery(deploymentWith(1), renderroles.DeliveryObjects{Artifact: artifactOf(claim), Claim: pvc(corev1.ClaimBound, "", corev1.ReadOnlyMany), Volume: pv}, node)
	require.NotNil(t, d.NodeAffinity)
	gpu := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "gpu", Operator: corev1.NodeSelectorOpExists}}}
	cpu := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "cpu", Operator: corev1.NodeSelectorOpExists}}}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}}, Spec: corev1.PodSpec{
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{gpu, cpu}}}}}}
	replica := &v1alpha1.ModelReplica{Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "qwen", RoleName: "server", RequiredNodeAffinity: d.NodeAffinity}}
	pods, _ := replicas.Materialize(replica, &v1alpha1.RoleRevision{Size: 1, Template: tmpl})
	terms := pods[0].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	require.Len(t, terms, 2, "terms crossed: (gpu ∧ zone) ∨ (cpu ∧ zone)")
	assert.Equal(t, append(gpu.MatchExpressions, zone.MatchExpressions...), terms[0].MatchExpressions)
	assert.Equal(t, append(cpu.MatchExpressions, zone.MatchExpressions...), terms[1].MatchExpressions)
	assert.Len(t, tmpl.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions, 1, "the revision is not touched")
}

// TestWeightsCondition has one row per WeightsReady reason the render tells.
func TestWeightsCondition(t *testing.T) {
	engine := &renderroles.Delivery{Name: "w", Mode: renderroles.DeliveryEngine}
	pvc := &renderroles.Delivery{Name: "w", Mode: renderroles.DeliveryPVC}
	cases := []struct {
		rule   string
		d      *renderroles.Delivery
		pods   v1alpha1.MemberCounts
		status string
		reason string
	}{
		{"no artifact", nil, v1alpha1.MemberCounts{}, "True", "NotApplicable"},
		{"blocked", &renderroles.Delivery{Name: "w", Blocked: "ClaimNotBound", Message: "m"}, v1alpha1.MemberCounts{Live: 1, Started: 1, MainReady: 1}, "False", "ClaimNotBound"},
		{"Engine: a main container not Ready", engine, v1alpha1.MemberCounts{Live: 2, Started: 2, MainReady: 1}, "False", "Downloading"},
		{"Engine: every main container Ready", engine, v1alpha1.MemberCounts{Live: 2, Started: 2, MainReady: 2}, "True", "Downloaded"},
		{"PVC: a Pod not ready to start its containers", pvc, v1alpha1.MemberCounts{Live: 2, Started: 1}, "False", "WeightsNotMounted"},
		{"PVC: every Pod mounted, ready or not", pvc, v1alpha1.MemberCounts{Live: 2, Started: 2}, "True", "Mounted"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := renderroles.WeightsCondition(tc.d, tc.pods)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
		})
	}
}
