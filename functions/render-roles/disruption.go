package renderroles

import (
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// RenderDisruptionBudget is the PodDisruptionBudget <md>-<role> that lets a drain take one
// replica of a role at a time: any member evicted breaks its whole replica (the departures
// controller rebuilds it), so the budget counts members and allows one eviction only while every
// member of every replica is Ready. The next eviction waits until the rebuilt replica is Ready
// again: at least replicas−1 replicas serve throughout.
//
// minAvailable is an integer, replicas×size−1, because the members' controller (a ModelReplica)
// has no scale subresource, which a maxUnavailable or a percentage needs. A member not Ready serves
// nothing, so it may always be evicted (unhealthyPodEvictionPolicy AlwaysAllow): a replica stuck
// loading never blocks a drain. Kueue's preemption, mdplane's own rollouts and the kubelet's
// node-pressure evictions delete Pods without the eviction API and are not held by it.
func RenderDisruptionBudget(namespace, deployment string, role workerv1.ModelDeploymentRole) *policyv1.PodDisruptionBudget {
	role = role.WithDefaults()
	alwaysAllow := policyv1.AlwaysAllow
	return &policyv1.PodDisruptionBudget{
		TypeMeta:   typeMeta("policy/v1", "PodDisruptionBudget"),
		ObjectMeta: objectMeta(namespace, naming.RoleServiceName(deployment, role.Name), naming.RoleLabels(deployment, role.Name)),
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable:               ptr.To(intstr.FromInt32(max(0, role.Replicas*role.Size-1))),
			Selector:                   &metav1.LabelSelector{MatchLabels: naming.RoleLabels(deployment, role.Name)},
			UnhealthyPodEvictionPolicy: &alwaysAllow,
		},
	}
}
