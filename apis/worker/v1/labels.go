package v1

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// Labels and annotations of the spec's "Pod labels and annotations" table and of the
// ModelDeployment itself. The keys are contracts: Kueue, Services, routers and runbooks select on
// them.
const (
	LabelPodGroupName = "kueue.x-k8s.io/pod-group-name"
	LabelQueueName    = "kueue.x-k8s.io/queue-name"
	// LabelPriorityClass names a Kueue WorkloadPriorityClass, as Kueue's own jobs carry it: on a
	// ModelDeployment, it is copied onto every Pod of every replica group, so each group's Workload
	// has that priority.
	LabelPriorityClass           = "kueue.x-k8s.io/priority-class"
	AnnotationPodGroupTotalCount = "kueue.x-k8s.io/pod-group-total-count"
	AnnotationRoleHash           = "kueue.x-k8s.io/role-hash"
	AnnotationPodGroupServing    = "kueue.x-k8s.io/pod-group-serving"
	AnnotationRequiredTopology   = "kueue.x-k8s.io/podset-required-topology"

	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"

	LabelRoleKind         = "modeldeployment.gpustack.ai/role-kind"
	LabelPodOrdinal       = "modeldeployment.gpustack.ai/pod-ordinal"
	LabelMemberIndex      = "modeldeployment.gpustack.ai/member-index"
	AnnotationPodSpecHash = "modeldeployment.gpustack.ai/pod-spec-hash"
	// LabelEndpointEligible "true" marks a serving member of a qualified replica; the members
	// controller writes and removes it, outside the pod-spec hash.
	LabelEndpointEligible = "modeldeployment.gpustack.ai/endpoint-eligible"
	// LabelServes "true" marks a member that serves HTTP on the serving port: the leader of every
	// replica, and every member of an External-DP Server replica. Rendered from the replica's own
	// revision, so each deployed configuration selects endpoints by its own mode.
	LabelServes = "modeldeployment.gpustack.ai/serves"
	// LabelRouter on a deployment's router Pods names the router implementation; the router's
	// endpoint picker excludes the Pods carrying it, and the metrics snapshot reads them as routers.
	LabelRouter = "modeldeployment.gpustack.ai/router"
	// LabelTransferRouted "true" marks a Pod llm-d-router may select on a deployment whose pair shares
	// a transfer document: the pairing controller gives it to one configuration at a time.
	LabelTransferRouted        = "modeldeployment.gpustack.ai/transfer-routed"
	AnnotationRenderVersion    = "modeldeployment.gpustack.ai/render-version"
	AnnotationMinRenderVersion = "modeldeployment.gpustack.ai/min-render-version"

	// The scrape annotations on an engine or router Pod whose command line mdplane renders: whether
	// to scrape it, and the path, port and scheme of its metrics. Prometheus's Pod discovery, the
	// PodMonitor and the metrics snapshot read them; a role that takes its command line over carries
	// none.
	AnnotationScrape       = "prometheus.io/scrape"
	AnnotationScrapePath   = "prometheus.io/path"
	AnnotationScrapePort   = "prometheus.io/port"
	AnnotationScrapeScheme = "prometheus.io/scheme"

	// AnnotationParkedGeneration on a parked Workload records the deployment generation the joint
	// admission check parked its set at; a new generation queues the set again.
	AnnotationParkedGeneration = "worker.gpustack.ai/parked-generation"
	// AnnotationRolloutHeld on a ModelRole says why its outdated replicas are not replaced now (a
	// reason, a colon, a message); the render step (weights that cannot be delivered) or the cache
	// step writes it in the same apply as the configuration that made them outdated, so the rollout
	// controller never sees one without the other.
	AnnotationRolloutHeld = "worker.gpustack.ai/rollout-held"
	// ReasonRolloutHeldByCache opens the rollout-held value the cache step writes while a
	// deployment's KV cache connection is unresolved; ReplicasUpToDate reports it as its reason.
	ReasonRolloutHeldByCache = "RolloutHeldByCache"
	// ReasonRolloutHeldByWeights opens the rollout-held value the deployment step writes while a
	// role's weights cannot be delivered: the rollout controller then neither replaces outdated
	// replicas nor fills empty slots, and the members controller creates no Pods.
	ReasonRolloutHeldByWeights = "RolloutHeldByWeights"

	// AnnotationRetirementRetry on a ModelDeployment asks an Aborted retirement to start again:
	// <roleName>:<replicaOrdinal>:<opaqueToken>.
	AnnotationRetirementRetry = "modeldeployment.gpustack.ai/retirement-retry"

	// AnnotationRolloutCadence on a ModelDeployment chooses what a replacement must reach before the
	// next old replica of its role leaves: RolloutCadenceAdmission (the default) or
	// RolloutCadenceCapacity (docs/rollout.md, "Capacity-preserving cadence").
	AnnotationRolloutCadence = "modeldeployment.gpustack.ai/rollout-cadence"

	// AnnotationEndpointEligibility "active" on a role's Service marks its eligibility term active:
	// once there, the term stays.
	AnnotationEndpointEligibility = "worker.gpustack.ai/endpoint-eligibility"
	// EndpointEligibilityActive is the value of AnnotationEndpointEligibility on a Service whose
	// selector carries the eligibility term.
	EndpointEligibilityActive = "active"

	// AnnotationElasticBootWidth on an Elastic EP master is the data-parallel size it booted with.
	AnnotationElasticBootWidth = "worker.gpustack.ai/elastic-boot-width"

	// FinalizerInstanceMembers keeps a replica's headless Service until the replica's members are
	// gone, so a departing member still resolves its peers while it drains.
	FinalizerInstanceMembers = "worker.gpustack.ai/instance-members"

	// NameModelDeployment is the app.kubernetes.io/name value on every replica Pod.
	NameModelDeployment = "model-deployment"
)

// RolloutHeldBy reports whether a rollout-held annotation value carries reason: the reason alone,
// or the reason, a colon and a message.
func RolloutHeldBy(held, reason string) bool {
	return held == reason || strings.HasPrefix(held, reason+":")
}

// GroupName is the Kueue pod-group name of one replica: gpustack-fnv64- and the FNV-1a 64 hash of
// namespace, deployment, role and ordinal. It is unique, not parseable; the ordinal travels in its
// own label.
func GroupName(namespace, deployment, role string, ordinal int32) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%s/%s/%d", namespace, deployment, role, ordinal)
	return fmt.Sprintf("gpustack-fnv64-%016x", h.Sum64())
}

// RolloutCadence is what a replacement must reach before the next old replica of its role leaves.
type RolloutCadence string

const (
	// RolloutCadenceAdmission waits for the replacement's group to be admitted by Kueue (the spec's
	// cadence).
	RolloutCadenceAdmission RolloutCadence = "admission"
	// RolloutCadenceCapacity waits for the replacement's members to be Ready, and every replica
	// already on the current configuration, so a role keeps replicas-1 serving replicas.
	RolloutCadenceCapacity RolloutCadence = "capacity-preserving"
)

// The gates a replacement in flight waits at (ModelRoleStatus.Replacement of internal.mdplane.io).
const (
	ReplacementGateAdmitted = "Admitted"
	ReplacementGateReady    = "Ready"
)

// CadenceOf is the deployment's rollout cadence: its annotation's, the admission cadence when unset
// (admission refuses any other value).
func CadenceOf(annotations map[string]string) RolloutCadence {
	if RolloutCadence(annotations[AnnotationRolloutCadence]) == RolloutCadenceCapacity {
		return RolloutCadenceCapacity
	}
	return RolloutCadenceAdmission
}
