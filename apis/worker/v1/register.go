package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of every public mdplane kind.
const Group = "worker.gpustack.ai"

// SchemeGroupVersion is the group version the public kinds are served as.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers the public kinds with a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&ModelDeployment{}, &ModelDeploymentList{},
		&KVCacheBackend{}, &KVCacheBackendList{},
		&KVCachePool{}, &KVCachePoolList{},
		&KVCachePoolBinding{}, &KVCachePoolBindingList{},
		&InstanceType{}, &InstanceTypeList{},
		&ModelArtifact{}, &ModelArtifactList{},
	)
	// The options and status kinds clients send with every request (GetOptions, ListOptions, ...).
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// Kind names, for the places that build GroupVersionKinds or refer to a kind in a message.
const (
	ModelDeploymentKind    = "ModelDeployment"
	KVCacheBackendKind     = "KVCacheBackend"
	KVCachePoolKind        = "KVCachePool"
	KVCachePoolBindingKind = "KVCachePoolBinding"
	InstanceTypeKind       = "InstanceType"
	ModelArtifactKind      = "ModelArtifact"
)
