package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KVCachePool is a cluster-scoped Mooncake KV cache pool with a total quota; namespaces reach it
// only through KVCachePoolBindings.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=kvcp,categories=gpustack
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Quota",type=string,JSONPath=".spec.quota.total"
// +kubebuilder:printcolumn:name="Usage",type=string,JSONPath=".status.usage.total"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=".status.clientEndpoint"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type KVCachePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec declares the pool's backend and quota.
	Spec KVCachePoolSpec `json:"spec"`
	// Status reports the pool's endpoint, usage and domains.
	// +optional
	Status KVCachePoolStatus `json:"status,omitempty"`
}

// KVCachePoolList is a list of KVCachePools.
//
// +kubebuilder:object:root=true
type KVCachePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the KVCachePools.
	Items []KVCachePool `json:"items"`
}

// KVCachePoolSpec is the desired state of a KVCachePool.
type KVCachePoolSpec struct {
	// Backends names the one cache backend serving the pool. Frozen.
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.backends is frozen: a pool on another backend is another pool, which is created rather than edited"
	Backends []string `json:"backends"`

	// Quota is the pool's total capacity, shared out by Binding ceilings.
	Quota KVCachePoolQuota `json:"quota"`
}

// KVCachePoolQuota is a pool's capacity.
type KVCachePoolQuota struct {
	// Total capacity of the pool.
	Total resource.Quantity `json:"total"`
}

// KVCachePoolStatus is the observed state of a KVCachePool.
type KVCachePoolStatus struct {
	// Phase is Provisioning, Ready, Degraded, Error or Deleting.
	// +optional
	Phase string `json:"phase,omitempty"`
	// PhaseMessage explains the phase.
	// +optional
	PhaseMessage string `json:"phaseMessage,omitempty"`
	// Conditions of the pool.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ClientEndpoint is the endpoint cache clients connect to, echoed from the backend.
	// +optional
	// +kubebuilder:validation:MaxLength=259
	ClientEndpoint string `json:"clientEndpoint,omitempty"`
	// Usage is how much of the pool is used.
	// +optional
	Usage *KVCachePoolUsage `json:"usage,omitempty"`
	// Domains are the reuse domains registered on the pool, keyed by name.
	// +optional
	// +listType=map
	// +listMapKey=name
	Domains []KVCachePoolDomainStatus `json:"domains,omitempty"`
	// UsedBy are the objects holding the pool.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=namespace
	// +listMapKey=name
	UsedBy []KVCacheObjectReference `json:"usedBy,omitempty"`
}

// KVCachePoolUsage is a pool's usage.
type KVCachePoolUsage struct {
	// Total used capacity.
	// +optional
	Total *resource.Quantity `json:"total,omitempty"`
}

// KVCachePoolDomainStatus is one reuse domain registered on a pool.
type KVCachePoolDomainStatus struct {
	// Name of the domain.
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Binding that declares the domain.
	// +optional
	Binding *NamespacedReference `json:"binding,omitempty"`
	// BlockSize of the domain.
	// +optional
	BlockSize int32 `json:"blockSize,omitempty"`
	// Dtype of the domain.
	// +optional
	Dtype string `json:"dtype,omitempty"`
	// Blocks stored in the domain.
	// +optional
	Blocks *int64 `json:"blocks,omitempty"`
	// HitRate of the domain, from 0 to 1.
	// +optional
	// +kubebuilder:validation:Pattern=`^(0(\.[0-9]{1,4})?|1(\.0{1,4})?)$`
	HitRate string `json:"hitRate,omitempty"`
}

// NamespacedReference names an object in a namespace.
type NamespacedReference struct {
	// Namespace of the object.
	Namespace string `json:"namespace"`
	// Name of the object.
	Name string `json:"name"`
}

// KVCacheObjectReference names an object holding a pool or a Binding.
type KVCacheObjectReference struct {
	// Kind of the object.
	Kind string `json:"kind"`
	// Namespace of the object.
	Namespace string `json:"namespace"`
	// Name of the object.
	Name string `json:"name"`
}

// KVCachePoolBinding grants its namespace access to a KVCachePool and declares the reuse domain the
// namespace's deployments write into.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=kvcpb,categories=gpustack
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=".spec.poolRef.name"
// +kubebuilder:printcolumn:name="Domain",type=string,JSONPath=".spec.domain.name"
// +kubebuilder:printcolumn:name="Effective",type=string,JSONPath=".status.effectiveQuota"
// +kubebuilder:printcolumn:name="Usage",type=string,JSONPath=".status.usage"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=".status.phase"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type KVCachePoolBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the pool and declares the domain and quota ceiling.
	Spec KVCachePoolBindingSpec `json:"spec"`
	// Status reports the granted quota and usage.
	// +optional
	Status KVCachePoolBindingStatus `json:"status,omitempty"`
}

// KVCachePoolBindingList is a list of KVCachePoolBindings.
//
// +kubebuilder:object:root=true
type KVCachePoolBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the KVCachePoolBindings.
	Items []KVCachePoolBinding `json:"items"`
}

// KVCachePoolBindingSpec is the desired state of a KVCachePoolBinding.
type KVCachePoolBindingSpec struct {
	// PoolRef names the cluster-scoped KVCachePool. Frozen.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.poolRef is frozen: a binding to another pool is another Binding, which is created rather than edited"
	PoolRef KVCachePoolReference `json:"poolRef"`

	// Domain is the reuse domain: deployments referencing this Binding share cached blocks within
	// it. Frozen.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.domain is frozen: a different reuse domain is another Binding, which is created rather than edited"
	Domain KVCacheDomain `json:"domain"`

	// Quota is the Binding's share of the pool.
	Quota KVCachePoolBindingQuota `json:"quota"`
}

// KVCachePoolReference names a cluster-scoped KVCachePool.
type KVCachePoolReference struct {
	// Name of the KVCachePool.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// KVCacheDomain is a reuse domain: a tenant name, a block size and a dtype.
type KVCacheDomain struct {
	// Name is the tenant identifier rendered into every managed role. A DNS label; default when
	// omitted.
	// +optional
	// +kubebuilder:default=default
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name,omitempty"`
	// BlockSize is the number of tokens per cached block.
	// +kubebuilder:validation:Minimum=1
	BlockSize int32 `json:"blockSize"`
	// Dtype is the KV cache dtype, in the engines' spelling (bfloat16, fp8_e4m3, fp8_e5m2, nvfp4).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Dtype string `json:"dtype"`
}

// KVCachePoolBindingQuota is a Binding's share of its pool.
type KVCachePoolBindingQuota struct {
	// Ceiling is the most of the pool this Binding asks to hold. Positive. mdplane reports it
	// (status.requestedQuota, and capped by the pool's total, status.effectiveQuota); the store
	// holds the Binding's clients to it, as mdplane runs no store.
	// +kubebuilder:validation:XValidation:rule="isQuantity(string(self)) && quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.quota.ceiling must be a positive quantity"
	Ceiling resource.Quantity `json:"ceiling"`
}

// KVCachePoolBindingStatus is the observed state of a KVCachePoolBinding. An absent value is unknown,
// not zero.
type KVCachePoolBindingStatus struct {
	// Phase is Provisioning, Ready, Degraded, Error or Deleting.
	// +optional
	Phase string `json:"phase,omitempty"`
	// PhaseMessage explains the phase.
	// +optional
	PhaseMessage string `json:"phaseMessage,omitempty"`
	// Conditions of the Binding.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// RequestedQuota is the ceiling asked of the pool.
	// +optional
	RequestedQuota *resource.Quantity `json:"requestedQuota,omitempty"`
	// EffectiveQuota is the ceiling the pool granted.
	// +optional
	EffectiveQuota *resource.Quantity `json:"effectiveQuota,omitempty"`
	// Usage is how much of the ceiling is used.
	// +optional
	Usage *resource.Quantity `json:"usage,omitempty"`
	// OverQuota is true when usage exceeds the effective quota.
	// +optional
	OverQuota *bool `json:"overQuota,omitempty"`
	// Blocks stored in the domain.
	// +optional
	Blocks *int64 `json:"blocks,omitempty"`
	// HitRate of the domain, from 0 to 1.
	// +optional
	HitRate string `json:"hitRate,omitempty"`
	// UsedBy are the deployments holding the Binding.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=namespace
	// +listMapKey=name
	UsedBy []KVCacheObjectReference `json:"usedBy,omitempty"`
}
