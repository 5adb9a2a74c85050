package inventory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func asking(name, gpu string) corev1.Container {
	c := corev1.Container{Name: name}
	if gpu != "" {
		c.Resources.Requests = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpu)}
	}
	return c
}

func sidecar(c corev1.Container) corev1.Container {
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func TestPodRequest(t *testing.T) {
	limited := corev1.Container{Name: "limited", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}
	cases := []struct {
		rule string
		spec corev1.PodSpec
		want int64
	}{
		{"the containers' requests add up", corev1.PodSpec{Containers: []corev1.Container{asking("a", "2"), asking("b", "1"), asking("c", "")}}, 3},
		{"a request stated only as a limit is the limit, as the API server defaults it", corev1.PodSpec{Containers: []corev1.Container{limited}}, 2},
		{"an init container larger than the containers sets the peak", corev1.PodSpec{InitContainers: []corev1.Container{asking("init", "4")},
			Containers: []corev1.Container{asking("a", "2")}}, 4},
		{"init containers run one at a time: the largest counts, not their sum", corev1.PodSpec{InitContainers: []corev1.Container{asking("i1", "1"), asking("i2", "1")},
			Containers: []corev1.Container{asking("a", "1")}}, 1},
		{"a sidecar runs beside the containers", corev1.PodSpec{InitContainers: []corev1.Container{sidecar(asking("s", "1"))},
			Containers: []corev1.Container{asking("a", "2")}}, 3},
		{"an init container after a sidecar runs beside it", corev1.PodSpec{InitContainers: []corev1.Container{sidecar(asking("s", "1")), asking("init", "4")},
			Containers: []corev1.Container{asking("a", "2")}}, 5},
		{"an init container before a sidecar runs alone", corev1.PodSpec{InitContainers: []corev1.Container{asking("init", "4"), sidecar(asking("s", "1"))},
			Containers: []corev1.Container{asking("a", "2")}}, 4},
		{"the Pod's overhead is added", corev1.PodSpec{Containers: []corev1.Container{asking("a", "2")},
			Overhead: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}, 3},
		{"a Pod asking nothing of the resource holds none", corev1.PodSpec{Containers: []corev1.Container{asking("a", "")}}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := PodRequest(&corev1.Pod{Spec: tc.spec}, "nvidia.com/gpu")
			assert.Equal(t, tc.want, got.Value())
		})
	}
}
