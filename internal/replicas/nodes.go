package replicas

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// LostNode names the first node, by member name, that a member of an instance stands on and that
// stopped reporting: its Ready condition not True, or the Node gone (nodes maps a name to nil).
// The member stays on the API server, its ordinal occupied, until Kubernetes removes it (the
// Node's deletion, or an out-of-service taint), so the replica waits for that; "" for none.
// Members that ended are not counted: nothing of them runs on the node.
func LostNode(members []*corev1.Pod, nodes map[string]*corev1.Node) string {
	sorted := slices.Clone(members)
	slices.SortFunc(sorted, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, p := range sorted {
		name := p.Spec.NodeName
		if name == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		node, known := nodes[name]
		if !known {
			continue
		}
		if node == nil {
			return fmt.Sprintf("node %s is gone; member %s stands on it until Kubernetes removes it", name, p.Name)
		}
		if why := nodeNotReady(node); why != "" {
			return fmt.Sprintf("node %s stopped reporting (%s); member %s stands on it until Kubernetes removes it: the Node's deletion or an out-of-service taint", name, why, p.Name)
		}
	}
	return ""
}

// nodeNotReady says how a node's Ready condition is not True, with since when and the node
// lifecycle controller's word; "" when it is True.
func nodeNotReady(node *corev1.Node) string {
	for _, c := range node.Status.Conditions {
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		why := fmt.Sprintf("Ready %s since %s", c.Status, c.LastTransitionTime.UTC().Format(time.RFC3339))
		if c.Message != "" {
			why += ": " + strings.TrimSuffix(c.Message, ".")
		}
		return why
	}
	return "no Ready condition"
}
