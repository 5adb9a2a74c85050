package inventory

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The node labels the inventory reads, besides workerv1.LabelAcceleratorGroup.
const (
	// GPUStack's device manager (upstream discovery): <prefix><aKey>=true per accelerator group,
	// <prefix><aKey>.<detail> for its product, memory, family, cores and compute capability, and
	// <prefix><manufacturer>=true.
	labelAcceleratablePrefix = "acceleratable.feature.gpustack.ai/"
	// labelAcceleratable "false" marks a node GPUStack's discovery found no accelerator on.
	labelAcceleratable = "feature.gpustack.ai/acceleratable"
	// labelGeneralPrefix<gKey>=true names a node's CPU group.
	labelGeneralPrefix = "general.feature.gpustack.ai/"

	// NVIDIA GPU feature discovery.
	labelNVIDIAProduct      = "nvidia.com/gpu.product"
	labelNVIDIAMemory       = "nvidia.com/gpu.memory" // MiB
	labelNVIDIAFamily       = "nvidia.com/gpu.family"
	labelNVIDIAComputeMajor = "nvidia.com/gpu.compute.major"
	labelNVIDIAComputeMinor = "nvidia.com/gpu.compute.minor"

	// AMD's node labeller, also published under beta.amd.com/.
	labelAMDProduct = "amd.com/gpu.product-name"
	labelAMDMemory  = "amd.com/gpu.vram" // 192G: GiB
	labelAMDFamily  = "amd.com/gpu.family"
	labelAMDCores   = "amd.com/gpu.cu-count"
	amdBetaPrefix   = "beta."

	// groupMaxLength is a label value's limit: a group is matched against labels.
	groupMaxLength = 63
)

// NodeAccelerator is one accelerator group a Node offers, with what its labels say of the hardware.
type NodeAccelerator struct {
	// Group is the accelerator group, as InstanceType.spec.acceleratorGroup names it.
	Group string
	// Manufacturer is the row of mdplane's manufacturer table: the one whose device resource the
	// node has, else the group's prefix; empty when neither names a known one.
	Manufacturer string
	// Product as the labeller spells it (label values hold no spaces).
	Product string
	// Memory of one accelerator.
	Memory *resource.Quantity
	// Family of the accelerator.
	Family string
	// Cores of one accelerator, when labelled.
	Cores *int32
	// ComputeCapability, such as 8.6.
	ComputeCapability string
	// Source names the labels the group was read from, for messages.
	Source string
}

// NodeAccelerators are the accelerator groups a Node offers, sorted by group. The first source that
// yields wins: the administrator's workerv1.LabelAcceleratorGroup (the hardware detail then still
// read from the first labeller that has it), GPUStack's device manager labels (every group it
// lists), NVIDIA GPU feature discovery, AMD's node labeller. A node GPUStack marks as not
// acceleratable offers none unless the override names one.
func NodeAccelerators(labels map[string]string, capacity corev1.ResourceList) []NodeAccelerator {
	derived := derivedAccelerators(labels)
	if group := labels[workerv1.LabelAcceleratorGroup]; group != "" {
		a := NodeAccelerator{Group: group, Source: workerv1.LabelAcceleratorGroup}
		if len(derived) > 0 {
			d := derived[0]
			a.Product, a.Memory, a.Family, a.Cores, a.ComputeCapability = d.Product, d.Memory, d.Family, d.Cores, d.ComputeCapability
			a.Source += " (detail from " + d.Source + ")"
		}
		derived = []NodeAccelerator{a}
	}
	for i := range derived {
		derived[i].Manufacturer = manufacturerOf(derived[i].Group, capacity)
	}
	return derived
}

func derivedAccelerators(labels map[string]string) []NodeAccelerator {
	if labels[labelAcceleratable] == "false" {
		return nil
	}
	if out := gpustackAccelerators(labels); len(out) > 0 {
		return out
	}
	if product := labels[labelNVIDIAProduct]; product != "" {
		a := NodeAccelerator{Group: GroupOf(workerv1.ManufacturerNVIDIA, product), Product: product, Family: labels[labelNVIDIAFamily],
			Source: labelNVIDIAProduct + ", " + labelNVIDIAMemory}
		if mib, err := strconv.ParseInt(labels[labelNVIDIAMemory], 10, 64); err == nil && mib > 0 {
			a.Memory = resource.NewQuantity(mib<<20, resource.BinarySI)
		}
		if major, minor := labels[labelNVIDIAComputeMajor], labels[labelNVIDIAComputeMinor]; major != "" && minor != "" {
			a.ComputeCapability = major + "." + minor
		}
		return []NodeAccelerator{a}
	}
	for _, prefix := range []string{"", amdBetaPrefix} {
		product := labels[prefix+labelAMDProduct]
		if product == "" {
			continue
		}
		a := NodeAccelerator{Group: GroupOf(workerv1.ManufacturerAMD, product), Product: product, Family: labels[prefix+labelAMDFamily],
			Memory: amdMemory(labels[prefix+labelAMDMemory]), Cores: count(labels[prefix+labelAMDCores]),
			Source: prefix + labelAMDProduct + ", " + prefix + labelAMDMemory}
		return []NodeAccelerator{a}
	}
	return nil
}

// gpustackAccelerators reads the device manager's groups: every <prefix><aKey>=true whose key has
// no further .suffix. An aKey is <manufacturer>-<id>; the bare <prefix><manufacturer> marker, which
// has no dash, is not a group.
func gpustackAccelerators(labels map[string]string) []NodeAccelerator {
	var out []NodeAccelerator
	for key, value := range labels {
		group, ok := strings.CutPrefix(key, labelAcceleratablePrefix)
		if !ok || value != "true" || strings.Contains(group, ".") || !strings.Contains(group, "-") {
			continue
		}
		detail := func(suffix string) string { return labels[labelAcceleratablePrefix+group+"."+suffix] }
		a := NodeAccelerator{Group: group, Product: detail("product"), Family: detail("family"), Cores: count(detail("cores")),
			ComputeCapability: detail("comcap"), Source: labelAcceleratablePrefix + group + "{,.product,.memory}"}
		if q, err := resource.ParseQuantity(detail("memory")); err == nil && q.Sign() > 0 {
			a.Memory = &q
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// GroupOf is the accelerator group a vendor labeller's product forms: the manufacturer, a dash and
// the product lowercased, every run of other characters than a-z and 0-9 a dash, a leading
// manufacturer dropped (as upstream's discovery does) and a trailing -shared (GPU feature
// discovery's time-slicing rename) too, within a label value's 63 characters. NVIDIA-A10G is
// nvidia-a10g, Tesla-T4 nvidia-tesla-t4, AMD_Instinct_MI300X_OAM amd-instinct-mi300x-oam.
func GroupOf(manufacturer, product string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(product) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	id := strings.Trim(b.String(), "-")
	if rest, ok := strings.CutPrefix(id, manufacturer+"-"); ok {
		id = rest
	}
	id = strings.TrimSuffix(id, "-shared")
	group := manufacturer
	if id != "" && id != manufacturer {
		group += "-" + id
	}
	if len(group) > groupMaxLength {
		group = strings.TrimRight(group[:groupMaxLength], "-")
	}
	return group
}

// manufacturerOf is the table's row whose device resource the node has (the group's own prefix
// first, should it have several), else the group's prefix when the table lists it, else empty.
func manufacturerOf(group string, capacity corev1.ResourceList) string {
	prefix, _, _ := strings.Cut(group, "-")
	var present []string
	for _, m := range workerv1.KnownManufacturers() {
		v, _ := workerv1.LookupAcceleratorVendor(m)
		if q, ok := capacity[v.Resource]; ok && q.Sign() > 0 {
			if m == prefix {
				return m
			}
			present = append(present, m)
		}
	}
	if len(present) > 0 {
		return present[0]
	}
	if _, ok := workerv1.LookupAcceleratorVendor(prefix); ok {
		return prefix
	}
	return ""
}

// amdMemory reads the labeller's vram, whose G is GiB; another spelling is taken as a quantity.
func amdMemory(v string) *resource.Quantity {
	if n, err := strconv.ParseInt(strings.TrimSuffix(v, "G"), 10, 64); err == nil && strings.HasSuffix(v, "G") && n > 0 {
		return resource.NewQuantity(n<<30, resource.BinarySI)
	}
	if q, err := resource.ParseQuantity(v); err == nil && q.Sign() > 0 {
		return &q
	}
	return nil
}

func count(v string) *int32 {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return nil
	}
	c := int32(n)
	return &c
}

// NodeMatches is true when a Node is one of the type's: its os and arch, its CPU group unless the
// type's is generic, and, on an acceleratable type, the type's accelerator group among those it
// offers. A CPU-only type takes every node of its os, arch and CPU group, accelerated ones too.
func NodeMatches(it *workerv1.InstanceType, node *corev1.Node) bool {
	l := node.Labels
	if l[corev1.LabelOSStable] != it.Spec.OS || l[corev1.LabelArchStable] != it.Spec.Arch {
		return false
	}
	if g := it.Spec.GeneralGroup; g != "" && g != genericGroup && l[labelGeneralPrefix+g] != "true" {
		return false
	}
	if !it.Spec.Acceleratable {
		return true
	}
	_, ok := offered(it, node)
	return ok
}

// genericGroup is the CPU group every node is in.
const genericGroup = "generic"

// offered is the node's accelerator of the type's group.
func offered(it *workerv1.InstanceType, node *corev1.Node) (NodeAccelerator, bool) {
	for _, a := range NodeAccelerators(node.Labels, node.Status.Capacity) {
		if a.Group == it.Spec.AcceleratorGroup {
			return a, true
		}
	}
	return NodeAccelerator{}, false
}

// Schedulable says whether a Node's capacity counts, and why not: a node being deleted, one not
// Ready, or one cordoned (spec.unschedulable or the taints the node lifecycle controller sets) gives
// nothing new, though the Pods it runs keep running. Other taints do not exclude: a type's nodes are
// chosen by their labels, as upstream's.
func Schedulable(node *corev1.Node) (bool, string) {
	if node.DeletionTimestamp != nil {
		return false, "deleting"
	}
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	cordoned := node.Spec.Unschedulable
	for _, t := range node.Spec.Taints {
		switch t.Key {
		case corev1.TaintNodeUnschedulable:
			cordoned = true
		case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable:
			ready = false
		}
	}
	switch {
	case !ready:
		return false, "NotReady"
	case cordoned:
		return false, "cordoned"
	}
	return true, ""
}

// names lists at most five, then how many more: a condition message stays short on a large pool.
func names(list []string) string {
	const shown = 5
	if len(list) <= shown {
		return strings.Join(list, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(list[:shown], ", "), len(list)-shown)
}
