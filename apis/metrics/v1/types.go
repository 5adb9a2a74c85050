package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group the snapshot is served in. It is not worker.gpustack.ai: that group-version
// is served by the ModelDeployment CRD, and an APIService for it would take the whole group-version
// away from the CRD.
const Group = "metrics.worker.gpustack.ai"

// SchemeGroupVersion is the group-version the snapshot is served as.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

// Kind and resource names of the snapshot.
const (
	Kind = "ModelDeploymentMetrics"
	// Resource and Subresource are the path segments under which the snapshot is served, and what
	// RBAC grants: get on modeldeployments/metrics.
	Resource    = "modeldeployments"
	Subresource = "metrics"
)

// ModelDeploymentMetrics is a point-in-time reading of a deployment's engine and router Pods.
//
// +kubebuilder:object:root=true
type ModelDeploymentMetrics struct {
	metav1.TypeMeta `json:",inline"`
	// ObjectMeta carries the deployment's name and namespace.
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Timestamp is when the snapshot was assembled.
	Timestamp metav1.Time `json:"timestamp"`

	// Processing are the requests being worked on: running, router-running, router-backends,
	// router-reported-workers.
	// +listType=atomic
	Processing []Gauge `json:"processing,omitempty"`
	// Queueing are the requests waiting: waiting, decode-transfer-waiting.
	// +listType=atomic
	Queueing []Gauge `json:"queueing,omitempty"`
	// CacheHits are the prefix cache hit rates per Pod and cache scope.
	// +listType=atomic
	CacheHits []CacheHit `json:"cacheHits,omitempty"`
	// Latency are the per-Pod ttft, tpot and itl means over the sampling window.
	// +listType=atomic
	Latency []Window `json:"latency,omitempty"`
	// Traffic are the per-Pod request, error and retry rates over the sampling window.
	// +listType=atomic
	Traffic []Window `json:"traffic,omitempty"`
	// Transfer are the per-Pod KV transfer latency, speed, size and failure rate.
	// +listType=atomic
	Transfer []Window `json:"transfer,omitempty"`
	// Missing says what could not be read, and why.
	// +listType=atomic
	Missing []Missing `json:"missing,omitempty"`
	// Partial is set when something that should have been read was not.
	Partial bool `json:"partial"`
}

// Gauge is a current value summed over the Pods of one scope.
type Gauge struct {
	Name string `json:"name"`
	// Source is the series read.
	Source string `json:"source"`
	// Scope is engine/<role> or router.
	Scope      string      `json:"scope"`
	Unit       string      `json:"unit"`
	Value      float64     `json:"value"`
	PodCount   int32       `json:"podCount"`
	ObservedAt metav1.Time `json:"observedAt"`
}

// Window is a rate or mean of one Pod between two reads.
type Window struct {
	Name          string      `json:"name"`
	Pod           string      `json:"pod"`
	Source        string      `json:"source"`
	Scope         string      `json:"scope"`
	Unit          string      `json:"unit"`
	Value         float64     `json:"value"`
	Samples       float64     `json:"samples"`
	WindowSeconds float64     `json:"windowSeconds"`
	ObservedAt    metav1.Time `json:"observedAt"`
}

// CacheHit is one Pod's cache hit rate in one scope between two reads.
type CacheHit struct {
	Pod           string      `json:"pod"`
	Source        string      `json:"source"`
	Scope         string      `json:"scope"`
	Unit          string      `json:"unit"`
	Hits          float64     `json:"hits"`
	Queries       float64     `json:"queries"`
	Rate          float64     `json:"rate"`
	WindowSeconds float64     `json:"windowSeconds"`
	PodCount      int32       `json:"podCount"`
	ObservedAt    metav1.Time `json:"observedAt"`
}

// Missing is something the snapshot could not read.
type Missing struct {
	Pod    string `json:"pod,omitempty"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// AddToScheme registers the snapshot kind.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &ModelDeploymentMetrics{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
