package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KVCacheBackend is a cluster-scoped Mooncake store: a leader and groups of members (managed) or
// the endpoints of one run elsewhere (external). mdplane does not run it; it reads the backend a
// pool names for the transports its groups offer.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=kvcb,categories=gpustack
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=".status.endpoints[?(@.name=='Client')].address"
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=".status.capacity.total"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type KVCacheBackend struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the store: its image, connection and transport.
	Spec KVCacheBackendSpec `json:"spec"`
	// Status reports the store's endpoints, capacity and members.
	// +optional
	Status KVCacheBackendStatus `json:"status,omitempty"`
}

// KVCacheBackendList is a list of KVCacheBackends.
//
// +kubebuilder:object:root=true
type KVCacheBackendList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the KVCacheBackends.
	Items []KVCacheBackend `json:"items"`
}

// KVCacheBackendTypeMooncake is the one store implementation a backend may name.
const KVCacheBackendTypeMooncake = "Mooncake"

// The transport protocols of a backend or a group, in the API's spelling (case-sensitive).
const (
	TransportAuto = "Auto"
	TransportTCP  = "TCP"
	TransportRDMA = "RDMA"
	TransportEFA  = "EFA"
	TransportCANN = "CANN"
	TransportROCM = "ROCM"
	TransportMUSA = "MUSA"
	TransportMACA = "MACA"
)

// The endpoint names of a backend.
const (
	// KVCacheBackendEndpointNameClient is the address engines connect to.
	KVCacheBackendEndpointNameClient = "Client"
	// KVCacheBackendEndpointNameAdmin is the address operators read /metrics and the admin API at.
	KVCacheBackendEndpointNameAdmin = "Admin"
)

// KVCacheBackendSpec is the desired state of a KVCacheBackend.
type KVCacheBackendSpec struct {
	// Type is the store implementation, not the medium.
	// +optional
	// +kubebuilder:default=Mooncake
	// +kubebuilder:validation:Enum=Mooncake
	Type string `json:"type,omitempty"`
	// Image of the store; empty falls back to the Setting kv-cache-backend-image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.matches('^\\\\s*$')",message="spec.image is blank: name an image, or leave the field out to use the Setting kv-cache-backend-image"
	Image string `json:"image,omitempty"`
	// ImagePullPolicy of the store's containers; unset resolves from the tag as the API server would.
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy corev1.PullPolicy `json:"imagePullPolicy,omitempty"`
	// ImagePullSecrets of the store's Pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
	// Connection is the store mdplane's consumers reach: one run here (managed) or elsewhere
	// (external).
	Connection KVCacheBackendConnection `json:"connection"`
	// Transport is the backend-wide transport; a group may override it.
	// +optional
	// +kubebuilder:default={}
	Transport KVCacheBackendTransport `json:"transport,omitempty"`
}

// KVCacheBackendTransport is the backend-wide transport.
type KVCacheBackendTransport struct {
	// Protocol every group uses unless it overrides it. Auto resolves to TCP.
	// +optional
	// +kubebuilder:default=Auto
	// +kubebuilder:validation:Enum=Auto;TCP;RDMA;EFA;CANN;ROCM;MUSA;MACA
	Protocol string `json:"protocol,omitempty"`
}

// KVCacheBackendConnection is exactly one of managed or external.
//
// +kubebuilder:validation:XValidation:rule="has(self.managed) || has(self.external)",message="one of \"managed\" or \"external\" must be set: a backend with neither describes nothing"
// +kubebuilder:validation:XValidation:rule="!(has(self.managed) && has(self.external))",message="only one of \"managed\" or \"external\" may be set: a backend with both describes two"
type KVCacheBackendConnection struct {
	// Managed is a store whose leader and members run in this cluster.
	// +optional
	Managed *KVCacheBackendManaged `json:"managed,omitempty"`
	// External is a store run elsewhere, reached at its endpoints.
	// +optional
	External *KVCacheBackendExternal `json:"external,omitempty"`
}

// KVCacheBackendExternal is a store run elsewhere.
type KVCacheBackendExternal struct {
	// Endpoints of the store: both Client and Admin.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:XValidation:rule="self.exists(e, e.name == 'Client') && self.exists(e, e.name == 'Admin')",message="spec.connection.external.endpoints needs both a Client and an Admin endpoint: engines connect to Client, operators read Admin"
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.address.matches('^[^\\\\s/]+:[0-9]{1,5}$'))",message="an endpoint address must be a clean host:port with no spaces, scheme or path"
	Endpoints []KVCacheBackendEndpoint `json:"endpoints"`
}

// KVCacheBackendEndpoint is one named address of a store.
type KVCacheBackendEndpoint struct {
	// Name is Client (engines connect) or Admin (operators read /metrics and the admin API).
	// +kubebuilder:validation:Enum=Client;Admin
	Name string `json:"name"`
	// Address is host:port.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=259
	Address string `json:"address"`
}

// KVCacheBackendManaged is a store run in this cluster: a leader and groups of members.
type KVCacheBackendManaged struct {
	// Leader is the store's master.
	Leader KVCacheBackendLeader `json:"leader"`
	// Members are the groups: one DaemonSet each, identified by position.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.filter(m, has(m.localDisks) && m.localDisks.size() > 0).size() <= 1",message="only one group of spec.connection.managed.members may carry localDisks: the store has one disk tier"
	Members []KVCacheBackendMember `json:"members"`
	// ScaleIn configures how a member drains before it leaves.
	// +optional
	ScaleIn *KVCacheBackendScaleIn `json:"scaleIn,omitempty"`
}

// KVCacheBackendScaleIn configures a member's drain.
type KVCacheBackendScaleIn struct {
	// GracePeriodSeconds a member drains for before it is stopped.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	GracePeriodSeconds int32 `json:"gracePeriodSeconds,omitempty"`
}

// KVCacheBackendLeader is the store's master.
//
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || self.replicas == 1 || has(self.highAvailability)",message="spec.connection.managed.leader.replicas above 1 needs leader.highAvailability: replicas without an election would each act as the master"
type KVCacheBackendLeader struct {
	// Replicas of the leader.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=5
	Replicas *int32 `json:"replicas,omitempty"`
	// HighAvailability, when present, runs the leader with an election.
	// +optional
	HighAvailability *KVCacheBackendLeaderHighAvailability `json:"highAvailability,omitempty"`
	// AllocationStrategy picks the member a write lands on.
	// +optional
	// +kubebuilder:default=FreeRatioFirst
	// +kubebuilder:validation:Enum=Random;FreeRatioFirst
	AllocationStrategy string `json:"allocationStrategy,omitempty"`
	// MultiTenancy keeps a tenant ledger; unset is off.
	// +optional
	MultiTenancy bool `json:"multiTenancy,omitempty"`
	// ExtraArgs of the leader, as -flag or -flag=value.
	// +optional
	// +listType=atomic
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// ExtraEnv of the leader.
	// +optional
	// +listType=map
	// +listMapKey=name
	ExtraEnv []InstanceEnvVar `json:"extraEnv,omitempty"`
}

// KVCacheBackendLeaderHighAvailability runs the leader with an election.
type KVCacheBackendLeaderHighAvailability struct {
	// MemberAddressing is how members find the elected leader.
	// +optional
	// +kubebuilder:default=Service
	// +kubebuilder:validation:Enum=Lease;Service
	MemberAddressing string `json:"memberAddressing,omitempty"`
}

// InstanceEnvVar is one environment variable of a store container.
type InstanceEnvVar struct {
	// Name of the variable.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Value of the variable.
	// +optional
	Value string `json:"value,omitempty"`
}

// KVCacheBackendMember is one group of members: one per node its selector picks.
type KVCacheBackendMember struct {
	// NodeSelector picks the nodes that run one member each.
	NodeSelector map[string]string `json:"nodeSelector"`
	// Medium the group's segments live in. DRAM is charged to the Pod's memory request. Frozen by
	// the backend's own webhook: members is an atomic list, so a schema rule cannot pair old and new.
	// +kubebuilder:validation:Enum=DRAM;VRAM
	Medium string `json:"medium"`
	// CapacityPerMember is each member's segment size. Positive (the backend's webhook: a quantity
	// rule on each of 32 groups exceeds the schema's CEL budget).
	CapacityPerMember resource.Quantity `json:"capacityPerMember"`
	// LocalBufferSize of each member, added to its memory request.
	// +optional
	LocalBufferSize *resource.Quantity `json:"localBufferSize,omitempty"`
	// ExtraArgs of the members, rendered as -D key=value.
	// +optional
	// +listType=atomic
	ExtraArgs []string `json:"extraArgs,omitempty"`
	// ExtraEnv of the members.
	// +optional
	// +listType=map
	// +listMapKey=name
	ExtraEnv []InstanceEnvVar `json:"extraEnv,omitempty"`
	// Image overrides spec.image for this group.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image,omitempty"`
	// LocalDisks is the group's disk tier.
	// +optional
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MaxItems=1
	LocalDisks []KVCacheBackendMemberLocalDisk `json:"localDisks,omitempty"`
	// Transport overrides spec.transport for this group.
	// +optional
	Transport *KVCacheBackendMemberTransport `json:"transport,omitempty"`
	// FabricInterfaceCount is the RDMA or EFA interfaces each member requests.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	FabricInterfaceCount int32 `json:"fabricInterfaceCount,omitempty"`
	// SecurityContext is merged onto the derived one; capabilities.add is unioned.
	// +optional
	SecurityContext *corev1.SecurityContext `json:"securityContext,omitempty"`
	// HostPaths mounted into each member. Distinct mountPaths (the backend's webhook: a pairwise rule
	// exceeds the schema's CEL budget).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	HostPaths []KVCacheBackendMemberHostPath `json:"hostPaths,omitempty"`
	// RuntimeClassName of the members; declared, never looked up.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
}

// KVCacheBackendMemberTransport is a group's transport override.
type KVCacheBackendMemberTransport struct {
	// Protocol of the group.
	// +optional
	// +kubebuilder:default=Auto
	// +kubebuilder:validation:Enum=Auto;TCP;RDMA;EFA;CANN;ROCM;MUSA;MACA
	Protocol string `json:"protocol,omitempty"`
}

// KVCacheBackendMemberLocalDisk is a group's disk tier.
type KVCacheBackendMemberLocalDisk struct {
	// Path of the disk on the node.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Path string `json:"path"`
	// Capacity of the tier.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// KeyLimit of the tier.
	// +optional
	// +kubebuilder:validation:Minimum=0
	KeyLimit *int64 `json:"keyLimit,omitempty"`
	// Eviction of the tier.
	// +optional
	Eviction *KVCacheBackendMemberEviction `json:"eviction,omitempty"`
	// CleanAfterDelete removes the tier's files when the group goes.
	// +optional
	CleanAfterDelete bool `json:"cleanAfterDelete,omitempty"`
}

// KVCacheBackendMemberEviction is a disk tier's eviction.
type KVCacheBackendMemberEviction struct {
	// Enabled turns eviction on.
	// +optional
	// +kubebuilder:default=true
	Enabled *bool `json:"enabled,omitempty"`
	// Policy of the eviction.
	// +optional
	// +kubebuilder:validation:Enum=FIFO;LRU
	Policy string `json:"policy,omitempty"`
	// Watermark bounds the eviction.
	// +optional
	Watermark *KVCacheBackendMemberWatermark `json:"watermark,omitempty"`
}

// KVCacheBackendMemberWatermark bounds a disk tier's eviction, in percent.
//
// +kubebuilder:validation:XValidation:rule="self.low < self.high",message="watermark.low must be below watermark.high: eviction runs from high down to low"
type KVCacheBackendMemberWatermark struct {
	// High starts eviction.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	High int32 `json:"high"`
	// Low stops eviction.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Low int32 `json:"low"`
}

// KVCacheBackendMemberHostPath is a node path mounted into each member.
//
// +kubebuilder:validation:XValidation:rule="self.mountPath != '/dev/infiniband'",message="hostPaths mountPath /dev/infiniband is refused: fabric devices come from the device request, not a host mount"
type KVCacheBackendMemberHostPath struct {
	// Path on the node.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(/[^/]+)+$`
	Path string `json:"path"`
	// MountPath in the member.
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^(/[^/]+)+$`
	MountPath string `json:"mountPath"`
	// Type of the host path.
	// +optional
	// +kubebuilder:validation:Enum="";DirectoryOrCreate;Directory;FileOrCreate;File;Socket;CharDevice;BlockDevice
	Type string `json:"type,omitempty"`
	// ReadOnly mounts the path read-only.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`
}

// KVCacheBackendStatus is the observed state of a KVCacheBackend. An absent value is unknown, not
// zero.
type KVCacheBackendStatus struct {
	// Phase is Provisioning, Ready, Degraded, Error or Deleting.
	// +optional
	Phase string `json:"phase,omitempty"`
	// PhaseMessage explains the phase.
	// +optional
	PhaseMessage string `json:"phaseMessage,omitempty"`
	// Conditions of the backend.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Endpoints of the store: from its Service when managed, echoed from spec when external.
	// +optional
	// +listType=map
	// +listMapKey=name
	Endpoints []KVCacheBackendEndpoint `json:"endpoints,omitempty"`
	// Capacity of the store; absent until a scrape works.
	// +optional
	Capacity *KVCacheBackendCapacity `json:"capacity,omitempty"`
	// Members are the segments the leader lists.
	// +optional
	// +listType=map
	// +listMapKey=segmentID
	Members []KVCacheBackendMemberStatus `json:"members,omitempty"`
	// UsedBy are the pools holding the backend.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=namespace
	// +listMapKey=name
	UsedBy []KVCacheObjectReference `json:"usedBy,omitempty"`
}

// KVCacheBackendCapacity is a store's scraped capacity.
type KVCacheBackendCapacity struct {
	// Total capacity.
	// +optional
	Total *resource.Quantity `json:"total,omitempty"`
	// Used capacity.
	// +optional
	Used *resource.Quantity `json:"used,omitempty"`
}

// KVCacheBackendMemberStatus is one segment the leader lists.
type KVCacheBackendMemberStatus struct {
	// SegmentID of the segment.
	SegmentID string `json:"segmentID"`
	// ClientID of the member that mounted it.
	ClientID string `json:"clientID"`
	// SegmentName of the segment.
	SegmentName string `json:"segmentName"`
	// NodeName of the member.
	// +optional
	NodeName string `json:"nodeName,omitempty"`
	// Medium of the segment.
	// +optional
	Medium string `json:"medium,omitempty"`
	// Protocol the member registered with, in the store's lowercase spelling.
	// +optional
	Protocol string `json:"protocol,omitempty"`
	// State is OK, Draining, Drained, GracefullyUnmounting, Unmounting or Undefined.
	// +optional
	State string `json:"state,omitempty"`
}
