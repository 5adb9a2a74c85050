package v1

import (
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The annotations an administrator puts on an InstanceType whose nodes come from a node pool that
// grows on demand (a cluster autoscaler answering ProvisioningRequests).
const (
	// AnnotationAutoscaledCapacity is the capacity the pool grows to, in the units the type counts
	// (whole accelerators; CPUs on a type without accelerators): the type's queue offers it as quota,
	// and its replica groups are admitted only once the autoscaler has provisioned their nodes.
	AnnotationAutoscaledCapacity = "worker.gpustack.ai/autoscaled-capacity"
	// AnnotationProvisioningClass is the ProvisioningRequest class the autoscaler answers for the
	// pool; DefaultProvisioningClass when absent.
	AnnotationProvisioningClass = "worker.gpustack.ai/provisioning-class"
	// AnnotationNodePoolTaints are the taints the pool gives its nodes, as kubectl taint writes them
	// (key=value:Effect or key:Effect, comma-separated): the type's Pods tolerate them before the
	// pool's first node exists, so that the autoscaler sees Pods its nodes would take.
	AnnotationNodePoolTaints = "worker.gpustack.ai/node-pool-taints"
)

// ProvisioningCheckPrefix begins the name of every provisioning AdmissionCheck (and its
// ProvisioningRequestConfig) mdplane makes: one per ProvisioningRequest class, shared by the
// autoscaled types that name the class.
const ProvisioningCheckPrefix = "mdplane-provisioning-"

// DefaultProvisioningClass is cluster-autoscaler's class that adds the nodes of a whole request at
// once or none of them.
const DefaultProvisioningClass = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"

// AutoscaledCapacity is the capacity the type's node pool grows to (AnnotationAutoscaledCapacity);
// ok is false for a type without the annotation, whose capacity is its nodes'.
func (t *InstanceType) AutoscaledCapacity() (capacity int64, ok bool, err error) {
	value, set := t.Annotations[AnnotationAutoscaledCapacity]
	if !set {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
	if err != nil || n < 1 {
		unit := "whole accelerators"
		if !t.Spec.Acceleratable {
			unit = "CPUs"
		}
		return 0, false, fmt.Errorf("InstanceType %q: annotation %s=%q is not a positive whole number; set it to the %s the node pool grows to, or remove it for a type whose capacity is its nodes'",
			t.Name, AnnotationAutoscaledCapacity, value, unit)
	}
	return n, true, nil
}

// ProvisioningClass is the ProvisioningRequest class the type's pool answers.
func (t *InstanceType) ProvisioningClass() string {
	if c := strings.TrimSpace(t.Annotations[AnnotationProvisioningClass]); c != "" {
		return c
	}
	return DefaultProvisioningClass
}

// NodePoolTaints parses AnnotationNodePoolTaints: the NoSchedule and NoExecute taints the pool
// gives its nodes (a PreferNoSchedule taint keeps no Pod off a node, so it needs no toleration).
func (t *InstanceType) NodePoolTaints() ([]corev1.Taint, error) {
	value := t.Annotations[AnnotationNodePoolTaints]
	var out []corev1.Taint
	for _, spec := range strings.Split(value, ",") {
		if spec = strings.TrimSpace(spec); spec == "" {
			continue
		}
		taint, err := parseTaint(spec)
		if err != nil {
			return nil, fmt.Errorf("InstanceType %q: annotation %s: %w; write each taint as key=value:Effect or key:Effect, separated by commas", t.Name, AnnotationNodePoolTaints, err)
		}
		if taint.Effect != corev1.TaintEffectPreferNoSchedule {
			out = append(out, taint)
		}
	}
	return out, nil
}

// parseTaint reads one taint as kubectl taint writes it.
func parseTaint(spec string) (corev1.Taint, error) {
	keyValue, effect, found := strings.Cut(spec, ":")
	if !found || keyValue == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q has no effect", spec)
	}
	switch e := corev1.TaintEffect(effect); e {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule:
	default:
		return corev1.Taint{}, fmt.Errorf("taint %q has effect %q, not NoSchedule, PreferNoSchedule or NoExecute", spec, effect)
	}
	key, value, _ := strings.Cut(keyValue, "=")
	if key == "" {
		return corev1.Taint{}, fmt.Errorf("taint %q has no key", spec)
	}
	return corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffect(effect)}, nil
}
