package v1

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Accelerator manufacturers, spelled as an InstanceType reports them in status.detail.manufacturer.
const (
	ManufacturerAMD       = "amd"
	ManufacturerAscend    = "ascend"
	ManufacturerCambricon = "cambricon"
	ManufacturerHygon     = "hygon"
	ManufacturerIluvatar  = "iluvatar"
	ManufacturerMetaX     = "metax"
	ManufacturerMThreads  = "mthreads"
	ManufacturerNVIDIA    = "nvidia"
	ManufacturerTHead     = "thead"
)

// PartitionKindMIG is the partition kind of NVIDIA's Multi-Instance GPU, which T-Head and Hygon
// publish their partitions under too.
const PartitionKindMIG = "mig"

// AcceleratorVendor is what mdplane renders for one manufacturer's accelerators: the device plugin's
// resource key every accelerator family derives from, the RuntimeClass its Pods run with and the
// kind its partition profiles are published under.
//
// +kubebuilder:object:generate=false
type AcceleratorVendor struct {
	// Resource is the whole-accelerator key, <base>; the shared, sliced and partitioned keys derive
	// from it.
	Resource corev1.ResourceName
	// RuntimeClass is the RuntimeClass the manufacturer's Pods run with, when the cluster has one of
	// that name; empty for a manufacturer that needs none.
	RuntimeClass string
	// PartitionKind prefixes the partition profile keys; empty when the manufacturer does not
	// partition its accelerators.
	PartitionKind string
}

// acceleratorVendors is the manufacturer table, the one place
// mdplane knows a vendor. Hygon's and T-Head's partition kind is mig as the device docs' requests
// page has it (the settings page gives nvidia alone a default);
// docs/decisions/0037-accelerator-manufacturers.md records why.
var acceleratorVendors = map[string]AcceleratorVendor{
	ManufacturerAMD:       {Resource: "amd.com/gpu", RuntimeClass: "amd"},
	ManufacturerAscend:    {Resource: "huawei.com/npu", RuntimeClass: "ascend"},
	ManufacturerCambricon: {Resource: "cambricon.com/mlu", RuntimeClass: "cambricon"},
	ManufacturerHygon:     {Resource: "hygon.com/dcu", RuntimeClass: "hygon", PartitionKind: PartitionKindMIG},
	ManufacturerIluvatar:  {Resource: "iluvatar.com/gpu", RuntimeClass: "iluvatar"},
	ManufacturerMetaX:     {Resource: "metax-tech.com/gpu", RuntimeClass: "metax"},
	ManufacturerMThreads:  {Resource: "mthreads.com/gpu", RuntimeClass: "mthreads"},
	ManufacturerNVIDIA:    {Resource: "nvidia.com/gpu", RuntimeClass: "nvidia", PartitionKind: PartitionKindMIG},
	ManufacturerTHead:     {Resource: "alibabacloud.com/ppu", PartitionKind: PartitionKindMIG},
}

// LookupAcceleratorVendor is the table's row of a manufacturer; false for one mdplane does not list.
func LookupAcceleratorVendor(manufacturer string) (AcceleratorVendor, bool) {
	v, ok := acceleratorVendors[manufacturer]
	return v, ok
}

// KnownManufacturers lists the manufacturers of the table, sorted.
func KnownManufacturers() []string {
	out := make([]string, 0, len(acceleratorVendors))
	for m := range acceleratorVendors {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// PartitioningManufacturers lists the manufacturers with a partition kind, sorted: the way out of a
// partition request on any other.
func PartitioningManufacturers() []string {
	var out []string
	for _, m := range KnownManufacturers() {
		if acceleratorVendors[m].PartitionKind != "" {
			out = append(out, m)
		}
	}
	return out
}

// SlicedResource is the logical-slice token key, <base>.sliced.
func (v AcceleratorVendor) SlicedResource() corev1.ResourceName { return v.Resource + ".sliced" }

// SlicedMemoryPercentageResource is a slice's memory share key, <base>.sliced.memory-percentage.
func (v AcceleratorVendor) SlicedMemoryPercentageResource() corev1.ResourceName {
	return v.Resource + ".sliced.memory-percentage"
}

// SlicedCoresPercentageResource is a slice's cores share key, <base>.sliced.cores-percentage.
func (v AcceleratorVendor) SlicedCoresPercentageResource() corev1.ResourceName {
	return v.Resource + ".sliced.cores-percentage"
}

// PartitionedResource is the partition token key, <base>.partitioned.
func (v AcceleratorVendor) PartitionedResource() corev1.ResourceName {
	return v.Resource + ".partitioned"
}

// PartitionProfileResource is one profile's key, <base>.partitioned.<kind>-<profile>; false when the
// manufacturer does not partition, so no device plugin serves such a key.
func (v AcceleratorVendor) PartitionProfileResource(profile string) (corev1.ResourceName, bool) {
	if v.PartitionKind == "" {
		return "", false
	}
	return v.Resource + corev1.ResourceName(".partitioned."+v.PartitionKind+"-"+profile), true
}

// AcceleratorVendor is the table's row of the manufacturer the type reports. It fails while the type
// has not reported one, and for a manufacturer mdplane does not list.
func (t *InstanceType) AcceleratorVendor() (AcceleratorVendor, error) {
	if !t.AcceleratorReady() {
		return AcceleratorVendor{}, fmt.Errorf("InstanceType %q has not reported its accelerator manufacturer in status.detail yet; the render waits for it to converge", t.Name)
	}
	m := t.Status.Detail.Manufacturer
	v, ok := acceleratorVendors[m]
	if !ok {
		return AcceleratorVendor{}, fmt.Errorf("InstanceType %q reports status.detail.manufacturer %q, for which mdplane knows no device resource key (it knows %s); name an InstanceType of a listed manufacturer, or have %q added to mdplane's manufacturer table",
			t.Name, m, strings.Join(KnownManufacturers(), ", "), m)
	}
	return v, nil
}

// AcceleratorResource is the device plugin's resource key for the type's accelerators, <base>.
func (t *InstanceType) AcceleratorResource() (corev1.ResourceName, error) {
	v, err := t.AcceleratorVendor()
	return v.Resource, err
}

// RuntimeClassName is the RuntimeClass the type's Pods run with when the cluster has one of that
// name: its manufacturer's on an acceleratable type; empty for a type without accelerators, one not
// converged yet, a manufacturer mdplane does not list and one that needs none.
func (t *InstanceType) RuntimeClassName() string {
	if !t.Spec.Acceleratable || !t.AcceleratorReady() {
		return ""
	}
	return acceleratorVendors[t.Status.Detail.Manufacturer].RuntimeClass
}
