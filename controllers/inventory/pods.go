package inventory

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// PodRequest is what a Pod holds of one resource on its node, as the scheduler counts it: the larger
// of its containers with its sidecars (init containers that restart Always, running beside them) and
// the peak of its other init containers, each beside the sidecars started before it; plus the Pod's
// overhead.
func PodRequest(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	var running, sidecars, initPeak resource.Quantity
	for i := range pod.Spec.Containers {
		running.Add(request(&pod.Spec.Containers[i], name))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		req := request(c, name)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars.Add(req)
			continue
		}
		req.Add(sidecars)
		if req.Cmp(initPeak) > 0 {
			initPeak = req
		}
	}
	running.Add(sidecars)
	if initPeak.Cmp(running) > 0 {
		running = initPeak
	}
	if q, ok := pod.Spec.Overhead[name]; ok {
		running.Add(q)
	}
	return running
}

// request is a container's request of the resource; its limit when it states none, as the API
// server defaults an extended resource's request from its limit.
func request(c *corev1.Container, name corev1.ResourceName) resource.Quantity {
	if q, ok := c.Resources.Requests[name]; ok {
		return q.DeepCopy()
	}
	if q, ok := c.Resources.Limits[name]; ok {
		return q.DeepCopy()
	}
	return resource.Quantity{}
}

// holds is true when a bound Pod holds its node's resources: until it has stopped (Succeeded or
// Failed), a terminating one too, whose devices are held until its containers stop (the scheduler
// counts it the same). A Pod not bound to a node is Kueue's to count, not the node's.
func holds(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}
