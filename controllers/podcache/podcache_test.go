package podcache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// member is a rendered member Pod as the API server holds it, with a field of each kind Slim
// keeps or drops.
func member() *corev1.Pod {
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "vllm/vllm-openai:v0.25.1", Command: []string{"vllm"}, Args: []string{"serve", "m"},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
			Env:     []corev1.EnvVar{{Name: "HF_HOME", Value: "/cache"}},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{}}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			VolumeMounts:   []corev1.VolumeMount{{Name: "model", MountPath: "/models"}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
			LivenessProbe:  &corev1.Probe{}, StartupProbe: &corev1.Probe{},
			Lifecycle:       &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sleep", "5"}}}},
			SecurityContext: &corev1.SecurityContext{},
		}
	}
	always := corev1.ContainerRestartPolicyAlways
	init := container("wait-for-worker")
	init.RestartPolicy = &always
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "m-0", Namespace: "team-a", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"app": "a"}, Annotations: map[string]string{"a": "b"},
			OwnerReferences: []metav1.OwnerReference{{Name: "r", UID: "o"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler"}}},
		Spec: corev1.PodSpec{NodeName: "n1", Hostname: "m-0", Subdomain: "r",
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "kueue.x-k8s.io/admission"}},
			Containers:      []corev1.Container{container("main")}, InitContainers: []corev1.Container{init},
			Volumes: []corev1.Volume{{Name: "model"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func TestSlimKeepsWhatTheControllersRead(t *testing.T) {
	got, err := Slim(member())
	require.NoError(t, err)
	pod := got.(*corev1.Pod)
	want := member()
	assert.Equal(t, want.Name, pod.Name)
	assert.Equal(t, want.Labels, pod.Labels)
	assert.Equal(t, want.Annotations, pod.Annotations)
	assert.Equal(t, want.OwnerReferences, pod.OwnerReferences)
	assert.Equal(t, want.ResourceVersion, pod.ResourceVersion)
	assert.Equal(t, want.Status, pod.Status, "the status whole")
	assert.Equal(t, want.Spec.NodeName, pod.Spec.NodeName)
	assert.Equal(t, want.Spec.SchedulingGates, pod.Spec.SchedulingGates)
	assert.Equal(t, []string{want.Spec.Hostname, want.Spec.Subdomain}, []string{pod.Spec.Hostname, pod.Spec.Subdomain})
	for i, c := range []corev1.Container{pod.Spec.Containers[0], pod.Spec.InitContainers[0]} {
		w := []corev1.Container{want.Spec.Containers[0], want.Spec.InitContainers[0]}[i]
		assert.Equal(t, corev1.Container{Name: w.Name, Image: w.Image, Command: w.Command, Args: w.Args, Ports: w.Ports,
			Resources: corev1.ResourceRequirements{Requests: w.Resources.Requests}, RestartPolicy: w.RestartPolicy}, c,
			"a container's name, image, command line, ports, resource requests and restart policy")
	}
}

func TestSlimDropsWhatNoControllerReads(t *testing.T) {
	got, err := Slim(member())
	require.NoError(t, err)
	pod := got.(*corev1.Pod)
	assert.Nil(t, pod.ManagedFields, "managed fields")
	assert.Nil(t, pod.Spec.Volumes, "volumes")
	for _, c := range append(pod.Spec.Containers, pod.Spec.InitContainers...) {
		assert.Nil(t, c.Env, c.Name)
		assert.Nil(t, c.EnvFrom, c.Name)
		assert.Nil(t, c.Resources.Limits, c.Name)
		assert.Nil(t, c.Resources.Claims, c.Name)
		assert.Nil(t, c.VolumeMounts, c.Name)
		assert.Nil(t, c.ReadinessProbe, c.Name)
		assert.Nil(t, c.LivenessProbe, c.Name)
		assert.Nil(t, c.StartupProbe, c.Name)
		assert.Nil(t, c.Lifecycle, c.Name)
		assert.Nil(t, c.SecurityContext, c.Name)
	}
}

func TestSlimLeavesOtherKindsAlone(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	got, err := Slim(node)
	require.NoError(t, err)
	assert.Same(t, node, got)
	assert.NotNil(t, node.ManagedFields)
}
