package renderroles

import (
	"fmt"
	"math/big"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Fabric interface keys: one RDMA interface shares a device, more than one are whole devices; EFA
// uses the EFA device plugin's key.
const (
	rdmaSharedKey corev1.ResourceName = "device.gpustack.ai/rdma.shared"
	rdmaKey       corev1.ResourceName = "device.gpustack.ai/rdma"
	efaKey        corev1.ResourceName = "vpc.amazonaws.com/efa"
)

// partitionProfileMemory reads the memory of a partition profile such as 1g.10gb or 3g.40gb.
var partitionProfileMemory = regexp.MustCompile(`^\d+g\.(\d+)gb$`)

// wholeCards is the whole accelerators one Pod asks for (one unless stated); zero for a slice or
// a partition.
func wholeCards(req *workerv1.ModelDeploymentRoleResources) int64 {
	switch {
	case req == nil:
		return 1
	case req.AcceleratorPartitionedProfile != "" || req.AcceleratorSlicedMemoryPercentage != nil || req.AcceleratorSlicedCoresPercentage != nil:
		return 0
	case req.Accelerator != nil:
		return req.Accelerator.Value()
	}
	return 1
}

// podResources derives one Pod's requests and limits: CPU and memory are the InstanceType's unit
// resources scaled by the share of accelerators the Pod requests (one unit on a type without
// accelerators), ephemeral storage is podEphemeralStorage, the accelerator keys follow the request's
// mode, and the fabric keys the fabric the role's transfers run on ("" for none).
func podResources(it *workerv1.InstanceType, req *workerv1.ModelDeploymentRoleResources, fabric workerv1.TransferProtocol) (corev1.ResourceRequirements, error) {
	if req == nil {
		req = &workerv1.ModelDeploymentRoleResources{}
	}
	units := big.NewRat(1, 1)
	devices := corev1.ResourceList{}
	if it.Spec.Acceleratable {
		vendor, err := it.AcceleratorVendor()
		if err != nil {
			return corev1.ResourceRequirements{}, err
		}
		switch {
		case req.AcceleratorPartitionedProfile != "":
			profileKey, ok := vendor.PartitionProfileResource(req.AcceleratorPartitionedProfile)
			if !ok {
				return corev1.ResourceRequirements{}, fmt.Errorf("resources.acceleratorPartitionedProfile %q: InstanceType %q reports manufacturer %q, which has no partition kind, so no device plugin serves a partition of it; request whole accelerators or a slice, or name a type of a manufacturer that partitions (%s)",
					req.AcceleratorPartitionedProfile, it.Name, it.Status.Detail.Manufacturer, strings.Join(workerv1.PartitioningManufacturers(), ", "))
			}
			if units, err = partitionShare(it, req.AcceleratorPartitionedProfile); err != nil {
				return corev1.ResourceRequirements{}, err
			}
			devices[vendor.PartitionedResource()] = resource.MustParse("1")
			devices[profileKey] = resource.MustParse("1")
		case req.AcceleratorSlicedMemoryPercentage != nil || req.AcceleratorSlicedCoresPercentage != nil:
			memory, cores := slicePercentages(req)
			units = big.NewRat(int64(memory), 100)
			devices[vendor.SlicedResource()] = resource.MustParse("1")
			devices[vendor.SlicedMemoryPercentageResource()] = *resource.NewQuantity(int64(memory), resource.DecimalSI)
			devices[vendor.SlicedCoresPercentageResource()] = *resource.NewQuantity(int64(cores), resource.DecimalSI)
		default:
			if cards := wholeCards(req); cards > 0 {
				units = big.NewRat(cards, 1)
				devices[vendor.Resource] = *resource.NewQuantity(cards, resource.DecimalSI)
			}
		}
	}

	perUnit, err := it.UnitResourceList()
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	list := corev1.ResourceList{}
	for name, unit := range perUnit {
		if name == corev1.ResourceEphemeralStorage {
			continue
		}
		list[name] = scale(unit, units, name == corev1.ResourceCPU)
	}
	list[corev1.ResourceEphemeralStorage] = podEphemeralStorage(perUnit)
	for k, v := range devices {
		list[k] = v
	}
	// Interfaces are requested only for a fabric the role's transfers run on: a TCP client given an
	// RDMA device would hold one it never uses (admission refuses such a count; a store admitted
	// before that rule renders without it).
	if req.Interface != nil && req.Interface.Value() > 0 && fabric != "" {
		n := req.Interface.Value()
		switch {
		case fabric == workerv1.TransferEFA:
			list[efaKey] = *resource.NewQuantity(n, resource.DecimalSI)
		case n == 1:
			list[rdmaSharedKey] = resource.MustParse("1")
		default:
			list[rdmaKey] = *resource.NewQuantity(n, resource.DecimalSI)
		}
	}
	// Requests equal limits: an inference replica is sized for its accelerators and must not be the
	// first Pod evicted on a busy node.
	return corev1.ResourceRequirements{Requests: list, Limits: list.DeepCopy()}, nil
}

// defaultEphemeralStorage is the local disk every engine Pod asks for.
var defaultEphemeralStorage = resource.MustParse("15Gi")

// podEphemeralStorage is 15Gi capped at the type's localStorage, whatever the card count: the rule
// sizes a Pod's scratch space, not a share of the node's disk, so a 512Gi type still gets 15Gi and a
// 10Gi type gets its 10Gi. A type declaring no localStorage has no cap.
func podEphemeralStorage(perUnit corev1.ResourceList) resource.Quantity {
	local, declared := perUnit[corev1.ResourceEphemeralStorage]
	if declared && local.Cmp(defaultEphemeralStorage) < 0 {
		return local.DeepCopy()
	}
	return defaultEphemeralStorage.DeepCopy()
}

// slicePercentages returns the memory and cores shares of a logical slice; one set alone stands for
// both.
func slicePercentages(req *workerv1.ModelDeploymentRoleResources) (memory, cores int32) {
	switch {
	case req.AcceleratorSlicedMemoryPercentage != nil && req.AcceleratorSlicedCoresPercentage != nil:
		return *req.AcceleratorSlicedMemoryPercentage, *req.AcceleratorSlicedCoresPercentage
	case req.AcceleratorSlicedMemoryPercentage != nil:
		return *req.AcceleratorSlicedMemoryPercentage, *req.AcceleratorSlicedMemoryPercentage
	default:
		return *req.AcceleratorSlicedCoresPercentage, *req.AcceleratorSlicedCoresPercentage
	}
}

// partitionShare is the share of one accelerator a partition profile holds: its memory over the
// accelerator's, which needs the type's observed detail.
func partitionShare(it *workerv1.InstanceType, profile string) (*big.Rat, error) {
	m := partitionProfileMemory.FindStringSubmatch(profile)
	if m == nil {
		return nil, fmt.Errorf("partition profile %q does not name its memory (like 1g.10gb); its share of an accelerator of InstanceType %q cannot be sized", profile, it.Name)
	}
	if it.Status.Detail == nil || it.Status.Detail.Memory == nil || it.Status.Detail.Memory.Value() <= 0 {
		return nil, fmt.Errorf("InstanceType %q has not reported its accelerator memory in status.detail yet; partition %q cannot be sized until it converges", it.Name, profile)
	}
	gb, _ := strconv.ParseInt(m[1], 10, 64)
	share := new(big.Rat).SetFrac(big.NewInt(gb*1e9), big.NewInt(it.Status.Detail.Memory.Value()))
	if share.Cmp(big.NewRat(1, 1)) > 0 {
		share.SetInt64(1)
	}
	return share, nil
}

// mebibyte is what a fractional memory or storage share is rounded up to, so it reads as Mi.
const mebibyte = 1 << 20

// scale multiplies a unit quantity by a share, in millis for CPU and bytes otherwise, rounding up (a
// fractional byte count to whole mebibytes).
func scale(unit resource.Quantity, by *big.Rat, milli bool) resource.Quantity {
	base := unit.Value()
	if milli {
		base = unit.MilliValue()
	}
	product := new(big.Rat).Mul(new(big.Rat).SetInt64(base), by)
	n := new(big.Int).Quo(product.Num(), product.Denom())
	if new(big.Rat).SetInt(n).Cmp(product) < 0 {
		n.Add(n, big.NewInt(1))
	}
	if milli {
		return *resource.NewMilliQuantity(n.Int64(), resource.DecimalSI)
	}
	if !by.IsInt() {
		if rem := n.Int64() % mebibyte; rem != 0 {
			n.SetInt64(n.Int64() + mebibyte - rem)
		}
		return *resource.NewQuantity(n.Int64(), resource.BinarySI)
	}
	return *resource.NewQuantity(n.Int64(), unit.Format)
}
