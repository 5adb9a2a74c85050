package inventory

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Status is the part of an InstanceType's status the inventory owns. What it leaves nil or empty is
// not its to write: the shared, sliced and partitioned views, detail.slicedDetail and detail.cpu,
// the accelerator view of a CPU-only type and the cpu view of an acceleratable one.
type Status struct {
	// Detail of an acceleratable type: manufacturer, product, family, memory, cores and compute
	// capability; nil on a CPU-only type.
	Detail *workerv1.InstanceTypeDetail
	// Accelerator counts whole accelerators; nil on a CPU-only type.
	Accelerator *workerv1.CapacityView
	// CPU counts units of spec.unitResources.cpu; nil on an acceleratable type.
	CPU          *workerv1.CapacityView
	Phase        string
	PhaseMessage string
	// Conditions are NodesAvailable, CapacityFree and, on an acceleratable type, DetailObserved.
	Conditions []metav1.Condition
}

// node is one Node of the type, as it counts.
type node struct {
	name        string
	schedulable bool
	why         string // why not schedulable
	accelerator NodeAccelerator
	capacity    int64 // cards, or CPU units
	free        int64
}

// ComputeStatus is what an InstanceType's status says, given every Node of the cluster and the Pods
// bound to them (others are ignored). now stamps a condition whose status changes.
//
// A type's nodes are those NodeMatches picks; only the schedulable ones count. On an acceleratable
// type, a node's capacity is its allocatable device resource (the manufacturer's, from mdplane's
// table), what is free of it is that less the requests of the Pods holding it (PodRequest): capacity
// and remaining are the sums, onceMaxRequest the most one node has free. On a CPU-only type the same
// is counted in units of spec.unitResources.cpu, each node's allocatable CPU rounded down.
func ComputeStatus(it *workerv1.InstanceType, nodes []corev1.Node, pods []corev1.Pod, now metav1.Time) Status {
	podsOn := map[string][]*corev1.Pod{}
	for i := range pods {
		if p := &pods[i]; holds(p) {
			podsOn[p.Spec.NodeName] = append(podsOn[p.Spec.NodeName], p)
		}
	}
	var mine []node
	for i := range nodes {
		n := &nodes[i]
		if !NodeMatches(it, n) {
			continue
		}
		m := node{name: n.Name}
		m.schedulable, m.why = Schedulable(n)
		if it.Spec.Acceleratable {
			m.accelerator, _ = offered(it, n)
		}
		mine = append(mine, m)
	}
	sort.Slice(mine, func(i, j int) bool { return mine[i].name < mine[j].name })
	c := &computation{it: it, nodes: mine, all: nodes}
	if it.Spec.Acceleratable {
		c.accelerated(podsOn)
	} else {
		c.cpuOnly(podsOn)
	}
	return c.status(now)
}

// computation carries what ComputeStatus has found to the messages it writes.
type computation struct {
	it    *workerv1.InstanceType
	nodes []node
	all   []corev1.Node

	manufacturer string
	resource     corev1.ResourceName // the counted resource; empty when the manufacturer is unknown
	unitErr      string              // a CPU-only type's unit that is no positive quantity
	unit         resource.Quantity

	capacity, remaining, onceMax int64
	detail                       *workerv1.InstanceTypeDetail
	detailCondition              metav1.Condition
}

func (c *computation) accelerated(podsOn map[string][]*corev1.Pod) {
	for _, n := range c.nodes {
		if n.accelerator.Manufacturer != "" {
			c.manufacturer = n.accelerator.Manufacturer
			break
		}
	}
	if c.manufacturer == "" {
		c.manufacturer = manufacturerOf(c.it.Spec.AcceleratorGroup, nil)
	}
	last := c.it.Status.Detail
	if c.manufacturer == "" && len(c.nodes) == 0 && last != nil {
		c.manufacturer = last.Manufacturer // a momentarily empty pool keeps what it was
	}
	if v, ok := workerv1.LookupAcceleratorVendor(c.manufacturer); ok {
		c.resource = v.Resource
		byName := nodesByName(c.all)
		for i := range c.nodes {
			n := &c.nodes[i]
			if !n.schedulable {
				continue
			}
			q := byName[n.name].Status.Allocatable[c.resource]
			n.capacity = q.Value()
			u := used(podsOn[n.name], c.resource)
			n.free = max(0, n.capacity-u.Value())
		}
	}
	c.sum()
	c.observeDetail()
}

func (c *computation) cpuOnly(podsOn map[string][]*corev1.Pod) {
	unit, err := resource.ParseQuantity(c.it.Spec.UnitResources.CPU)
	if err != nil || unit.Sign() <= 0 {
		c.unitErr = fmt.Sprintf("spec.unitResources.cpu %q is not a positive quantity, so no node's CPU can be counted in units; the spec is frozen: create an InstanceType with a valid unit, such as 8",
			c.it.Spec.UnitResources.CPU)
		c.sum()
		return
	}
	c.unit, c.resource = unit, corev1.ResourceCPU
	byName := nodesByName(c.all)
	for i := range c.nodes {
		n := &c.nodes[i]
		if !n.schedulable {
			continue
		}
		q := byName[n.name].Status.Allocatable[corev1.ResourceCPU]
		alloc := q.MilliValue()
		n.capacity = alloc / unit.MilliValue()
		u := used(podsOn[n.name], corev1.ResourceCPU)
		n.free = max(0, alloc-u.MilliValue()) / unit.MilliValue()
	}
	c.sum()
}

func (c *computation) sum() {
	for _, n := range c.nodes {
		c.capacity += n.capacity
		c.remaining += n.free
		c.onceMax = max(c.onceMax, n.free)
	}
}

func used(pods []*corev1.Pod, name corev1.ResourceName) resource.Quantity {
	var total resource.Quantity
	for _, p := range pods {
		total.Add(PodRequest(p, name))
	}
	return total
}

func nodesByName(nodes []corev1.Node) map[string]*corev1.Node {
	out := make(map[string]*corev1.Node, len(nodes))
	for i := range nodes {
		out[nodes[i].Name] = &nodes[i]
	}
	return out
}

// observeDetail is the type's detail: the first node's (by name) product, family, cores and compute
// capability and the smallest memory of them all, so that a slice sized on it fits every card. With
// no node, what was observed last stays: a momentarily empty pool must not move the render or fail
// slices.
func (c *computation) observeDetail() {
	group := c.it.Spec.AcceleratorGroup
	d := &workerv1.InstanceTypeDetail{Manufacturer: c.manufacturer}
	c.detail = d
	if len(c.nodes) == 0 {
		last := c.it.Status.Detail
		if last != nil && (last.Product != "" || last.Memory != nil) {
			d.Product, d.Family, d.ComputeCapability, d.Cores = last.Product, last.Family, last.ComputeCapability, last.Cores
			if last.Memory != nil {
				m := last.Memory.DeepCopy()
				d.Memory = &m
			}
			c.detailCondition = condition(metav1.ConditionTrue, workerv1.ReasonLastObserved, fmt.Sprintf(
				"no node offers accelerator group %s now; %s are the last observed", group, describe(d)))
			return
		}
		if c.manufacturer != "" {
			c.detailCondition = condition(metav1.ConditionTrue, workerv1.ReasonGroupName, fmt.Sprintf(
				"manufacturer %s from the accelerator group's name %s; the product and memory are observed once a node of the group is labelled", c.manufacturer, group))
			return
		}
		c.detailCondition = condition(metav1.ConditionFalse, workerv1.ReasonNotObserved, fmt.Sprintf(
			"no node offers accelerator group %s, and its name names no manufacturer mdplane knows (%s)", group, strings.Join(workerv1.KnownManufacturers(), ", ")))
		return
	}
	first := c.nodes[0].accelerator
	d.Product, d.Family, d.ComputeCapability, d.Cores = first.Product, first.Family, first.ComputeCapability, first.Cores
	kinds := map[string]string{} // product and memory → the first node reporting them
	var order []string
	for _, n := range c.nodes {
		a := n.accelerator
		if a.Memory != nil && (d.Memory == nil || a.Memory.Cmp(*d.Memory) < 0) {
			m := a.Memory.DeepCopy()
			d.Memory = &m
		}
		k := a.Product + " " + memory(a.Memory)
		if _, seen := kinds[k]; !seen {
			kinds[k] = n.name
			order = append(order, k)
		}
	}
	if len(order) > 1 {
		parts := make([]string, 0, len(order))
		for _, k := range order {
			parts = append(parts, kinds[k]+" "+k)
		}
		c.detailCondition = condition(metav1.ConditionTrue, workerv1.ReasonMixedNodes, fmt.Sprintf(
			"the nodes of accelerator group %s disagree (%s): the product is node %s's, the memory the smallest, %s", group, names(parts), c.nodes[0].name, memory(d.Memory)))
		return
	}
	c.detailCondition = condition(metav1.ConditionTrue, workerv1.ReasonNodeLabels, fmt.Sprintf(
		"%s, read from node %s's labels %s (%s in the group, agreeing)", describe(d), c.nodes[0].name, first.Source, nodeCount(len(c.nodes))))
}

func describe(d *workerv1.InstanceTypeDetail) string {
	product := d.Product
	if product == "" {
		product = "unlabelled"
	}
	out := fmt.Sprintf("product %s, memory %s", product, memory(d.Memory))
	if d.Manufacturer != "" {
		out = "manufacturer " + d.Manufacturer + ", " + out
	}
	return out
}

func memory(q *resource.Quantity) string {
	if q == nil {
		return "unlabelled"
	}
	return q.String()
}

// status assembles the views, the conditions and the phase.
func (c *computation) status(now metav1.Time) Status {
	view := &workerv1.CapacityView{Capacity: quantity(c.capacity), Remaining: quantity(c.remaining), OnceMaxRequest: quantity(c.onceMax)}
	s := Status{}
	if c.it.Spec.Acceleratable {
		s.Accelerator, s.Detail = view, c.detail
		if d := c.detail; d != nil && *d == (workerv1.InstanceTypeDetail{}) {
			s.Detail = nil
		}
	} else {
		s.CPU = view
	}
	nodes, free := c.nodesAvailable(), c.capacityFree()
	s.Conditions = []metav1.Condition{nodes, free}
	if c.it.Spec.Acceleratable {
		c.detailCondition.Type = workerv1.InstanceTypeDetailObserved
		s.Conditions = append(s.Conditions, c.detailCondition)
	}
	for i := range s.Conditions {
		cond := &s.Conditions[i]
		cond.ObservedGeneration, cond.LastTransitionTime = c.it.Generation, now
		if was := meta.FindStatusCondition(c.it.Status.Conditions, cond.Type); was != nil && was.Status == cond.Status {
			cond.LastTransitionTime = was.LastTransitionTime
		}
	}
	switch {
	case c.it.Spec.Inactive:
		s.Phase, s.PhaseMessage = workerv1.InstanceTypePhaseInactive, "spec.inactive is set: nothing new is admitted through this type"
	case c.capacity == 0:
		s.Phase = workerv1.InstanceTypePhasePreparing
	default:
		s.Phase = workerv1.InstanceTypePhaseActive
	}
	if s.PhaseMessage == "" {
		for _, cond := range []metav1.Condition{nodes, free} {
			if cond.Status != metav1.ConditionTrue {
				s.PhaseMessage = cond.Message
				break
			}
		}
	}
	return s
}

func quantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

func condition(status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Status: status, Reason: reason, Message: message}
}

// scope says which nodes the type takes, for messages.
func (c *computation) scope() string {
	if c.it.Spec.Acceleratable {
		return "of accelerator group " + c.it.Spec.AcceleratorGroup + " " + c.where()
	}
	return c.where()
}

// where is the type's os, arch and CPU group.
func (c *computation) where() string {
	s := fmt.Sprintf("on %s/%s", c.it.Spec.OS, c.it.Spec.Arch)
	if g := c.it.Spec.GeneralGroup; g != "" && g != genericGroup {
		s += " in CPU group " + g
	}
	return s
}

// units names what capacity counts: the device resource, or units of the CPU unit.
func (c *computation) units() string {
	if c.it.Spec.Acceleratable {
		return string(c.resource)
	}
	return fmt.Sprintf("units of %s cpu", c.unit.String())
}

func (c *computation) nodesAvailable() metav1.Condition {
	cond := func(status metav1.ConditionStatus, reason, format string, args ...any) metav1.Condition {
		r := condition(status, reason, fmt.Sprintf(format, args...))
		r.Type = workerv1.InstanceTypeNodesAvailable
		return r
	}
	var schedulable, excluded []string
	for _, n := range c.nodes {
		if n.schedulable {
			schedulable = append(schedulable, n.name)
		} else {
			excluded = append(excluded, n.name+" "+n.why)
		}
	}
	switch {
	case len(c.nodes) == 0:
		return cond(metav1.ConditionFalse, workerv1.ReasonNoMatchingNodes, "%s", c.noMatchingNodes())
	case c.it.Spec.Acceleratable && c.resource == "":
		return cond(metav1.ConditionFalse, workerv1.ReasonUnknownManufacturer,
			"accelerator group %s names no manufacturer mdplane knows, and its nodes (%s) have none of the known manufacturers' device resources in status.capacity (known: %s); "+
				"name the group <manufacturer>-<product>, or have the manufacturer added to mdplane's table",
			c.it.Spec.AcceleratorGroup, names(nodeNames(c.nodes)), strings.Join(workerv1.KnownManufacturers(), ", "))
	case len(schedulable) == 0:
		return cond(metav1.ConditionFalse, workerv1.ReasonNoSchedulableNodes, "%s %s, none schedulable: %s", nodeCount(len(c.nodes)), c.scope(), names(excluded))
	case c.unitErr != "":
		return cond(metav1.ConditionFalse, workerv1.ReasonNoUnitCapacity, "%s", c.unitErr)
	case c.capacity == 0 && c.it.Spec.Acceleratable:
		return cond(metav1.ConditionFalse, workerv1.ReasonNoDeviceCapacity, "schedulable: %s %s (%s), but no %s allocatable there: is the device plugin running?",
			nodeCount(len(schedulable)), c.scope(), names(schedulable), c.resource)
	case c.capacity == 0:
		return cond(metav1.ConditionFalse, workerv1.ReasonNoUnitCapacity, "schedulable: %s %s (%s), but none allocates one unit, %s cpu (spec.unitResources.cpu)",
			nodeCount(len(schedulable)), c.scope(), names(schedulable), c.unit.String())
	}
	msg := fmt.Sprintf("schedulable: %d of %s %s, with %d %s", len(schedulable), nodeCount(len(c.nodes)), c.scope(), c.capacity, c.units())
	if len(excluded) > 0 {
		msg += " (" + names(excluded) + ")"
	}
	return cond(metav1.ConditionTrue, workerv1.ReasonSchedulableNodes, "%s", msg)
}

// noMatchingNodes says which nodes there are instead, and the way to make them the type's.
func (c *computation) noMatchingNodes() string {
	it := c.it
	where := fmt.Sprintf("%s=%s and %s=%s", corev1.LabelOSStable, it.Spec.OS, corev1.LabelArchStable, it.Spec.Arch)
	if g := it.Spec.GeneralGroup; g != "" && g != genericGroup {
		where += fmt.Sprintf(" and %s%s=true", labelGeneralPrefix, g)
	}
	cpu := *it
	cpu.Spec.Acceleratable = false
	var there []*corev1.Node
	for i := range c.all {
		if NodeMatches(&cpu, &c.all[i]) {
			there = append(there, &c.all[i])
		}
	}
	if len(there) == 0 || !it.Spec.Acceleratable { // a CPU-only type takes every node there
		return "no node is labelled " + where
	}
	group := it.Spec.AcceleratorGroup
	offers := map[string]int{}
	for _, n := range there {
		for _, a := range NodeAccelerators(n.Labels, n.Status.Capacity) {
			offers[a.Group]++
		}
	}
	way := fmt.Sprintf("label the type's nodes %s=%s", workerv1.LabelAcceleratorGroup, group)
	if len(offers) == 0 {
		return fmt.Sprintf("no node offers accelerator group %s %s: of the %s labelled %s, none has feature-discovery labels naming a group (GPUStack's, NVIDIA GPU feature discovery's or AMD's node labeller's); %s",
			group, c.where(), nodeCount(len(there)), where, way)
	}
	groups := make([]string, 0, len(offers))
	for g := range offers {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	list := make([]string, 0, len(groups))
	for _, g := range groups {
		list = append(list, fmt.Sprintf("%s (%d)", g, offers[g]))
	}
	return fmt.Sprintf("no node offers accelerator group %s %s; the nodes there offer %s; %s if their feature-discovery labels name them otherwise",
		group, c.where(), names(list), way)
}

func nodeCount(n int) string {
	if n == 1 {
		return "1 node"
	}
	return fmt.Sprintf("%d nodes", n)
}

func nodeNames(nodes []node) []string {
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		out = append(out, n.name)
	}
	return out
}

func (c *computation) capacityFree() metav1.Condition {
	var r metav1.Condition
	switch {
	case c.capacity == 0:
		r = condition(metav1.ConditionUnknown, workerv1.ReasonNoCapacity, "the type has no capacity to be free: see NodesAvailable")
	case c.remaining == 0:
		r = condition(metav1.ConditionFalse, workerv1.ReasonAllInUse, fmt.Sprintf("bound Pods request all %d %s", c.capacity, c.units()))
	default:
		r = condition(metav1.ConditionTrue, workerv1.ReasonFree, fmt.Sprintf("%d of %d %s free; one node can give at most %d", c.remaining, c.capacity, c.units(), c.onceMax))
	}
	r.Type = workerv1.InstanceTypeCapacityFree
	return r
}

// Changed is true when the type's status does not already say what s says (a condition's transition
// time aside), so that an unchanged type costs no write.
func Changed(it *workerv1.InstanceType, s Status) bool {
	for _, want := range s.Conditions {
		if conditionChanged(meta.FindStatusCondition(it.Status.Conditions, want.Type), want) {
			return true
		}
	}
	if it.Status.Phase != s.Phase || it.Status.PhaseMessage != s.PhaseMessage {
		return true
	}
	if (s.Accelerator != nil && !sameView(it.Status.Accelerator, s.Accelerator)) || (s.CPU != nil && !sameView(it.Status.CPU, s.CPU)) {
		return true
	}
	return it.Spec.Acceleratable && detailChanged(it.Status.Detail, s.Detail)
}

func conditionChanged(was *metav1.Condition, want metav1.Condition) bool {
	return was == nil || was.Status != want.Status || was.Reason != want.Reason || was.Message != want.Message || was.ObservedGeneration != want.ObservedGeneration
}

// detailChanged compares the detail fields the inventory owns.
func detailChanged(was, is *workerv1.InstanceTypeDetail) bool {
	if was == nil {
		was = &workerv1.InstanceTypeDetail{}
	}
	if is == nil {
		is = &workerv1.InstanceTypeDetail{}
	}
	return was.Manufacturer != is.Manufacturer || was.Product != is.Product || was.Family != is.Family || was.ComputeCapability != is.ComputeCapability ||
		!sameQuantity(was.Memory, is.Memory) || !sameInt(was.Cores, is.Cores)
}

func sameView(was, is *workerv1.CapacityView) bool {
	if was == nil {
		return false
	}
	return sameQuantity(was.Capacity, is.Capacity) && sameQuantity(was.Remaining, is.Remaining) && sameQuantity(was.OnceMaxRequest, is.OnceMaxRequest)
}

func sameQuantity(a, b *resource.Quantity) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Cmp(*b) == 0
}

func sameInt(a, b *int32) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}
