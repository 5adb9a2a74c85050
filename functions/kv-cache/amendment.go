package kvcache

import (
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/naming"
)

// Amendment is what the cache step adds to one role's Pod template.
type Amendment struct {
	// Args go before the user's extraArgs, right after the engine's launch line.
	Args []string
	// Env are owned variables, then defaulted ones the user does not set.
	Env []corev1.EnvVar
	// Ports are container ports of listeners the cache client opens.
	Ports       []corev1.ContainerPort
	Annotations map[string]string
	Volumes     []corev1.Volume
	Mounts      []corev1.VolumeMount
}

// Apply amends a role's Pod template: owned and defaulted variables go before the ones already
// rendered, arguments right after the launch line.
func Apply(t *corev1.PodTemplateSpec, a Amendment) {
	for k, v := range a.Annotations {
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations[k] = v
	}
	t.Spec.Volumes = append(t.Spec.Volumes, a.Volumes...)
	for i := range t.Spec.Containers {
		c := &t.Spec.Containers[i]
		if c.Name != naming.MainContainer {
			continue
		}
		c.Args = append(slices.Clone(a.Args), c.Args...)
		c.Env = append(slices.Clone(a.Env), c.Env...)
		c.Ports = append(c.Ports, a.Ports...)
		c.VolumeMounts = append(c.VolumeMounts, a.Mounts...)
	}
}
