package podcache

import (
	corev1 "k8s.io/api/core/v1"
)

// Slim is the transform of the controllers' Pod cache. The controllers read a Pod's metadata, its
// status, its placement (node, gates, hostname and subdomain) and, of each container, its name,
// image, command line (the engine version the probe reads, the pairing document) and resource
// requests (what the inventory counts a bound Pod as holding of its node; the API server defaults a
// request from each limit, so the requests say it all); they never read its environment, limits,
// mounts, probes, hooks or security settings, nor the Pod's volumes and managed fields. A
// container's ports and restart policy are kept: small, and what tells a serving container and a
// sidecar apart. The dropped fields are most of a rendered member's spec, held for every Pod of
// every deployment: at 4,096 Pods the container fields alone were a fifth of the heap. No
// controller writes a cached Pod back whole (they patch Pods), so nothing dropped is sent back.
func Slim(o any) (any, error) {
	pod, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	pod.ManagedFields = nil
	pod.Spec.Volumes = nil
	pod.Spec.Containers = slimContainers(pod.Spec.Containers)
	pod.Spec.InitContainers = slimContainers(pod.Spec.InitContainers)
	return pod, nil
}

// slimContainers keeps of each container what the controllers read.
func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Command: c.Command, Args: c.Args, Ports: c.Ports,
			Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}, RestartPolicy: c.RestartPolicy}
	}
	return out
}
