package v1alpha1

import (
	"strconv"
	"strings"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// ModelRole is one role of a ModelDeployment: the unit a rollout turns over. It is a plain CRD, not
// a Crossplane composite: the deployment composes it; the rollout controller snapshots each
// configuration still in use as an immutable revision (a ControllerRevision) and creates one
// ModelReplica per ordinal; the roles controller sums the replicas into its status at a bounded
// rate. No composite reads, or is woken by, a replica.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=mdplane-internal
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Deployment",type=string,JSONPath=".spec.deploymentName"
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=".spec.roleName"
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=".spec.revision"
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=".spec.replicas"
// +kubebuilder:printcolumn:name="Up-to-date",type=integer,JSONPath=".status.upToDate"
type ModelRole struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the role as the deployment step resolved it.
	Spec ModelRoleSpec `json:"spec"`
	// Status aggregates the role's replicas.
	// +optional
	Status ModelRoleStatus `json:"status,omitempty"`
}

// ModelRoleList is a list of ModelRoles.
//
// +kubebuilder:object:root=true
type ModelRoleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ModelRoles.
	Items []ModelRole `json:"items"`
}

// ModelRoleSpec is a role resolved against its InstanceType, Binding and pool.
type ModelRoleSpec struct {
	// DeploymentName is the owning ModelDeployment's name.
	// +kubebuilder:validation:MinLength=1
	DeploymentName string `json:"deploymentName"`
	// RoleName is the role's name in the deployment.
	// +kubebuilder:validation:MinLength=1
	RoleName string `json:"roleName"`
	// Kind is the role's kind.
	Kind workerv1.RoleKind `json:"kind"`
	// Replicas is the number of instances (ordinals 0..replicas-1).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1024
	Replicas int32 `json:"replicas"`
	// Size is the number of Pods of each instance of the current revision.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Size int32 `json:"size"`
	// Revision is the hash of the current configuration; empty slots are filled with it.
	// +kubebuilder:validation:MinLength=1
	Revision string `json:"revision"`
	// ConfigDigest is the digest of the role's configuration and resolved bindings (the revision
	// without the render baseline).
	// +optional
	ConfigDigest string `json:"configDigest,omitempty"`
	// RenderVersion is the render baseline of the current revision.
	// +optional
	RenderVersion int32 `json:"renderVersion,omitempty"`
	// MinRenderVersion is the deployment's effective render-version floor: replicas rendered below it
	// are rolled.
	// +optional
	MinRenderVersion int32 `json:"minRenderVersion,omitempty"`
	// Template is the resolved Pod template of the current revision, before per-replica and
	// per-member identity is stamped on it.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Template corev1.PodTemplateSpec `json:"template"`
	// RequiredNodeAffinity is the node affinity a bound PersistentVolume holding the weights requires.
	// New replicas copy it and their Pods are created with it ANDed into their required node
	// affinity: it is placement, outside the configuration digest and the revision.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	RequiredNodeAffinity *corev1.NodeSelector `json:"requiredNodeAffinity,omitempty"`
	// Elastic marks a role of an Elastic EP deployment: its GPU members or its Ray head. Such a role
	// is outside the rollout: a replica is never replaced for configuration drift.
	// +optional
	Elastic *ElasticRole `json:"elastic,omitempty"`
}

// ElasticPart is which part of an Elastic EP deployment a role renders.
// +kubebuilder:validation:Enum=Members;Head
type ElasticPart string

// The parts of an Elastic EP deployment.
const (
	// ElasticMembers are the GPU engines, one size-1 replica each: ordinal 0 is the master.
	ElasticMembers ElasticPart = "Members"
	// ElasticHead is the Ray head, one CPU-only Pod.
	ElasticHead ElasticPart = "Head"
)

// ElasticRole is what the members of an Elastic EP role are stamped with beyond the template: the
// master and the workers differ by ordinal, so the difference is applied as each replica is
// materialized.
type ElasticRole struct {
	// Part is the part of the deployment the role renders.
	Part ElasticPart `json:"part"`
	// HeadAddress is the Ray head's GCS address the members join: <md>-elastic-head.<ns>.svc:6379.
	// +optional
	HeadAddress string `json:"headAddress,omitempty"`
}

// ModelRoleStatus aggregates a role's replicas. Counts are in instances. The counts are pointers:
// nil until the roles controller has counted, so that a count of zero is reported as 0.
type ModelRoleStatus struct {
	// Conditions are Ready (every instance Ready) and PodsCreated, written by the roles controller.
	xpv2.ConditionedStatus `json:",inline"`
	// Ready is the number of instances whose every member is Ready.
	// +optional
	Ready *int32 `json:"ready,omitempty"`
	// UpToDate is the number of instances on the current revision.
	// +optional
	UpToDate *int32 `json:"upToDate,omitempty"`
	// OlderCompatible is the number of up-to-date instances rendered on an older render baseline that
	// still meets the floor: kept in place, not rolled.
	// +optional
	OlderCompatible *int32 `json:"olderCompatible,omitempty"`
	// QuotaReserved is the number of instances whose Workload holds quota.
	// +optional
	QuotaReserved *int32 `json:"quotaReserved,omitempty"`
	// Quota counts the instances in each admission state (see ModelReplicaStatus.Quota).
	// +optional
	Quota map[string]int32 `json:"quota,omitempty"`
	// PreemptedBy is the PreemptedBy of the role's lowest preempted instance, prefixed with its
	// ordinal ("r1: ..."), while any instance is Preempted.
	// +optional
	PreemptedBy string `json:"preemptedBy,omitempty"`
	// Preemptions are, by slot ("r1"), who Kueue preempted the slot's group for and why, kept until
	// the slot's group holds quota again: the preempted replica is rebuilt, and its replacement
	// reads here why it waits.
	// +optional
	Preemptions map[string]string `json:"preemptions,omitempty"`
	// ReadyTimeouts are, by slot ("r0"), the evictions of the slot's group at Kueue's
	// waitForPodsReady timeout in a row: the slot is filled again only after a backoff that doubles
	// with each, since Kueue's own requeue state goes with the Workload it deletes once the group's
	// Pods are gone. A slot's entry goes once its replica is Ready.
	// +optional
	ReadyTimeouts map[string]ReadyTimeout `json:"readyTimeouts,omitempty"`
	// LostNode is the LostNode of the role's lowest instance standing on a node that stopped
	// reporting, prefixed with its slot: "r1: node gpu-7 ...".
	// +optional
	LostNode string `json:"lostNode,omitempty"`
	// Provisioning is, for the role's lowest instance whose group holds quota while an autoscaled
	// pool provisions its nodes, what the provisioning check says, prefixed with its slot: "r0:
	// waiting for its nodes to be provisioned ...", or the provisioner's refusal.
	// +optional
	Provisioning string `json:"provisioning,omitempty"`
	// Members counts the live members of the role's standing instances, for WeightsReady.
	// +optional
	Members *MemberCounts `json:"members,omitempty"`
	// Retirement is the deployment's retirement operation when it targets one of this role's
	// replicas, as the rollout controller's record holds it; the deployment step lifts it into
	// status.retirement.
	// +optional
	Retirement *workerv1.Retirement `json:"retirement,omitempty"`
	// Replacement is where the role's rollout stands, as the rollout controller's record holds it:
	// the replacement in flight and the gate the next departure waits at. Reported at the role's
	// status interval; the record itself is what a restarted controller resumes from.
	// +optional
	Replacement *Replacement `json:"replacement,omitempty"`
	// Eligible counts the instances qualified to take traffic: absent while any instance is
	// inconclusive, 0 when every instance is conclusively unqualified.
	// +optional
	Eligible *int32 `json:"eligible,omitempty"`
	// Eligibility is the role's EndpointEligibility reason (see workerv1.EndpointEligibility*).
	// +optional
	Eligibility string `json:"eligibility,omitempty"`
	// EligibilityActive is true once every instance is conclusive, one is qualified and every
	// qualified one carries the eligibility label: the role's Services may then select on it.
	// +optional
	EligibilityActive bool `json:"eligibilityActive,omitempty"`
	// AssignedFlavors are the ResourceFlavors the standing instances were admitted on, sorted.
	// +optional
	// +listType=atomic
	AssignedFlavors []string `json:"assignedFlavors,omitempty"`
	// Modes counts the standing instances by the mode of the revision each runs: what status claims
	// of take-over is what is deployed, not what the spec now says.
	// +optional
	Modes *DeployedModes `json:"modes,omitempty"`
}

// DeployedModes counts a role's standing instances by how their command line was built.
type DeployedModes struct {
	// Managed instances run a command line mdplane built.
	Managed int32 `json:"managed"`
	// Unmanaged instances run a take-over command.
	Unmanaged int32 `json:"unmanaged"`
}

// TakesOver reports whether a revision's Pods run a take-over command. The render gives a managed
// engine its scrape annotations and a take-over command none (in every render version), so the
// template itself says it, also for revisions stored before this was asked.
func (r *RoleRevision) TakesOver() bool {
	return r.Template.Annotations[workerv1.AnnotationScrape] != "true"
}

// Replacement is where a role's rollout stands: the slot whose replacement is unresolved and the
// gate the role's next departure waits at.
type Replacement struct {
	// Ordinal of the slot whose replacement is unresolved; absent when none is.
	// +optional
	Ordinal *int32 `json:"ordinal,omitempty"`
	// Gate the next departure waits at (Admitted or Ready); empty when it waits at none.
	// +optional
	Gate string `json:"gate,omitempty"`
}

// None reports whether the replacement records nothing: no slot in flight and no gate.
func (r Replacement) None() bool { return r.Ordinal == nil && r.Gate == "" }

// ModelReplica is one instance of a role: one Kueue pod group of size Pods stamped from one revision.
// Its spec never changes after creation; replacing it is deleting it. It is a plain CRD, not a
// Crossplane composite: the rollout controller creates it, the members controller creates its Pods
// and Service and writes its status, and nothing composes through it
// (docs/decisions/0001-plain-role-and-replica-kinds.md).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=mdplane-internal
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Deployment",type=string,JSONPath=".spec.deploymentName"
// +kubebuilder:printcolumn:name="Role",type=string,JSONPath=".spec.roleName"
// +kubebuilder:printcolumn:name="Ordinal",type=integer,JSONPath=".spec.ordinal"
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=".spec.revision"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Quota",type=string,JSONPath=".status.quota"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ModelReplica struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the instance's slot and revision.
	Spec ModelReplicaSpec `json:"spec"`
	// Status reports the instance's members and admission.
	// +optional
	Status ModelReplicaStatus `json:"status,omitempty"`
}

// ModelReplicaList is a list of ModelReplicas.
//
// +kubebuilder:object:root=true
type ModelReplicaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ModelReplicas.
	Items []ModelReplica `json:"items"`
}

// ModelReplicaSpec is an instance's slot and the revision its Pods are stamped from.
//
// +kubebuilder:validation:XValidation:rule="self.deploymentName == oldSelf.deploymentName && self.roleName == oldSelf.roleName && self.ordinal == oldSelf.ordinal && self.revision == oldSelf.revision && self.revisionName == oldSelf.revisionName",message="a ModelReplica's spec is frozen: a replica is replaced by deleting it, never edited"
type ModelReplicaSpec struct {
	// DeploymentName is the owning ModelDeployment's name.
	// +kubebuilder:validation:MinLength=1
	DeploymentName string `json:"deploymentName"`
	// RoleName is the role's name in the deployment.
	// +kubebuilder:validation:MinLength=1
	RoleName string `json:"roleName"`
	// Ordinal is the instance's slot within its role, from 0.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1023
	Ordinal int32 `json:"ordinal"`
	// Revision is the hash of the configuration the instance runs.
	// +kubebuilder:validation:MinLength=1
	Revision string `json:"revision"`
	// RevisionName names the RoleRevision snapshot (an apps/v1 ControllerRevision) holding the Pod
	// template.
	// +kubebuilder:validation:MinLength=1
	RevisionName string `json:"revisionName"`
	// ConfigDigest is the configuration digest the instance was stamped with.
	// +optional
	ConfigDigest string `json:"configDigest,omitempty"`
	// RenderVersion is the render baseline the instance was stamped with.
	// +optional
	RenderVersion int32 `json:"renderVersion,omitempty"`
	// RequiredNodeAffinity is the role's RequiredNodeAffinity when the instance was created: its Pods
	// are created with it ANDed into their required node affinity.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	RequiredNodeAffinity *corev1.NodeSelector `json:"requiredNodeAffinity,omitempty"`
	// ElasticBootWidth is, on the master of an Elastic EP role (ordinal 0), the width it was created
	// at: the data-parallel size it boots with. It never moves with later width edits; a master
	// created again takes the width of its day.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ElasticBootWidth int32 `json:"elasticBootWidth,omitempty"`
}

// OlderCompatible reports an up-to-date instance stamped on an older render baseline than the role's
// current one: it meets the floor and is kept in place.
func (s ModelReplicaSpec) OlderCompatible(role ModelRoleSpec) bool {
	return s.UpToDate(role) && s.ConfigDigest != "" && s.RenderVersion < role.RenderVersion
}

// UpToDate reports whether an instance needs no replacement under its role: its configuration is the
// current one and its render baseline meets the deployment's floor. An instance rendered on an older
// but compatible baseline stays. One recorded before the digest was (no digest) is judged by revision.
func (s ModelReplicaSpec) UpToDate(role ModelRoleSpec) bool {
	if s.ConfigDigest == "" || role.ConfigDigest == "" {
		return s.Revision == role.Revision
	}
	return s.ConfigDigest == role.ConfigDigest && s.RenderVersion >= role.MinRenderVersion
}

// SlotKey is a slot's key in a role's status maps (preemptions, readyTimeouts): "r<ordinal>".
func SlotKey(ordinal int32) string { return "r" + strconv.Itoa(int(ordinal)) }

// LowestSlot is the key of a slot map (SlotKey) with the lowest ordinal; "" for none.
func LowestSlot[V any](slots map[string]V) string {
	first, key := -1, ""
	for k := range slots {
		if n, err := strconv.Atoi(strings.TrimPrefix(k, "r")); err == nil && strings.HasPrefix(k, "r") && (first < 0 || n < first) {
			first, key = n, k
		}
	}
	return key
}

// ReadyTimeout is a slot's record of Kueue evicting its group at the waitForPodsReady timeout.
type ReadyTimeout struct {
	// Count is the evictions in a row, since the slot's replica was last Ready.
	Count int32 `json:"count"`
	// Evicted is when the last eviction's replica was rebuilt.
	Evicted metav1.Time `json:"evicted"`
	// Until is when the slot may be filled again: Evicted and the backoff after Count in a row.
	Until metav1.Time `json:"until"`
	// Message is Kueue's word on the last eviction.
	// +optional
	Message string `json:"message,omitempty"`
}

// ModelReplicaStatus reports an instance. The counts and flags are pointers: nil until the members
// controller has reported them, so that a zero count or a false flag is reported too.
type ModelReplicaStatus struct {
	// Conditions hold Ready, written by the members controller: True when Ready() holds.
	xpv2.ConditionedStatus `json:",inline"`
	// Members is the number of the instance's Pods on the API server.
	// +optional
	Members *int32 `json:"members,omitempty"`
	// ReadyMembers is the number of those Pods that are Ready.
	// +optional
	ReadyMembers *int32 `json:"readyMembers,omitempty"`
	// Size is the number of members the replica's revision gives it; the replica is ready when that
	// many are Ready.
	// +optional
	Size *int32 `json:"size,omitempty"`
	// Workload is the name of the instance's Kueue Workload.
	// +optional
	Workload string `json:"workload,omitempty"`
	// QuotaReserved is true when the Workload holds a quota reservation.
	// +optional
	QuotaReserved *bool `json:"quotaReserved,omitempty"`
	// Admitted is true when Kueue admitted the Workload.
	// +optional
	Admitted *bool `json:"admitted,omitempty"`
	// Quota is the instance's admission state: Reserved, Pending, PodGroupIncomplete, Preempted,
	// Parked, NoQueue, InFlight or Terminating.
	// +optional
	// +kubebuilder:validation:Enum=Reserved;Pending;PodGroupIncomplete;Preempted;Parked;NoQueue;InFlight;Terminating
	Quota string `json:"quota,omitempty"`
	// PreemptedBy says, once Kueue has preempted the instance's group, who for and why; it stays
	// until the group holds quota again.
	// +optional
	PreemptedBy string `json:"preemptedBy,omitempty"`
	// LostNode names the node of a member that stopped reporting (its Ready condition not True, or
	// the Node gone), with since when and the node's word; the replica is rebuilt once Kubernetes
	// removes that member.
	// +optional
	LostNode string `json:"lostNode,omitempty"`
	// Live counts the instance's live members (not deleting, Succeeded or Failed), for WeightsReady.
	// +optional
	Live *MemberCounts `json:"live,omitempty"`
	// Flavors are the ResourceFlavors Kueue admitted the instance on: those of its Workload's PodSet
	// named by the members' kueue.x-k8s.io/role-hash, sorted.
	// +optional
	// +listType=atomic
	Flavors []string `json:"flavors,omitempty"`
	// Qualification is whether the instance may take traffic, leg by leg.
	// +optional
	Qualification *Qualification `json:"qualification,omitempty"`
}

// The verdicts of a Qualification.
const (
	// QualificationNotObserved: no member has reported readiness yet.
	QualificationNotObserved = "NotObserved"
	// QualificationQualified: every leg is Verified.
	QualificationQualified = "Qualified"
	// QualificationNotQualified: a leg Failed.
	QualificationNotQualified = "NotQualified"
	// QualificationHeld: a leg is Unknown.
	QualificationHeld = "Held"
	// QualificationUnsupported: the group-forward check is Unsupported for the instance.
	QualificationUnsupported = "Unsupported"
)

// The states of a QualificationLeg.
const (
	LegVerified      = "Verified"
	LegFailed        = "Failed"
	LegUnknown       = "Unknown"
	LegNotApplicable = "NotApplicable"
	LegUnsupported   = "Unsupported"
)

// Qualification is an instance's endpoint qualification.
type Qualification struct {
	// Verdict is NotObserved, Qualified, NotQualified, Held or Unsupported.
	// +kubebuilder:validation:Enum=NotObserved;Qualified;NotQualified;Held;Unsupported
	Verdict string `json:"verdict"`
	// Granted is true when every serving member carries the eligibility label.
	// +optional
	Granted bool `json:"granted,omitempty"`
	// Legs are the checks behind the verdict.
	// +optional
	// +listType=atomic
	Legs []QualificationLeg `json:"legs,omitempty"`
}

// QualificationLeg is one check of a Qualification.
type QualificationLeg struct {
	// Type is MemberSetComplete, MembersReady, GroupForward, NoPlannedRetirement or NoPendingReplacement.
	Type string `json:"type"`
	// State is Verified, Failed, Unknown, NotApplicable (GroupForward of a single member) or
	// Unsupported (GroupForward mdplane cannot probe).
	State string `json:"state"`
	// Reason explains a state other than Verified.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// MemberCounts counts live member Pods by how far their weights are: how many there are, how many
// have their volumes set up (PodReadyToStartContainers True) and how many have a Ready main
// container.
type MemberCounts struct {
	// Live is the number of live member Pods.
	Live int32 `json:"live"`
	// Started is the number whose PodReadyToStartContainers condition is True.
	Started int32 `json:"started"`
	// MainReady is the number whose main container is Ready.
	MainReady int32 `json:"mainReady"`
}

// Add sums two counts.
func (c MemberCounts) Add(o MemberCounts) MemberCounts {
	return MemberCounts{Live: c.Live + o.Live, Started: c.Started + o.Started, MainReady: c.MainReady + o.MainReady}
}

// Ready reports whether a replica is ready: as many members as its revision gives it exist and are
// Ready.
func (s ModelReplicaStatus) Ready() bool {
	return s.Size != nil && s.Members != nil && s.ReadyMembers != nil && *s.Size > 0 && *s.Members == *s.Size && *s.ReadyMembers == *s.Size
}

// RoleRevision is the immutable snapshot of one configuration of a role, stored as the data of an
// apps/v1 ControllerRevision. Every Pod of a replica is rendered from it and nothing else.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type RoleRevision struct {
	metav1.TypeMeta `json:",inline"`
	// Revision is the hash of the configuration.
	Revision string `json:"revision"`
	// Size is the number of Pods of each instance.
	Size int32 `json:"size"`
	// Template is the resolved Pod template.
	Template corev1.PodTemplateSpec `json:"template"`
	// Elastic is the role's Elastic EP part, applied per member as a replica is materialized.
	// +optional
	Elastic *ElasticRole `json:"elastic,omitempty"`
}
