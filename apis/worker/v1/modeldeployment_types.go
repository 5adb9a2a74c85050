package v1

import (
	"fmt"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine names a supported inference engine.
// +kubebuilder:validation:Enum=vLLM;SGLang
type Engine string

// The engines a ModelDeployment can run.
const (
	EngineVLLM   Engine = "vLLM"
	EngineSGLang Engine = "SGLang"
)

// RoleKind selects what a role does in the serving arrangement.
// +kubebuilder:validation:Enum=Server;Prefill;Decode;Encode
type RoleKind string

// The role kinds. Server is the default.
const (
	RoleKindServer  RoleKind = "Server"
	RoleKindPrefill RoleKind = "Prefill"
	RoleKindDecode  RoleKind = "Decode"
	RoleKindEncode  RoleKind = "Encode"
)

// RouterSpelling is the lowercase form routers and the role-kind Pod label use for a kind.
func (k RoleKind) RouterSpelling() string {
	switch k {
	case RoleKindPrefill:
		return "prefill"
	case RoleKindDecode:
		return "decode"
	case RoleKindEncode:
		return "encode"
	default:
		return "server"
	}
}

// RouterName names a supported router.
// +kubebuilder:validation:Enum=llm-d-router;vllm-router;sglang-gateway
type RouterName string

// The routers a ModelDeployment can put in front of its roles.
const (
	RouterLLMD          RouterName = "llm-d-router"
	RouterVLLM          RouterName = "vllm-router"
	RouterSGLangGateway RouterName = "sglang-gateway"
)

// KVConnector names a KV cache client implementation.
// +kubebuilder:validation:Enum=Mooncake
type KVConnector string

// ConnectorMooncake is the only connector; it is the default.
const ConnectorMooncake KVConnector = "Mooncake"

// TransferProtocol is the transport of a direct prefill/decode transfer.
// +kubebuilder:validation:Enum=Auto;TCP;RDMA;EFA;CANN;ROCM
type TransferProtocol string

// The transfer protocols.
const (
	TransferAuto TransferProtocol = "Auto"
	TransferTCP  TransferProtocol = "TCP"
	TransferRDMA TransferProtocol = "RDMA"
	TransferEFA  TransferProtocol = "EFA"
	TransferCANN TransferProtocol = "CANN"
	TransferROCM TransferProtocol = "ROCM"
)

// Schema limits the spec fixes. They bound what one render pass writes, so they are mdplane's own
// ceilings rather than Kubernetes ones. The role limit is a CEL rule rather than maxItems so that
// its refusal can say whose limit it is; the schema's maxItems on roles is only a looser bound that
// lets the API server estimate the cost of the per-role rules.
const (
	MaxRoles                     = 10
	MaxReplicas                  = 1024
	MaxSize                      = 64
	DefaultStartupTimeoutSeconds = 1800
	DefaultShmSize               = "16Gi"
)

// ModelDeployment declares the roles of one inference engine serving one model: their replicas, the
// Pods of each replica, the KV cache they share and the router in front of them.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=md,categories=gpustack
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=".spec.engine.name"
// +kubebuilder:printcolumn:name="Roles",type=string,JSONPath=".status.roleSummary"
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=".status.endpoint"
type ModelDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the model, the engine and the roles.
	Spec ModelDeploymentSpec `json:"spec"`
	// Status reports what is deployed, admitted and serving.
	// +optional
	Status ModelDeploymentStatus `json:"status,omitempty"`
}

// ModelDeploymentList is a list of ModelDeployments.
//
// +kubebuilder:object:root=true
type ModelDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ModelDeployments.
	Items []ModelDeployment `json:"items"`
}

// ModelDeploymentSpec is the desired state of a ModelDeployment.
//
// +kubebuilder:validation:XValidation:rule="has(self.kvCache) == has(oldSelf.kvCache)",message="spec.kvCache is frozen: adding or removing the cache binding describes a different deployment, which is created rather than edited"
type ModelDeploymentSpec struct {
	// Model is what the engine serves. It identifies the deployment and is frozen.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.model is frozen: a different model describes a different deployment, which is created rather than edited"
	Model ModelDeploymentModel `json:"model"`

	// Engine is the inference engine every role runs.
	Engine ModelDeploymentEngine `json:"engine"`

	// KVCache attaches the roles to a shared Mooncake KV cache pool through a KVCachePoolBinding in
	// this namespace. Omit it to run without a shared pool. Frozen.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.kvCache is frozen: a different cache binding describes a different deployment, which is created rather than edited"
	KVCache *ModelDeploymentKVCache `json:"kvCache,omitempty"`

	// KVTransfer configures the direct prefill/decode transfer of a declared pair.
	// +optional
	KVTransfer *ModelDeploymentKVTransfer `json:"kvTransfer,omitempty"`

	// Router puts a router in front of the roles. The block may be added or removed; its name is
	// frozen in place.
	// +optional
	Router *ModelDeploymentRouter `json:"router,omitempty"`

	// Roles are the one to ten roles of the deployment, keyed by name. The set of roles and each
	// role's name and kind are frozen.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.size() <= 10",message="a ModelDeployment declares at most 10 roles: this is mdplane's own role-count limit, since every role renders its own replicas, Services and queue references"
	// +kubebuilder:validation:XValidation:rule="self.all(r, oldSelf.exists(o, o.name == r.name)) && oldSelf.all(o, self.exists(r, r.name == o.name))",message="spec.roles: the set of roles is frozen: adding, removing or renaming a role describes a different deployment, which is created rather than edited"
	Roles []ModelDeploymentRole `json:"roles"`
}

// ModelDeploymentModel names the served model.
type ModelDeploymentModel struct {
	// Name is the model the engine serves, as the engine's hub client spells it (for example
	// Qwen/Qwen2.5-72B-Instruct). It is served, never provisioned.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// ArtifactRef names a ModelArtifact in this namespace that delivers the weights.
	// +optional
	ArtifactRef *LocalReference `json:"artifactRef,omitempty"`
}

// LocalReference names an object in the referring object's namespace.
type LocalReference struct {
	// Name of the referenced object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ModelDeploymentEngine selects the inference engine and its runner image.
//
// +kubebuilder:validation:XValidation:rule="self.name == oldSelf.name",message="spec.engine.name is frozen: a different engine describes a different deployment, which is created rather than edited"
type ModelDeploymentEngine struct {
	// Name is the engine: vLLM or SGLang. Frozen.
	Name Engine `json:"name"`

	// Image is the runner image every role runs unless the role names its own. The tag must exist in
	// a registry the cluster can pull; mdplane never infers one.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
}

// ModelDeploymentKVCache binds the deployment to a KV cache pool.
type ModelDeploymentKVCache struct {
	// PoolRef names the KVCachePoolBinding in this namespace that grants access to a pool and
	// declares the reuse domain.
	PoolRef KVCachePoolBindingReference `json:"poolRef"`

	// Connector is the cache client implementation. Mooncake is the only value, and the default.
	// +optional
	// +kubebuilder:default=Mooncake
	Connector KVConnector `json:"connector,omitempty"`
}

// KVCachePoolBindingReference names a KVCachePoolBinding in the deployment's namespace.
type KVCachePoolBindingReference struct {
	// Name of the KVCachePoolBinding. The Binding is the authorization point, so the name may not be
	// empty.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self != ''",message="spec.kvCache.poolRef.name is empty: the KVCachePoolBinding is the authorization point and an empty reference names none; name a Binding in this namespace or omit spec.kvCache"
	Name string `json:"name"`
}

// ModelDeploymentKVTransfer configures the direct prefill/decode transfer.
type ModelDeploymentKVTransfer struct {
	// Protocol is the transport of the direct transfer. Unset means TCP.
	// +optional
	Protocol TransferProtocol `json:"protocol,omitempty"`
}

// ModelDeploymentRouter is the router in front of the roles.
//
// +kubebuilder:validation:XValidation:rule="self.name == oldSelf.name",message="spec.router.name is frozen in place: a different router describes a different deployment, which is created rather than edited; remove the router block and add another instead"
type ModelDeploymentRouter struct {
	// Name is the router implementation.
	Name RouterName `json:"name"`

	// Replicas is how many router Pods run.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Replicas *int32 `json:"replicas,omitempty"`

	// Image overrides the router image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// ExtraArgs are appended after the arguments mdplane renders for the router.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=4096
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// ImagePullPolicy of the router container.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets used to pull the router image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// RequestTimeoutSeconds bounds one proxied request.
	// +optional
	// +kubebuilder:validation:Minimum=1
	RequestTimeoutSeconds *int32 `json:"requestTimeoutSeconds,omitempty"`

	// DisaggregationThresholdTokens is the prompt length below which llm-d-router serves a request
	// without the prefill/decode split. llm-d-router only.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DisaggregationThresholdTokens *int32 `json:"disaggregationThresholdTokens,omitempty"`
}

// ModelDeploymentRole is one role: replicas independent serving instances of size Pods each.
//
// +kubebuilder:validation:XValidation:rule="(has(self.kind) ? self.kind : 'Server') == (has(oldSelf.kind) ? oldSelf.kind : 'Server')",message="kind is frozen: a role of another kind describes a different deployment, which is created rather than edited"
// +kubebuilder:validation:XValidation:rule="has(self.elasticEp) == has(oldSelf.elasticEp)",message="elasticEp is frozen: adding or removing the Elastic EP profile describes a different deployment, which is created rather than edited"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.elasticEp) || (self.size == oldSelf.size && self.instanceType == oldSelf.instanceType && has(self.command) == has(oldSelf.command) && (!has(self.command) || self.command == oldSelf.command))",message="on a role carrying elasticEp, size, instanceType, resources and command are frozen: the profile admits one fixed member configuration and width is its only setting"
//
// The same rule's resources half is apis/validation's (ElasticFrozenMessage): CEL compares the
// int-or-string quantities by type ("1" is not 1), so the comparison of quantities is Go's
// (docs/decisions/0040-elastic-ep.md).
type ModelDeploymentRole struct {
	// Name identifies the role and becomes the Kueue PodSet name. A DNS label.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// Kind selects the role's behaviour: Server (the default), Prefill, Decode or Encode. Frozen.
	// +optional
	// +kubebuilder:default=Server
	Kind RoleKind `json:"kind,omitempty"`

	// Replicas is the number of independent serving instances. Changing it adds or removes instances
	// and restarts none of the survivors.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	Replicas int32 `json:"replicas,omitempty"`

	// Size is the number of Pods forming one instance (the leader m0 plus workers). Editing it
	// replaces the role's instances one at a time.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Size int32 `json:"size,omitempty"`

	// InstanceType names the cluster-scoped InstanceType the role's Pods run on; its published
	// entrance is the Kueue queue they are admitted through.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	InstanceType string `json:"instanceType"`

	// Resources is the accelerator request of one Pod. CPU, memory and ephemeral storage derive from
	// the InstanceType's unit resources.
	// +optional
	Resources *ModelDeploymentRoleResources `json:"resources,omitempty"`

	// Topology constrains where each replica group is placed.
	// +optional
	Topology *ModelDeploymentRoleTopology `json:"topology,omitempty"`

	// Command takes the engine command line over: it is the whole argv, and mdplane then synthesizes
	// no engine argument and no cache client environment for the role.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	Command []string `json:"command,omitempty"`

	// ExtraArgs are appended after the arguments mdplane synthesizes. A key mdplane owns is refused.
	// Inert beside Command.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=4096
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// Env is appended after the environment mdplane synthesizes. A name mdplane owns is refused.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	Env []ModelDeploymentEnvVar `json:"env,omitempty"`

	// Image overrides spec.engine.image for this role.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`

	// ImagePullPolicy of the engine container.
	// +optional
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ImagePullSecrets used to pull the role's image.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// Privileged runs the engine container privileged.
	// +optional
	Privileged bool `json:"privileged,omitempty"`

	// Ports are the container ports the engine and the role's Service expose. The first entry is the
	// serving port; 8000 when none is declared.
	// +optional
	// +listType=map
	// +listMapKey=port
	// +listMapKey=protocol
	// +kubebuilder:validation:MaxItems=64
	Ports []ModelDeploymentPort `json:"ports,omitempty"`

	// AdditionalVolumes are mounted into the engine container. An explicit mount of /dev/shm or of
	// /var/lib/gpustack/cache replaces the one mdplane would render.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	AdditionalVolumes []ModelDeploymentAdditionalVolume `json:"additionalVolumes,omitempty"`

	// ShmSize is the capacity of the memory-backed /dev/shm of each Pod: a positive quantity, 16Gi
	// when unset.
	// +optional
	ShmSize *resource.Quantity `json:"shmSize,omitempty"`

	// TerminationGracePeriodSeconds of each Pod.
	// +optional
	// +kubebuilder:validation:Minimum=15
	// +kubebuilder:validation:Maximum=3600
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`

	// StartupTimeoutSeconds is the startup budget; the startup probe allows ceil(value/10) failures
	// at a 10 second period.
	// +optional
	// +kubebuilder:default=1800
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	StartupTimeoutSeconds *int32 `json:"startupTimeoutSeconds,omitempty"`

	// ElasticEP makes the role one Elastic expert-parallel instance whose width, not its replicas,
	// scales. Its presence is frozen.
	// +optional
	ElasticEP *ModelDeploymentRoleElasticEP `json:"elasticEp,omitempty"`
}

// ModelDeploymentRoleResources is the accelerator request of one Pod of a role.
type ModelDeploymentRoleResources struct {
	// Accelerator is the number of whole accelerators per Pod. Defaulted from the InstanceType when
	// unset.
	// +optional
	Accelerator *resource.Quantity `json:"accelerator,omitempty"`

	// AcceleratorSlicedMemoryPercentage requests a logical slice of one accelerator's memory.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	AcceleratorSlicedMemoryPercentage *int32 `json:"acceleratorSlicedMemoryPercentage,omitempty"`

	// AcceleratorSlicedCoresPercentage requests a logical slice of one accelerator's cores.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	AcceleratorSlicedCoresPercentage *int32 `json:"acceleratorSlicedCoresPercentage,omitempty"`

	// AcceleratorPartitionedProfile requests one device partition of the named profile.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	AcceleratorPartitionedProfile string `json:"acceleratorPartitionedProfile,omitempty"`

	// Interface is the whole number of fabric (RDMA or EFA) interfaces per Pod. Unset or zero adds no
	// device request.
	// +optional
	Interface *resource.Quantity `json:"interface,omitempty"`
}

// ModelDeploymentRoleTopology is the topology request of each replica group of a role.
type ModelDeploymentRoleTopology struct {
	// RequiredLevel is a node label key naming a topology level; the Pods of each replica must fit in
	// one domain at that level. kubernetes.io/hostname is implicit and refused.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	RequiredLevel string `json:"requiredLevel,omitempty"`
}

// ModelDeploymentEnvVar is one environment variable of the engine container.
type ModelDeploymentEnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// Value of the variable.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Value string `json:"value,omitempty"`
}

// ModelDeploymentPort is one container port of the engine container.
type ModelDeploymentPort struct {
	// Port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// Protocol of the port. TCP when unset.
	// +optional
	// +kubebuilder:default=TCP
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol corev1.Protocol `json:"protocol,omitempty"`
}

// ModelDeploymentAdditionalVolume is one extra volume mounted into the engine container. An entry
// naming no source is skipped.
type ModelDeploymentAdditionalVolume struct {
	// MountPath inside the container.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(/[^/]+)+$`
	MountPath string `json:"mountPath"`
	// ReadOnly mounts the volume read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
	// SubPath mounts one path inside the volume.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^/].*$`
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="subPath may not contain '..'"
	SubPath string `json:"subPath,omitempty"`
	// ConfigMap in this namespace to mount.
	// +optional
	ConfigMap *corev1.LocalObjectReference `json:"configMap,omitempty"`
	// Secret in this namespace to mount.
	// +optional
	Secret *corev1.LocalObjectReference `json:"secret,omitempty"`
	// HostPath on the node to mount.
	// +optional
	HostPath *corev1.HostPathVolumeSource `json:"hostPath,omitempty"`
	// EmptyDir to mount, for example a /dev/shm with its own medium and size.
	// +optional
	EmptyDir *corev1.EmptyDirVolumeSource `json:"emptyDir,omitempty"`
	// PersistentVolumeClaim in this namespace to mount.
	// +optional
	PersistentVolumeClaim *corev1.PersistentVolumeClaimVolumeSource `json:"persistentVolumeClaim,omitempty"`
}

// ModelDeploymentRoleElasticEP is the Elastic expert-parallel profile of a role.
//
// +kubebuilder:validation:XValidation:rule="has(self.headInstanceType) == has(oldSelf.headInstanceType) && (!has(self.headInstanceType) || self.headInstanceType == oldSelf.headInstanceType)",message="elasticEp.headInstanceType is frozen"
type ModelDeploymentRoleElasticEP struct {
	// Width is the total number of engines, the master included.
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=64
	Width int32 `json:"width"`
	// HeadInstanceType is the CPU-only InstanceType of the Ray head Pod. Frozen.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	HeadInstanceType string `json:"headInstanceType,omitempty"`
}

// Phase summarizes a ModelDeployment for people.
// +kubebuilder:validation:Enum=Starting;Ready;Degraded;Deleting
type Phase string

// The phases.
const (
	PhaseStarting Phase = "Starting"
	PhaseReady    Phase = "Ready"
	PhaseDegraded Phase = "Degraded"
	PhaseDeleting Phase = "Deleting"
)

// ModelDeploymentStatus is the observed state of a ModelDeployment.
type ModelDeploymentStatus struct {
	// Conditions are written by Crossplane (Synced, Ready) and by mdplane's functions and controllers
	// (QuotaReserved, CacheAttached, ReplicasUpToDate, RoleKindsReady, KVEventsPublishing, ...).
	xpv2.ConditionedStatus `json:",inline"`

	// Phase summarizes the deployment.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// PhaseMessage explains the phase.
	// +optional
	PhaseMessage string `json:"phaseMessage,omitempty"`

	// Endpoint is the address of the deployment's Service.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Endpoint string `json:"endpoint,omitempty"`

	// RoleSummary counts Ready instances per kind, like 1R3P4D (router Pods, Server, Prefill, Decode).
	// +optional
	RoleSummary string `json:"roleSummary,omitempty"`

	// Roles report each role, keyed by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Roles []RoleStatus `json:"roles,omitempty"`

	// KVCache echoes the Binding, pool and reuse domain the deployment is attached to. Absent until
	// first resolved; kept when the Binding is lost.
	// +optional
	KVCache *KVCacheStatus `json:"kvCache,omitempty"`

	// Router reports the router and what it fronts.
	// +optional
	Router *RouterStatus `json:"router,omitempty"`

	// Model reports the resolved weights.
	// +optional
	Model *ModelStatus `json:"model,omitempty"`

	// Retirement is the operation retiring one seated replica a scale-down no longer declares;
	// absent when none is in flight or retained.
	// +optional
	Retirement *Retirement `json:"retirement,omitempty"`
}

// RetirementState is where a retirement operation stands.
// +kubebuilder:validation:Enum=Admitted;Disqualified;Withdrawing;Draining;Deleting;Settling;Aborted;Completed
type RetirementState string

// The states of a retirement, in the order an operation passes them.
const (
	RetirementAdmitted     RetirementState = "Admitted"
	RetirementDisqualified RetirementState = "Disqualified"
	RetirementWithdrawing  RetirementState = "Withdrawing"
	RetirementDraining     RetirementState = "Draining"
	RetirementDeleting     RetirementState = "Deleting"
	RetirementSettling     RetirementState = "Settling"
	RetirementAborted      RetirementState = "Aborted"
	RetirementCompleted    RetirementState = "Completed"
)

// Retirement is one replica's way out: withdrawn from the endpoints, drained, deleted with its
// Workload, and its release observed, each phase within a budget.
type Retirement struct {
	// RoleName is the role of the replica retired.
	RoleName string `json:"roleName"`
	// ReplicaOrdinal is the replica's slot.
	ReplicaOrdinal int32 `json:"replicaOrdinal"`
	// ObservedGeneration is the deployment generation that admitted the operation.
	ObservedGeneration int64 `json:"observedGeneration"`
	// TargetMemberUIDs are the replica's Pods, sorted; every delete carries its UID as a precondition.
	// +optional
	// +listType=atomic
	TargetMemberUIDs []string `json:"targetMemberUIDs,omitempty"`
	// TargetWorkloadUID is the UID of the replica group's Workload; empty when it had none.
	TargetWorkloadUID string `json:"targetWorkloadUID"`
	// State is where the operation stands.
	State RetirementState `json:"state"`
	// Reason says why, in words.
	// +optional
	Reason string `json:"reason,omitempty"`
	// StartedAt is when the operation was admitted (or retried).
	StartedAt metav1.Time `json:"startedAt"`
	// Deadline is when the whole operation's budget is spent.
	Deadline metav1.Time `json:"deadline"`
	// PhaseStartedAt is when the current phase's budget started.
	PhaseStartedAt metav1.Time `json:"phaseStartedAt"`
	// LastConsumedRetryToken is the token of the last retry directive accepted.
	// +optional
	LastConsumedRetryToken string `json:"lastConsumedRetryToken,omitempty"`
}

// Ready, UpToDate and QuotaReserved of a RoleStatus are copied from the role's ModelRole: nil until
// it has reported them, and then reported even at zero.

// RoleStatus reports one role. Counts are in instances.
type RoleStatus struct {
	// Name of the role.
	Name string `json:"name"`
	// Kind of the role.
	// +optional
	Kind RoleKind `json:"kind,omitempty"`
	// Desired is the number of instances the role declares.
	// +optional
	Desired int32 `json:"desired,omitempty"`
	// Ready is the number of instances whose every member is Ready.
	// +optional
	Ready *int32 `json:"ready,omitempty"`
	// UpToDate is the number of instances running the current configuration.
	// +optional
	UpToDate *int32 `json:"upToDate,omitempty"`
	// QuotaReserved is the number of instances whose Workload holds a quota reservation.
	// +optional
	QuotaReserved *int32 `json:"quotaReserved,omitempty"`
	// Unmanaged is true when the role takes its command line over, so mdplane configured no cache
	// client for it.
	// +optional
	Unmanaged bool `json:"unmanaged,omitempty"`
	// AssignedFlavors are the Kueue ResourceFlavors the role's Workloads were admitted on.
	// +optional
	// +listType=atomic
	AssignedFlavors []string `json:"assignedFlavors,omitempty"`
	// Parallelism is what the role's command line declares.
	// +optional
	Parallelism *RoleParallelism `json:"parallelism,omitempty"`
	// Endpoints count the role's qualified replica groups and the endpoints routers serve.
	// +optional
	Endpoints *RoleEndpoints `json:"endpoints,omitempty"`
}

// RoleEndpoints reports how many of a role's replicas may take traffic.
type RoleEndpoints struct {
	// Eligible counts the role's qualified replica groups (not Pods): absent while any replica is
	// inconclusive, 0 when every replica is conclusively unqualified.
	// +optional
	Eligible *int32 `json:"eligible,omitempty"`
	// Serving is what the routers serve of the role.
	// +optional
	Serving *ServingEndpoints `json:"serving,omitempty"`
}

// The states of ServingEndpoints.
const (
	ServingConfirmed     = "Confirmed"
	ServingNotConverged  = "NotConverged"
	ServingUnknown       = "Unknown"
	ServingNotConfigured = "NotConfigured"
)

// ServingEndpoints counts the physical HTTP endpoints the routers serve of a role.
type ServingEndpoints struct {
	// State is Confirmed, NotConverged, Unknown or NotConfigured (no spec.router).
	// +kubebuilder:validation:Enum=Confirmed;NotConverged;Unknown;NotConfigured
	State string `json:"state"`
	// Value is the count, only when Confirmed.
	// +optional
	Value *int32 `json:"value,omitempty"`
}

// How a role's data-parallel ranks take traffic (RoleParallelism.LoadBalance).
const (
	LoadBalanceInternal  = "Internal"
	LoadBalanceExternal  = "External"
	LoadBalanceHybrid    = "Hybrid"
	LoadBalanceMultiPort = "MultiPort"
	LoadBalanceUnknown   = "Unknown"
)

// Where a role's degrees were read (ParallelismSource.Kind).
const (
	ParallelismFromExtraArgs        = "ExtraArgs"
	ParallelismFromCommand          = "Command"
	ParallelismFromUnmanagedCommand = "UnmanagedCommand"
	ParallelismFromUnknown          = "Unknown"
)

// RoleParallelism is the parallel layout read from a role's command line.
type RoleParallelism struct {
	// Declared are the degrees the command line names.
	// +optional
	Declared ParallelDegrees `json:"declared,omitempty"`
	// Modes are the parallel modes the command line turns on (expertParallel, dpAttention,
	// prefillContextParallel; other modes keep their flag's spelling).
	// +optional
	Modes map[string]bool `json:"modes,omitempty"`
	// LoadBalance is how data-parallel ranks take traffic.
	// +optional
	// +kubebuilder:validation:Enum=Internal;External;Hybrid;MultiPort;Unknown
	LoadBalance string `json:"loadBalance,omitempty"`
	// Source is where the degrees were read.
	// +optional
	Source *ParallelismSource `json:"source,omitempty"`
}

// ParallelDegrees are the parallel degrees of one member.
type ParallelDegrees struct {
	// TensorParallel degree.
	// +optional
	TensorParallel *int32 `json:"tensorParallel,omitempty"`
	// PipelineParallel degree.
	// +optional
	PipelineParallel *int32 `json:"pipelineParallel,omitempty"`
	// DataParallel degree.
	// +optional
	DataParallel *int32 `json:"dataParallel,omitempty"`
	// DataParallelLocal degree.
	// +optional
	DataParallelLocal *int32 `json:"dataParallelLocal,omitempty"`
	// ExpertParallel degree.
	// +optional
	ExpertParallel *int32 `json:"expertParallel,omitempty"`
	// PrefillContextParallel degree.
	// +optional
	PrefillContextParallel *int32 `json:"prefillContextParallel,omitempty"`
	// DecodeContextParallel degree.
	// +optional
	DecodeContextParallel *int32 `json:"decodeContextParallel,omitempty"`
	// AttentionContextParallel degree.
	// +optional
	AttentionContextParallel *int32 `json:"attentionContextParallel,omitempty"`
	// MoeDpSize is the data-parallel degree of the MoE layers.
	// +optional
	MoeDpSize *int32 `json:"moeDpSize,omitempty"`
	// DwdpSize degree.
	// +optional
	DwdpSize *int32 `json:"dwdpSize,omitempty"`
}

// ParallelismSource says where a role's degrees were read.
type ParallelismSource struct {
	// Kind is ExtraArgs, Command, UnmanagedCommand or Unknown.
	// +optional
	// +kubebuilder:validation:Enum=ExtraArgs;Command;UnmanagedCommand;Unknown
	Kind string `json:"kind,omitempty"`
	// Complete is true when every degree could be read.
	// +optional
	Complete bool `json:"complete,omitempty"`
	// UnreadableReason says why a degree could not be read.
	// +optional
	UnreadableReason string `json:"unreadableReason,omitempty"`
}

// KVCacheStatus echoes the attached Binding, pool and domain.
type KVCacheStatus struct {
	// Binding is the KVCachePoolBinding's name.
	// +optional
	Binding string `json:"binding,omitempty"`
	// Pool is the KVCachePool's name.
	// +optional
	Pool string `json:"pool,omitempty"`
	// Domain is the Binding's reuse domain.
	// +optional
	Domain *KVCacheDomain `json:"domain,omitempty"`
}

// RouterNotReadyMessage is the RouterReady condition's message while the router has no ready
// replica, and the phase message of a deployment whose roles are all Ready but its router is not.
func RouterNotReadyMessage(router RouterName) string {
	return fmt.Sprintf("router %q has no ready replicas", router)
}

// RouterStatus reports the router.
type RouterStatus struct {
	// Name of the router.
	// +optional
	Name RouterName `json:"name,omitempty"`
	// Endpoint is the router's address.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// PoolEndpoint is the address of the endpoint pool the router reads.
	// +optional
	PoolEndpoint string `json:"poolEndpoint,omitempty"`
	// Roles are the roles the router fronts.
	// +optional
	// +listType=map
	// +listMapKey=name
	Roles []RouterRoleStatus `json:"roles,omitempty"`
	// Metrics are the engine metrics the router scores endpoints on; llm-d-router only.
	// +optional
	Metrics *RouterMetricsStatus `json:"metrics,omitempty"`
}

// RouterMetricsStatus names the engine metrics a router reads, and the port it scrapes them on.
type RouterMetricsStatus struct {
	// Port is the engine port the metrics are scraped on.
	// +optional
	Port int32 `json:"port,omitempty"`
	// QueuedRequests is the metric counting requests waiting in the engine.
	// +optional
	QueuedRequests string `json:"queuedRequests,omitempty"`
	// RunningRequests is the metric counting requests the engine is running.
	// +optional
	RunningRequests string `json:"runningRequests,omitempty"`
	// KVCacheUtilization is the metric of the engine's KV cache usage.
	// +optional
	KVCacheUtilization string `json:"kvCacheUtilization,omitempty"`
}

// RouterRoleStatus is one role as the router sees it.
type RouterRoleStatus struct {
	// Name of the role.
	Name string `json:"name"`
	// Kind of the role in the router's spelling.
	// +optional
	Kind string `json:"kind,omitempty"`
	// Selector is the label selector of the role's serving Pods.
	// +optional
	Selector string `json:"selector,omitempty"`
	// Endpoint is the role's Service address.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// KVEvents is where the role publishes KV cache events.
	// +optional
	KVEvents *KVEventsStatus `json:"kvEvents,omitempty"`
}

// KVEventsStatus is the dialable form of a role's KV event publisher.
type KVEventsStatus struct {
	// Endpoint of the publisher.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ReplayEndpoint of the publisher.
	// +optional
	ReplayEndpoint string `json:"replayEndpoint,omitempty"`
	// Topic the events are published on.
	// +optional
	Topic string `json:"topic,omitempty"`
}

// ModelStatus reports the resolved weights.
type ModelStatus struct {
	// Artifact is the ModelArtifact's name.
	// +optional
	Artifact string `json:"artifact,omitempty"`
	// Revision is the resolved revision.
	// +optional
	Revision string `json:"revision,omitempty"`
	// ManifestDigest is the digest of the resolved file manifest.
	// +optional
	ManifestDigest string `json:"manifestDigest,omitempty"`
	// Delivery is how the weights reach the Pods.
	// +optional
	// +kubebuilder:validation:Enum=PVC;Engine;Node;Image
	Delivery string `json:"delivery,omitempty"`
}

// WithDefaults returns the role with the schema's defaults applied, so code that judges or renders
// a role never depends on whether the object came through the API server.
func (r ModelDeploymentRole) WithDefaults() ModelDeploymentRole {
	if r.Kind == "" {
		r.Kind = RoleKindServer
	}
	if r.Replicas == 0 {
		r.Replicas = 1
	}
	if r.Size == 0 {
		r.Size = 1
	}
	if r.StartupTimeoutSeconds == nil {
		timeout := int32(DefaultStartupTimeoutSeconds)
		r.StartupTimeoutSeconds = &timeout
	}
	return r
}

// TakesOver reports whether the role takes its whole command line over (spec.roles[].command is set):
// mdplane then synthesizes nothing onto it — no flags, probes, cache client, routing proxy or reserved
// ports — and its extraArgs are inert.
func (r ModelDeploymentRole) TakesOver() bool { return len(r.Command) > 0 }

// EngineArgs is the part of the engine's command line the user wrote: the whole argv of a take-over
// role, else the extraArgs appended to the rendered launch line. Flags the engine reads (--port,
// parallel degrees, TLS) are read from it.
func (r ModelDeploymentRole) EngineArgs() []string {
	if r.TakesOver() {
		return r.Command
	}
	return r.ExtraArgs
}

// EngineArgsField is the field EngineArgs come from, command or extraArgs, for refusals to name.
func (r ModelDeploymentRole) EngineArgsField() string {
	if r.TakesOver() {
		return "command"
	}
	return "extraArgs"
}
