package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The labels NVIDIA's GPU feature discovery (GFD) and Node Feature Discovery put on a GPU node, as
// the fake nodes carry them: mdplane's inventory reads the product, memory, family and compute
// capability from them and forms the node's accelerator group from the product (NVIDIA-A10G is the
// group nvidia-a10g).
const (
	LabelGPUPresent      = "nvidia.com/gpu.present"
	LabelGPUProduct      = "nvidia.com/gpu.product"
	LabelGPUMemory       = "nvidia.com/gpu.memory" // MiB of one GPU
	LabelGPUCount        = "nvidia.com/gpu.count"
	LabelGPUFamily       = "nvidia.com/gpu.family"
	LabelGPUComputeMajor = "nvidia.com/gpu.compute.major"
	LabelGPUComputeMinor = "nvidia.com/gpu.compute.minor"
	// LabelNVIDIAPCI is Node Feature Discovery's label of a node with a PCI device of NVIDIA's
	// vendor ID.
	LabelNVIDIAPCI = "feature.node.kubernetes.io/pci-10de.present"
)

// GPUResource is the NVIDIA device plugin's resource, the one the fake nodes advertise unless told
// otherwise.
const GPUResource corev1.ResourceName = "nvidia.com/gpu"

// DefaultProducts are the products of the stack's fake nodes when Options.Products is empty: one
// node of each acceleratable InstanceType of examples/cluster.yaml (groups nvidia-a10g and
// nvidia-h20) on the default two-node stack.
var DefaultProducts = []string{"NVIDIA-A10G", "NVIDIA-H20"}

// gpuProduct is what GPU feature discovery labels of a product besides its name.
type gpuProduct struct {
	memoryMiB    int64
	family       string
	major, minor int
}

// gpuProducts are the products the stack knows the hardware of; any other gets otherProduct's.
var gpuProducts = map[string]gpuProduct{
	"NVIDIA-A10G": {memoryMiB: 24576, family: "ampere", major: 8, minor: 6},
	"NVIDIA-H20":  {memoryMiB: 98304, family: "hopper", major: 9, minor: 0},
	"NVIDIA-L4":   {memoryMiB: 23034, family: "ada-lovelace", major: 8, minor: 9},
	"NVIDIA-T4":   {memoryMiB: 15360, family: "turing", major: 7, minor: 5},
}

var otherProduct = gpuProduct{memoryMiB: 81920, family: "hopper", major: 9, minor: 0}

// NodeOptions shape a fake node Stack.AddNode creates.
type NodeOptions struct {
	// Name of the node; required.
	Name string
	// Product is the NVIDIA product GPU feature discovery would label the node with, such as
	// NVIDIA-L4; the node then carries GFD's and NFD's labels (LabelGPUProduct and the others),
	// with the product's memory, family and compute capability. Empty: no such labels (an Ascend
	// node, say, whose Labels say what it is).
	Product string
	// Labels are added last, over the stack's own (kubernetes.io/hostname, os, arch, type=kwok) and
	// the product's.
	Labels map[string]string
	// GPUs is how many of Resource the node advertises; zero means the stack's GPUsPerNode.
	GPUs int
	// Resource is the device plugin's resource the GPUs are counted in; GPUResource when empty.
	Resource corev1.ResourceName
	// Arch is the node's kubernetes.io/arch; amd64 when empty.
	Arch string
	// Taints the node carries from its creation, as a tainted GPU pool's nodes do.
	Taints []corev1.Taint
}

// fakeNode is the stack's node i: a GPU node in rack i/2, of the i-th product, kept Ready by a KWOK
// of its own (kwokOwnNode), which gives its Pods addresses from the node's own range.
func (s *Stack) fakeNode(i int) *corev1.Node {
	node := s.kwokNode(NodeOptions{
		Name:    fakeNodeName(i),
		Product: s.opts.Products[i%len(s.opts.Products)],
		Labels:  map[string]string{RackLabel: fmt.Sprintf("rack-%d", i/2), PoolLabel: PoolStack},
	})
	node.Labels[kwokNodeLabel] = kwokOwnNode
	node.Spec.PodCIDR = stackNodePodCIDR(i)
	node.Spec.PodCIDRs = []string{node.Spec.PodCIDR}
	return node
}

// ownNode reports whether name is one of the stack's own nodes.
func (s *Stack) ownNode(name string) bool {
	for i := range s.opts.Nodes {
		if name == fakeNodeName(i) {
			return true
		}
	}
	return false
}

// fakeNodeName is the name of the stack's node i.
func fakeNodeName(i int) string {
	return fmt.Sprintf("gpu-node-%d", i)
}

// kwokNode is a node KWOK keeps Ready, with room for opts.GPUs accelerators and the stack's
// PodsPerNode Pods. Its status carries capacity and allocatable: KWOK plays the kubelet, which is
// the one that reports them.
func (s *Stack) kwokNode(opts NodeOptions) *corev1.Node {
	gpus := opts.GPUs
	if gpus == 0 {
		gpus = s.opts.GPUsPerNode
	}
	if opts.Resource == "" {
		opts.Resource = GPUResource
	}
	if opts.Arch == "" {
		opts.Arch = "amd64"
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("192"),
		corev1.ResourceMemory:           resource.MustParse("2Ti"),
		corev1.ResourceEphemeralStorage: resource.MustParse("4Ti"),
		corev1.ResourcePods:             *resource.NewQuantity(int64(s.opts.PodsPerNode), resource.DecimalSI),
		opts.Resource:                   *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
	labels := map[string]string{
		corev1.LabelHostname: opts.Name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: opts.Arch, "type": "kwok",
	}
	if opts.Product != "" {
		addProductLabels(labels, opts.Product, gpus)
	}
	maps.Copy(labels, opts.Labels)
	labels[kwokNodeLabel] = kwokSharedNode
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   opts.Name,
			Labels: labels,
		},
		Spec:   corev1.NodeSpec{Taints: opts.Taints},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// NodeTemplate is the node AddNode would create of opts, not created: what an autoscaler's node
// group template is to its simulation of a scale-up.
func (s *Stack) NodeTemplate(opts NodeOptions) *corev1.Node {
	return s.kwokNode(opts)
}

// AddNode creates a fake node as the stack creates its own (KWOK keeps it Ready and runs the Pods
// bound to it) and waits until it is Ready and carries no taint but opts.Taints. The caller deletes
// it when done.
func (s *Stack) AddNode(ctx context.Context, opts NodeOptions) (*corev1.Node, error) {
	if opts.Name == "" {
		return nil, errors.New("AddNode: a node needs a name")
	}
	node := s.kwokNode(opts)
	if err := s.Client.Create(ctx, node); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(node), node)
		if err == nil {
			if nodeReady(node) && slices.Equal(node.Spec.Taints, opts.Taints) {
				return node, nil
			}
			err = fmt.Errorf("not Ready with only its own taints %v yet (taints %v)", opts.Taints, node.Spec.Taints)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("node %s: %w", opts.Name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// StopHeartbeat makes a fake node a test added stop reporting, as a node whose kubelet stopped: its
// KWOK label changes, so the shared KWOK's watch, which selects the label, sees the node leave and
// stops renewing its Lease and status; its Pods are left as they are. Kubernetes' node lifecycle
// controller then marks it Ready Unknown, its Pods not Ready, and taints it unreachable.
func (s *Stack) StopHeartbeat(ctx context.Context, node string) error {
	if s.ownNode(node) {
		return fmt.Errorf("StopHeartbeat: %s is one of the stack's own nodes, kept by a KWOK of its own that a label does not stop; stop a node the test added (AddNode)", node)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"stopped"}}}`, kwokNodeLabel)
	return s.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, client.RawPatch(types.MergePatchType, []byte(patch)))
}

// addProductLabels adds what GPU feature discovery and Node Feature Discovery label a node of gpus
// GPUs of product with.
func addProductLabels(labels map[string]string, product string, gpus int) {
	p, ok := gpuProducts[product]
	if !ok {
		p = otherProduct
	}
	maps.Copy(labels, map[string]string{
		LabelGPUPresent: "true", LabelGPUProduct: product, LabelGPUMemory: strconv.FormatInt(p.memoryMiB, 10),
		LabelGPUCount: strconv.Itoa(gpus), LabelGPUFamily: p.family,
		LabelGPUComputeMajor: strconv.Itoa(p.major), LabelGPUComputeMinor: strconv.Itoa(p.minor),
		LabelNVIDIAPCI: "true",
	})
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
