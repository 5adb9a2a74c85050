package v1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The group, its one resource and the custom metrics served of it.
const (
	Group       = "roles.worker.gpustack.ai"
	Version     = "v1"
	Resource    = "modeldeploymentroles"
	Kind        = "ModelDeploymentRole"
	Subresource = "scale"
	// MetricWaitingRequests is a role's requests waiting in its engines' queues, summed over its Pods.
	MetricWaitingRequests = "waiting_requests"
	// MetricRunningRequests is a role's requests being processed, summed over its Pods.
	MetricRunningRequests = "running_requests"
)

// SchemeGroupVersion is roles.worker.gpustack.ai/v1.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// ModelDeploymentRole is one role of a ModelDeployment, named <deployment>.<role>.
type ModelDeploymentRole struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ModelDeploymentRoleSpec   `json:"spec"`
	Status            ModelDeploymentRoleStatus `json:"status"`
}

// ModelDeploymentRoleSpec is what the deployment declares of the role.
type ModelDeploymentRoleSpec struct {
	// Deployment is the ModelDeployment the role belongs to.
	Deployment string `json:"deployment"`
	// Role is the role's name in the deployment.
	Role string `json:"role"`
	// Kind is the role's kind (Server, Prefill, Decode, Encode); empty means Server.
	Kind string `json:"kind,omitempty"`
	// Replicas is the deployment's spec.roles[i].replicas, which the scale subresource writes.
	Replicas int32 `json:"replicas"`
}

// ModelDeploymentRoleStatus is what the deployment reports of the role.
type ModelDeploymentRoleStatus struct {
	// Ready is the role's replicas whose every member is Ready.
	Ready int32 `json:"ready"`
	// Selector selects the role's Pods, as a label selector string.
	Selector string `json:"selector"`
}

// ModelDeploymentRoleList is a namespace's roles.
type ModelDeploymentRoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ModelDeploymentRole `json:"items"`
}

// Name is the name of a deployment's role: <deployment>.<role>. A role name is a DNS label, so the
// last dot separates them.
func Name(deployment, role string) string { return deployment + "." + role }

// SplitName reads a name Name made; ok is false for a name without a deployment and a role.
func SplitName(name string) (deployment, role string, ok bool) {
	i := strings.LastIndex(name, ".")
	if i <= 0 || i == len(name)-1 {
		return "", "", false
	}
	return name[:i], name[i+1:], true
}
