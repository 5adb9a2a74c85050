package rolestatus

import (
	"fmt"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
)

// PodsCreatedOf reads a PodsCreated condition: whether it is carried at all, and the refusal a
// False one holds.
func PodsCreatedOf(s xpv2.ConditionedStatus) (carried bool, refusal string) {
	for _, c := range s.Conditions {
		if c.Type != v1alpha1.PodsCreatedConditionType {
			continue
		}
		if c.Status == corev1.ConditionFalse {
			return true, c.Message
		}
		return true, ""
	}
	return false, ""
}

// RolePodsCreated is a role's PodsCreated condition from its standing replicas, by ordinal: False
// naming the first refused replica and how many more were refused. ok is false while neither a
// replica nor the role (carried) holds one: a condition the roles controller stopped writing would stay as
// it was last written, so once written it is written on every pass.
func RolePodsCreated(replicas []*v1alpha1.ModelReplica, carried bool) (c Condition, ok bool) {
	var first string
	refused := 0
	for _, r := range replicas {
		if r == nil {
			continue
		}
		has, refusal := PodsCreatedOf(r.Status.ConditionedStatus)
		ok = ok || has
		if refusal == "" {
			continue
		}
		if refused == 0 {
			first = fmt.Sprintf("replica %d: %s", r.Spec.Ordinal, refusal)
		}
		refused++
	}
	return podsCreated(first, refused, "replica"), ok || carried
}

// DeploymentPodsCreated is the deployment's PodsCreated condition from its roles' (nil before a
// role has reported), in the deployment's order: False naming each refused role's first refused
// replica. ok is false while neither a role nor the deployment (carried) holds one.
func DeploymentPodsCreated(names []string, roles []*v1alpha1.ModelRole, carried bool) (c Condition, ok bool) {
	var refusals []string
	for i, role := range roles {
		if role == nil {
			continue
		}
		has, refusal := PodsCreatedOf(role.Status.ConditionedStatus)
		ok = ok || has
		if refusal != "" {
			refusals = append(refusals, "role "+names[i]+" "+refusal)
		}
	}
	if len(refusals) == 0 {
		return podsCreated("", 0, "role"), ok || carried
	}
	return Condition{"False", string(v1alpha1.PodRefusedReason), strings.Join(refusals, "; ")}, true
}

// podsCreated is True, or False naming the first refusal and counting the others.
func podsCreated(first string, refused int, unit string) Condition {
	switch refused {
	case 0:
		return Condition{"True", string(v1alpha1.PodsCreatedReason), "the API server accepted the Pods of every " + unit}
	case 1:
		return Condition{"False", string(v1alpha1.PodRefusedReason), first}
	}
	return Condition{"False", string(v1alpha1.PodRefusedReason), fmt.Sprintf("%s; and %d more replicas refused", first, refused-1)}
}
