package v1

import (
	"fmt"
	"hash/fnv"
	"strings"
)

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
	// InstanceTypeCohort is, for a managed type in a Kueue cohort, True while its queue lends quota
	// to the cohort's other queues or borrows from them, with how much; absent outside a cohort.
	InstanceTypeCohort = "Cohort"
)

// Reasons of the Cohort condition.
const (
	ReasonOwnQuota  = "OwnQuota"
	ReasonLending   = "Lending"
	ReasonBorrowing = "Borrowing"
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

// LabelInstanceTypePrefix starts the label mdplane puts on every Node of an InstanceType (one key
// per type, value "true", see InstanceTypeNodeLabel): the one label its ResourceFlavor selects, so
// that the type's Pods land only on its nodes, however the nodes' own labels say which type they are.
const LabelInstanceTypePrefix = "instancetype.worker.gpustack.ai/"

// labelNameMaxLength is the limit of a label key's name part.
const labelNameMaxLength = 63

// InstanceTypeNodeLabel is the label key marking a Node as one of the InstanceType's: the prefix and
// the type's name; a name longer than a label key's 63-character name part is cut to 46 characters
// and followed by a dash and the FNV-1a 64 hash of the whole name in hex, so two long names sharing
// their start still get keys of their own.
func InstanceTypeNodeLabel(instanceType string) string {
	if len(instanceType) <= labelNameMaxLength {
		return LabelInstanceTypePrefix + instanceType
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(instanceType))
	suffix := fmt.Sprintf("-%016x", h.Sum64())
	head := strings.TrimRight(instanceType[:labelNameMaxLength-len(suffix)], "-.")
	return LabelInstanceTypePrefix + head + suffix
}

// Borrowing is what the type's Cohort condition says while its queue borrows from its cohort,
// naming the type; "" otherwise. Replicas admitted on borrowed quota are the first a lender taking
// it back preempts, which a deployment and `mdplane plan` say.
func (it *InstanceType) Borrowing() string {
	if it == nil {
		return ""
	}
	for _, c := range it.Status.Conditions {
		if c.Type == InstanceTypeCohort && c.Reason == ReasonBorrowing {
			return "InstanceType " + it.Name + " " + c.Message
		}
	}
	return ""
}
