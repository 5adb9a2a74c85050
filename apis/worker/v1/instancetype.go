package v1

// LabelAcceleratorGroup on a Node names the accelerator group it offers, over what its feature
// discovery labels derive: set by an administrator for hardware whose labels name no group, or name
// it otherwise than the InstanceType's spec.acceleratorGroup.
const LabelAcceleratorGroup = "worker.gpustack.ai/accelerator-group"

// The InstanceType phases the inventory writes (upstream's vocabulary).
const (
	// InstanceTypePhaseActive: some schedulable node gives the type capacity.
	InstanceTypePhaseActive = "Active"
	// InstanceTypePhaseInactive: spec.inactive is set.
	InstanceTypePhaseInactive = "Inactive"
	// InstanceTypePhasePreparing: no schedulable node gives the type capacity yet.
	InstanceTypePhasePreparing = "Preparing"
)

// InstanceType condition types.
const (
	// InstanceTypeNodesAvailable is True when schedulable nodes of the type give it capacity; its
	// message names the nodes that count and those that do not, and why.
	InstanceTypeNodesAvailable = "NodesAvailable"
	// InstanceTypeCapacityFree is True when bound Pods leave some of the capacity free.
	InstanceTypeCapacityFree = "CapacityFree"
	// InstanceTypeDetailObserved says where status.detail comes from.
	InstanceTypeDetailObserved = "DetailObserved"
)

// Reasons of the NodesAvailable condition.
const (
	ReasonSchedulableNodes    = "SchedulableNodes"
	ReasonNoMatchingNodes     = "NoMatchingNodes"
	ReasonNoSchedulableNodes  = "NoSchedulableNodes"
	ReasonNoDeviceCapacity    = "NoDeviceCapacity"
	ReasonNoUnitCapacity      = "NoUnitCapacity"
	ReasonUnknownManufacturer = "UnknownManufacturer"
)

// Reasons of the CapacityFree condition.
const (
	ReasonFree       = "Free"
	ReasonAllInUse   = "AllInUse"
	ReasonNoCapacity = "NoCapacity"
)

// Reasons of the DetailObserved condition.
const (
	ReasonNodeLabels   = "NodeLabels"
	ReasonMixedNodes   = "MixedNodes"
	ReasonGroupName    = "GroupName"
	ReasonLastObserved = "LastObserved"
	ReasonNotObserved  = "NotObserved"
)
