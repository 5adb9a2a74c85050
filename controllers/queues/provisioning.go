package queues

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueac "sigs.k8s.io/kueue/client-go/applyconfiguration/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The retry strategy of mdplane's ProvisioningRequestConfigs: a refused request is asked again
// after a minute, doubling to half an hour, and never given up. Kueue deactivates a Workload whose
// retries run out, and a serving deployment waits for nodes as it waits for quota: its status says
// why, and the next attempt may find the capacity.
const (
	provisioningBackoffBaseSeconds = 60
	provisioningBackoffMaxSeconds  = 1800
	provisioningBackoffLimitCount  = math.MaxInt32
)

// ProvisioningCheckName is the name of the AdmissionCheck and ProvisioningRequestConfig of a
// ProvisioningRequest class: the prefix, the class's first DNS label (cut to 30 characters) and an
// 8-hex FNV-1a hash of the whole class, 63 characters at most, as a config's name must be.
func ProvisioningCheckName(class string) string {
	label, _, _ := strings.Cut(class, ".")
	if len(label) > 30 {
		label = strings.TrimRight(label[:30], "-")
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(class))
	return fmt.Sprintf("%s%s-%08x", workerv1.ProvisioningCheckPrefix, label, h.Sum32())
}

// applyProvisioning applies the ProvisioningRequestConfig and the AdmissionCheck of an autoscaled
// type's class and returns the check's name, "" for a type whose capacity is its nodes'. Kueue's
// own ProvisioningRequest controller answers the check.
func (r *Reconciler) applyProvisioning(ctx context.Context, it *workerv1.InstanceType) (kueue.AdmissionCheckReference, error) {
	if _, autoscaled, err := it.AutoscaledCapacity(); err != nil || !autoscaled {
		return "", err
	}
	class := it.ProvisioningClass()
	name := ProvisioningCheckName(class)
	config := kueueac.ProvisioningRequestConfig(name).WithLabels(managedLabels).WithSpec(kueueac.ProvisioningRequestConfigSpec().
		WithProvisioningClassName(class).
		WithRetryStrategy(kueueac.ProvisioningRequestRetryStrategy().
			WithBackoffLimitCount(provisioningBackoffLimitCount).
			WithBackoffBaseSeconds(provisioningBackoffBaseSeconds).
			WithBackoffMaxSeconds(provisioningBackoffMaxSeconds)))
	if err := r.apply(ctx, "ProvisioningRequestConfig", name, config); err != nil {
		return "", err
	}
	check := kueueac.AdmissionCheck(name).WithLabels(managedLabels).WithSpec(kueueac.AdmissionCheckSpec().
		WithControllerName(kueue.ProvisioningRequestControllerName).
		WithParameters(kueueac.AdmissionCheckParametersReference().WithAPIGroup(kueue.GroupVersion.Group).WithKind("ProvisioningRequestConfig").WithName(name)))
	if err := r.apply(ctx, "AdmissionCheck", name, check); err != nil {
		return "", err
	}
	return kueue.AdmissionCheckReference(name), nil
}
