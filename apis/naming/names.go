package naming

import "strconv"

// MainContainer is the engine's container in every Pod template mdplane renders; the cache step and
// the routing proxy amend it by this name.
const MainContainer = "main"

// WaitForWorkerContainer is the init container that holds a multi-member replica's leader back
// until its workers are on the network; it is told its instance as the main container is.
const WaitForWorkerContainer = "wait-for-worker"

// ModelVolume is the weights volume of PVC, Node and Image delivery; placement reads a replica's
// claim from it.
const ModelVolume = "gpustack-model"

// RoleServiceName is the name of a role's Service, which fronts its leaders, and of its ModelRole:
// <md>-<role>.
func RoleServiceName(deployment, role string) string { return deployment + "-" + role }

// InstanceName is the name of a replica's headless Service and the stem of its members' names:
// <md>-<role>-r<N>.
func InstanceName(deployment, role string, ordinal int32) string {
	return RoleServiceName(deployment, role) + "-r" + strconv.Itoa(int(ordinal))
}

// MemberName is the name of one Pod of a replica above size 1: <md>-<role>-r<N>-m<M>.
func MemberName(deployment, role string, ordinal, member int32) string {
	return InstanceName(deployment, role, ordinal) + "-m" + strconv.Itoa(int(member))
}

// LeaderAddress is the DNS name of a replica's leader, m0, behind the replica's headless Service.
func LeaderAddress(deployment, role string, ordinal int32) string {
	return MemberName(deployment, role, ordinal, 0) + "." + InstanceName(deployment, role, ordinal)
}

// RevisionName names the ControllerRevision holding a role's revision: <md>-<role>-<revision>.
func RevisionName(deployment, role, revision string) string {
	return RoleServiceName(deployment, role) + "-" + revision
}

// RouterName is the name of every object of a deployment's router: <md>-router.
func RouterName(deployment string) string { return deployment + "-router" }

// RoleResource is the composition resource name of a role's ModelRole in a ModelDeployment's
// pipeline: render-roles composes it under this name and kv-cache amends it by it.
func RoleResource(role string) string { return "role-" + role }

// RoleServiceResource is the composition resource name of a role's Service in a ModelDeployment's
// pipeline, which kv-cache adds the KV event ports to.
func RoleServiceResource(role string) string { return "service-" + role }

// RouterDeploymentResource is the composition resource name of the router's Deployment: kv-cache
// composes it, and render-roles counts its ready Pods into roleSummary.
const RouterDeploymentResource = "router-deployment"

// maxGenerateNameBase leaves room for the five characters the API server appends to a generateName,
// so that an XR name stays a valid 63-character label value.
const maxGenerateNameBase = 57

// ReplicaGenerateName is the generateName of a ModelReplica: its instance name, shortened when the
// API server's suffix would take it over 63 characters. The labels carry its identity, not the name.
func ReplicaGenerateName(deployment, role string, ordinal int32) string {
	base := InstanceName(deployment, role, ordinal)
	if len(base) > maxGenerateNameBase {
		base = base[:maxGenerateNameBase]
	}
	for len(base) > 0 && base[len(base)-1] == '-' {
		base = base[:len(base)-1]
	}
	return base + "-"
}

// ElasticHeadName is the role name of an Elastic EP deployment's Ray head and the name of its
// Service: <md>-elastic-head. Its Pods are generated as <md>-<md>-elastic-head-.
func ElasticHeadName(deployment string) string { return deployment + "-elastic-head" }

// ElasticHeadPort is the Ray head's GCS port; ElasticDashboardPort its dashboard's.
const (
	ElasticHeadPort      = 6379
	ElasticDashboardPort = 8265
)

// ElasticHeadAddress is the Ray address every Elastic EP member joins: <md>-elastic-head.<ns>.svc:6379.
func ElasticHeadAddress(deployment, namespace string) string {
	return ElasticHeadName(deployment) + "." + namespace + ".svc:" + strconv.Itoa(ElasticHeadPort)
}

// ElasticObservationName is the ConfigMap holding an Elastic EP deployment's observation document:
// elastic-observation-<md UID>.
func ElasticObservationName(deploymentUID string) string {
	return "elastic-observation-" + deploymentUID
}

// ElasticHeadResource and ElasticHeadServiceResource are the composition resource names of the Ray
// head's ModelRole and Service in a ModelDeployment's pipeline.
const (
	ElasticHeadResource        = "elastic-head"
	ElasticHeadServiceResource = "elastic-head-service"
)
