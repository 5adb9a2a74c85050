package v1

import (
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InstanceType is a cluster-scoped class of machine a role runs on. Its name is the Kueue
// ClusterQueue's name and its status.entrance the LocalQueue every role naming it is admitted
// through.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=instype,categories=gpustack
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Manufacturer",type=string,JSONPath=".status.detail.manufacturer"
// +kubebuilder:printcolumn:name="Product",type=string,JSONPath=".status.detail.product"
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=".status.accelerator.capacity"
// +kubebuilder:printcolumn:name="Remaining",type=string,JSONPath=".status.accelerator.remaining"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Memory",type=string,JSONPath=".status.detail.memory",priority=1
// +kubebuilder:printcolumn:name="Max/Pod",type=string,JSONPath=".status.accelerator.onceMaxRequest",priority=1
// +kubebuilder:printcolumn:name="CPU",type=string,JSONPath=".status.cpu.capacity",priority=1
// +kubebuilder:printcolumn:name="Entrance",type=string,JSONPath=".status.entrance",priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type InstanceType struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the machine class.
	Spec InstanceTypeSpec `json:"spec"`
	// Status reports the observed detail, the queue entrance and the capacity views.
	// +optional
	Status InstanceTypeStatus `json:"status,omitempty"`
}

// InstanceTypeList is a list of InstanceTypes.
//
// +kubebuilder:object:root=true
type InstanceTypeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the InstanceTypes.
	Items []InstanceType `json:"items"`
}

// InstanceTypeSpec is the desired state of an InstanceType. Everything but displayName, description
// and inactive is frozen.
//
// +kubebuilder:validation:XValidation:rule="self.acceleratable == oldSelf.acceleratable && self.os == oldSelf.os && self.arch == oldSelf.arch && self.unitResources == oldSelf.unitResources && has(self.acceleratorGroup) == has(oldSelf.acceleratorGroup) && (!has(self.acceleratorGroup) || self.acceleratorGroup == oldSelf.acceleratorGroup) && has(self.generalGroup) == has(oldSelf.generalGroup) && (!has(self.generalGroup) || self.generalGroup == oldSelf.generalGroup) && has(self.localStorage) == has(oldSelf.localStorage) && (!has(self.localStorage) || self.localStorage == oldSelf.localStorage)",message="an InstanceType is frozen but for displayName, description and inactive: another machine class is another InstanceType, which is created rather than edited"
type InstanceTypeSpec struct {
	// DisplayName is a name for people.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	DisplayName string `json:"displayName,omitempty"`
	// Description for people.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
	// Inactive stops new admissions through the type.
	// +optional
	Inactive bool `json:"inactive,omitempty"`
	// Acceleratable is true when the type offers accelerators.
	Acceleratable bool `json:"acceleratable"`
	// AcceleratorGroup names the group of accelerators the type draws on. Required when acceleratable.
	// +optional
	AcceleratorGroup string `json:"acceleratorGroup,omitempty"`
	// GeneralGroup names the group of general-purpose nodes the type draws on.
	// +optional
	// +kubebuilder:default=generic
	GeneralGroup string `json:"generalGroup,omitempty"`
	// OS of the nodes, such as linux.
	// +kubebuilder:validation:MinLength=1
	OS string `json:"os"`
	// Arch of the nodes, such as amd64.
	// +kubebuilder:validation:MinLength=1
	Arch string `json:"arch"`
	// UnitResources are the CPU and memory that come with one accelerator (or one unit of a
	// CPU-only type); a role's requests scale them by its card count.
	UnitResources InstanceTypeUnitResources `json:"unitResources"`
	// LocalStorage is the ephemeral storage of one unit, such as 100Gi.
	// +optional
	LocalStorage string `json:"localStorage,omitempty"`
}

// InstanceTypeUnitResources are the CPU and memory of one unit.
type InstanceTypeUnitResources struct {
	// CPU of one unit, as a quantity string.
	// +kubebuilder:validation:MinLength=1
	CPU string `json:"cpu"`
	// RAM of one unit, as a quantity string.
	// +kubebuilder:validation:MinLength=1
	RAM string `json:"ram"`
}

// InstanceTypeStatus is the observed state of an InstanceType.
type InstanceTypeStatus struct {
	// Detail is what the nodes of the type report.
	// +optional
	Detail *InstanceTypeDetail `json:"detail,omitempty"`
	// Entrance is the LocalQueue name roles on this type are admitted through:
	// gpustack-fnv64-<hex FNV-1a-64 of the type's name>.
	// +optional
	Entrance string `json:"entrance,omitempty"`
	// Phase of the type.
	// +optional
	Phase string `json:"phase,omitempty"`
	// PhaseMessage explains the phase.
	// +optional
	PhaseMessage string `json:"phaseMessage,omitempty"`
	// Conditions of the type.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Accelerator is the whole-accelerator (exclusive) capacity view.
	// +optional
	Accelerator *CapacityView `json:"accelerator,omitempty"`
	// AcceleratorShared is the shared-accelerator capacity view.
	// +optional
	AcceleratorShared *CapacityView `json:"acceleratorShared,omitempty"`
	// AcceleratorSliced is the logical-slice capacity view.
	// +optional
	AcceleratorSliced *CapacityView `json:"acceleratorSliced,omitempty"`
	// AcceleratorPartitioned is the device-partition capacity view.
	// +optional
	AcceleratorPartitioned *PartitionedCapacityView `json:"acceleratorPartitioned,omitempty"`
	// CPU is the CPU capacity view.
	// +optional
	CPU *CapacityView `json:"cpu,omitempty"`
}

// CapacityView is one way of counting a type's capacity.
type CapacityView struct {
	// OnceMaxRequest is the largest request one Pod can be granted (the largest node).
	// +optional
	OnceMaxRequest *resource.Quantity `json:"onceMaxRequest,omitempty"`
	// Remaining is what is free now.
	// +optional
	Remaining *resource.Quantity `json:"remaining,omitempty"`
	// Capacity is the pool's total.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
}

// PartitionedCapacityView counts device partitions and their profiles.
type PartitionedCapacityView struct {
	CapacityView `json:",inline"`
	// AllocatedProfiles are the partitions in use, per profile.
	// +optional
	// +listType=map
	// +listMapKey=name
	AllocatedProfiles []ProfileCount `json:"allocatedProfiles,omitempty"`
	// RemainingProfiles are the partitions free, per profile.
	// +optional
	// +listType=map
	// +listMapKey=name
	RemainingProfiles []ProfileCount `json:"remainingProfiles,omitempty"`
}

// ProfileCount counts partitions of one profile.
type ProfileCount struct {
	// Name of the profile.
	Name string `json:"name"`
	// Count of partitions.
	Count int32 `json:"count"`
}

// InstanceTypeDetail is what the nodes of a type report about their hardware.
type InstanceTypeDetail struct {
	// Manufacturer of the accelerator (nvidia, ascend, ...); empty until the type has converged.
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// Product name of the accelerator.
	// +optional
	Product string `json:"product,omitempty"`
	// Family of the accelerator.
	// +optional
	Family string `json:"family,omitempty"`
	// Memory of one accelerator.
	// +optional
	Memory *resource.Quantity `json:"memory,omitempty"`
	// Cores of one accelerator.
	// +optional
	Cores *int32 `json:"cores,omitempty"`
	// ComputeCapability of the accelerator.
	// +optional
	ComputeCapability string `json:"computeCapability,omitempty"`
	// SlicedDetail says how one accelerator can be divided.
	// +optional
	SlicedDetail *SlicedDetail `json:"slicedDetail,omitempty"`
	// CPU describes the host processor.
	// +optional
	CPU *CPUDetail `json:"cpu,omitempty"`
}

// SlicedDetail says how an accelerator can be divided.
type SlicedDetail struct {
	// Logical slicing: shares of memory and cores.
	// +optional
	Logical *LogicalSlicing `json:"logical,omitempty"`
	// Physical partitioning: isolated device partitions of fixed profiles.
	// +optional
	Physical *PhysicalPartitioning `json:"physical,omitempty"`
}

// LogicalSlicing describes logical slices.
type LogicalSlicing struct {
	// Count of logical slices one accelerator offers; zero means no slicing.
	// +optional
	Count int32 `json:"count,omitempty"`
	// CoresPercentageOvercommit allowed on slices.
	// +optional
	CoresPercentageOvercommit *int32 `json:"coresPercentageOvercommit,omitempty"`
}

// PhysicalPartitioning describes device partitions.
type PhysicalPartitioning struct {
	// Count of partitions one accelerator offers; zero means no partitioning.
	// +optional
	Count int32 `json:"count,omitempty"`
	// Profiles offered, with how many of each fit one accelerator.
	// +optional
	// +listType=map
	// +listMapKey=name
	Profiles []ProfileCount `json:"profiles,omitempty"`
}

// CPUDetail describes a host processor.
type CPUDetail struct {
	// Manufacturer of the processor.
	// +optional
	Manufacturer string `json:"manufacturer,omitempty"`
	// Product name of the processor.
	// +optional
	Product string `json:"product,omitempty"`
	// Family of the processor.
	// +optional
	Family string `json:"family,omitempty"`
	// PhysicalCores per node.
	// +optional
	PhysicalCores int32 `json:"physicalCores,omitempty"`
	// ThreadsPerPhysicalCore of the processor.
	// +optional
	ThreadsPerPhysicalCore int32 `json:"threadsPerPhysicalCore,omitempty"`
	// LogicalCores per node.
	// +optional
	LogicalCores int32 `json:"logicalCores,omitempty"`
}

// AcceleratorReady is true once the type's accelerator detail has converged.
func (t *InstanceType) AcceleratorReady() bool {
	return t.Status.Detail != nil && t.Status.Detail.Manufacturer != ""
}

// UnitResourceList parses what one unit of the type (one accelerator, or one CPU unit on a type
// without accelerators) brings: CPU, memory and local storage. An empty value is left out.
func (t *InstanceType) UnitResourceList() (corev1.ResourceList, error) {
	out := corev1.ResourceList{}
	for name, value := range map[corev1.ResourceName]string{
		corev1.ResourceCPU:              t.Spec.UnitResources.CPU,
		corev1.ResourceMemory:           t.Spec.UnitResources.RAM,
		corev1.ResourceEphemeralStorage: t.Spec.LocalStorage,
	} {
		if value == "" {
			continue
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("InstanceType %q: unit %s %q is not a quantity", t.Name, name, value)
		}
		out[name] = q
	}
	return out, nil
}

// EntranceName is the LocalQueue name of an InstanceType: gpustack-fnv64- and the FNV-1a 64 hash of
// its name in hex.
func EntranceName(instanceType string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(instanceType))
	return fmt.Sprintf("gpustack-fnv64-%016x", h.Sum64())
}

// OffersSlicing is true when one accelerator of the type can be sliced logically.
func (t *InstanceType) OffersSlicing() bool {
	d := t.Status.Detail
	return d != nil && d.SlicedDetail != nil && d.SlicedDetail.Logical != nil && d.SlicedDetail.Logical.Count > 0
}

// PartitionProfiles are the device partition profiles the type offers; none when it cannot partition.
func (t *InstanceType) PartitionProfiles() []ProfileCount {
	d := t.Status.Detail
	if d == nil || d.SlicedDetail == nil || d.SlicedDetail.Physical == nil || d.SlicedDetail.Physical.Count == 0 {
		return nil
	}
	return d.SlicedDetail.Physical.Profiles
}
