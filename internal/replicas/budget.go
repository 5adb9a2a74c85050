package replicas

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
)

// DisruptionBudget is the PodDisruptionBudget <md>-<role> that lets a drain take one replica of a
// role at a time, controlled by the role; nil for a role of an Elastic EP deployment, whose width
// moves under it, so no fixed count of members describes it. Any member evicted breaks its whole
// replica (the departures controller rebuilds it), so the budget counts members and allows one
// eviction only while every member of every replica is Ready; the next waits until the rebuilt
// replica is Ready again, and at least replicas−1 replicas serve throughout.
//
// minAvailable is an integer, replicas×size−1, because the members' controller (a ModelReplica)
// has no scale subresource, which a maxUnavailable or a percentage needs. A member not Ready serves
// nothing, so it may always be evicted (unhealthyPodEvictionPolicy AlwaysAllow): a replica stuck
// loading never blocks a drain. Kueue's preemption, mdplane's own rollouts and the kubelet's
// node-pressure evictions delete Pods without the eviction API and are not held by it.
//
// A controller writes the budget rather than the composition: its status changes with every member
// turning Ready or not, and each change would wake the deployment's composite, whose watch circuit
// breaker then opens and holds the deployment's status and edits back.
func DisruptionBudget(role *v1alpha1.ModelRole) *policyv1.PodDisruptionBudget {
	spec := role.Spec
	if spec.Elastic != nil {
		return nil
	}
	labels := naming.RoleLabels(spec.DeploymentName, spec.RoleName)
	meta := objectMeta(role.Namespace, naming.RoleServiceName(spec.DeploymentName, spec.RoleName), labels)
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelRoleKind,
		Name: role.Name, UID: role.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	alwaysAllow := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   typeMeta("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr.To(intstr.FromInt32(max(0, spec.Replicas*max(1, spec.Size)-1))),
			Selector:                   &metav1.LabelSelector{MatchLabels: naming.RoleLabels(spec.DeploymentName, spec.RoleName)},
			UnhealthyPodEvictionPolicy: &alwaysAllow,
		},
	}
}
