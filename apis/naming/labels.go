package naming

import (
	"strconv"
	"strings"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// LeaderIndex is the member index of a replica's leader, the member Services and routers reach.
const LeaderIndex = "0"

// Managed selects everything mdplane composes for any deployment: app.kubernetes.io/name.
func Managed() map[string]string {
	return map[string]string{workerv1.LabelName: workerv1.NameModelDeployment}
}

// DeploymentLabels label and select what one deployment composes: name and instance.
func DeploymentLabels(deployment string) map[string]string {
	l := Managed()
	l[workerv1.LabelInstance] = deployment
	return l
}

// RoleLabels label and select what one role composes, whatever its configuration: its ModelRole,
// Services, revisions and replicas; name, instance and component.
func RoleLabels(deployment, role string) map[string]string {
	l := DeploymentLabels(deployment)
	l[workerv1.LabelComponent] = role
	return l
}

// ReplicaLabels label and select one replica slot of a role: its ModelReplica, headless Service and
// Pods; the role's labels and the pod ordinal.
func ReplicaLabels(deployment, role string, ordinal int32) map[string]string {
	l := RoleLabels(deployment, role)
	l[workerv1.LabelPodOrdinal] = strconv.Itoa(int(ordinal))
	return l
}

// Leaders narrows a selector to the leaders, member 0 of each replica: it adds to the map it is
// given and returns it.
func Leaders(selector map[string]string) map[string]string {
	selector[workerv1.LabelMemberIndex] = LeaderIndex
	return selector
}

// Serving narrows a selector to the members that take traffic: the leaders, or, where every member
// of a replica serves (External DP), the members labelled to serve, which are the leaders of the
// leader-served replicas beside it; eligible adds the eligibility term. It adds to the map it is
// given and returns it.
func Serving(selector map[string]string, everyMember, eligible bool) map[string]string {
	if everyMember {
		selector[workerv1.LabelServes] = "true"
	} else {
		Leaders(selector)
	}
	if eligible {
		selector[workerv1.LabelEndpointEligible] = "true"
	}
	return selector
}

// LeaderSelector is the selector of a role's serving Pods, its leaders, as status publishes it.
func LeaderSelector(deployment, role string) string {
	return ServingSelector(deployment, role, false, false)
}

// ServingSelector is the selector of a role's serving Pods (Serving), as status publishes it: the
// role's labels in a fixed order, then the serving terms.
func ServingSelector(deployment, role string, everyMember, eligible bool) string {
	return strings.Join(append(deploymentTerms(deployment), servingTerms(workerv1.LabelComponent+"="+role, everyMember, eligible)...), ",")
}

// DeploymentServingTerms are the terms of a selector of every role's serving Pods of a deployment,
// in a fixed order: the deployment's labels, then the serving terms.
func DeploymentServingTerms(deployment string, everyMember, eligible bool) []string {
	return append(deploymentTerms(deployment), servingTerms("", everyMember, eligible)...)
}

// deploymentTerms select what one deployment composes, name first.
func deploymentTerms(deployment string) []string {
	return []string{workerv1.LabelName + "=" + workerv1.NameModelDeployment, workerv1.LabelInstance + "=" + deployment}
}

// servingTerms narrow a selector (after an optional role term) to the serving members, as Serving
// does a map.
func servingTerms(role string, everyMember, eligible bool) []string {
	var terms []string
	if role != "" {
		terms = append(terms, role)
	}
	if everyMember {
		terms = append(terms, workerv1.LabelServes+"=true")
	} else {
		terms = append(terms, workerv1.LabelMemberIndex+"="+LeaderIndex)
	}
	if eligible {
		terms = append(terms, workerv1.LabelEndpointEligible+"=true")
	}
	return terms
}

// InstanceNameOf is the headless Service name of the replica a Pod's labels place it in; false when
// the labels place it in none.
func InstanceNameOf(labels map[string]string) (string, bool) {
	ordinal, err := strconv.ParseInt(labels[workerv1.LabelPodOrdinal], 10, 32)
	if labels[workerv1.LabelInstance] == "" || err != nil {
		return "", false
	}
	return InstanceName(labels[workerv1.LabelInstance], labels[workerv1.LabelComponent], int32(ordinal)), true
}

// RoleNameOf is the ModelRole name of the role a Pod's or replica's labels place it in.
func RoleNameOf(labels map[string]string) string {
	return RoleServiceName(labels[workerv1.LabelInstance], labels[workerv1.LabelComponent])
}
