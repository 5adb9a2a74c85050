package members

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/controllers/index"
)

// Image delivery's placement: a Pod
// whose weights are an image volume prefers the Nodes that already hold the image, so the kubelet
// mounts it without pulling. Like the bound PV's required node affinity, it is applied when the Pod
// is created, outside the pod-spec-hash and the revision: which Nodes hold an image changes without
// the configuration changing, and must not roll anything.
const (
	// hostnameLabel is the label the preferred term selects Nodes by.
	hostnameLabel = "kubernetes.io/hostname"
	// maxPreferredNodes is the most Nodes the preferred term names.
	maxPreferredNodes = 16
	// preferredWeight is the preferred term's weight.
	preferredWeight = 100
)

// imageReference is the reference of a Pod's image weights volume (naming.ModelVolume), ""
// when its weights are not an image (no artifact, or another delivery).
func imageReference(spec *corev1.PodSpec) string {
	for _, v := range spec.Volumes {
		if v.Name == naming.ModelVolume && v.Image != nil {
			return v.Image.Reference
		}
	}
	return ""
}

// imageHolders are the names of the Nodes holding an image under exactly that reference
// (status.images[].names), sorted, at most maxPreferredNodes of them.
func imageHolders(nodes []corev1.Node, reference string) []string {
	var names []string
	for i := range nodes {
		if holds(&nodes[i], reference) {
			names = append(names, nodes[i].Name)
		}
	}
	sort.Strings(names)
	if len(names) > maxPreferredNodes {
		names = names[:maxPreferredNodes]
	}
	return names
}

func holds(node *corev1.Node, reference string) bool {
	for _, image := range node.Status.Images {
		for _, name := range image.Names {
			if name == reference {
				return true
			}
		}
	}
	return false
}

// preferNodes adds one preferred node-affinity term naming the Nodes by hostname to those the Pod
// already has; none when no Node is named.
func preferNodes(spec *corev1.PodSpec, names []string) {
	if len(names) == 0 {
		return
	}
	if spec.Affinity == nil {
		spec.Affinity = &corev1.Affinity{}
	}
	if spec.Affinity.NodeAffinity == nil {
		spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := spec.Affinity.NodeAffinity
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, corev1.PreferredSchedulingTerm{
		Weight: preferredWeight,
		Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{
			Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: names,
		}}},
	})
}

// placement applies creation-time placement to the members about to be created. The Nodes are
// looked up in the cache by the image reference (index.NodeImage), once per reference, and only when
// a Pod's weights are an image.
type placement struct {
	client  client.Reader
	holders map[string][]string
}

func newPlacement(c client.Reader) *placement {
	return &placement{client: c, holders: map[string][]string{}}
}

// place gives a Pod whose weights are an image its preferred term.
func (p *placement) place(ctx context.Context, pod *corev1.Pod) error {
	reference := imageReference(&pod.Spec)
	if reference == "" {
		return nil
	}
	names, ok := p.holders[reference]
	if !ok {
		nodes := &corev1.NodeList{}
		if err := p.client.List(ctx, nodes, client.MatchingFields{index.NodeImage: reference}); err != nil {
			return fmt.Errorf("listing the Nodes holding image %s: %w", reference, err)
		}
		names = imageHolders(nodes.Items, reference)
		p.holders[reference] = names
	}
	preferNodes(&pod.Spec, names)
	return nil
}

// CachedNode is the cache transform of Nodes. Placement reads a Node's labels and status.images;
// the InstanceType inventory its labels, whether it takes Pods (spec.unschedulable, taints, the
// Ready condition) and what it allocates. The cache keeps those, the Ready condition without its
// timestamps (a heartbeat then leaves the cached Node as it was), and drops the rest (annotations,
// managed fields, addresses, node info, the other conditions): memory the cache would hold for
// every Node of the cluster and no controller reads.
func CachedNode(o any) (any, error) {
	node, ok := o.(*corev1.Node)
	if !ok {
		return o, nil
	}
	kept := &corev1.Node{TypeMeta: node.TypeMeta, ObjectMeta: node.ObjectMeta,
		Spec:   corev1.NodeSpec{Unschedulable: node.Spec.Unschedulable, Taints: node.Spec.Taints},
		Status: corev1.NodeStatus{Images: node.Status.Images, Allocatable: node.Status.Allocatable, Capacity: node.Status.Capacity}}
	kept.Annotations, kept.ManagedFields = nil, nil
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			kept.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
		}
	}
	return kept, nil
}
