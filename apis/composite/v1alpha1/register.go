package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of the internal composites.
const Group = "internal.mdplane.io"

// SchemeGroupVersion is the group version the internal composites are served as.
var SchemeGroupVersion = schema.GroupVersion{Group: Group, Version: "v1alpha1"}

var (
	schemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers the internal kinds with a scheme.
	AddToScheme = schemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&ModelRole{}, &ModelRoleList{},
		&ModelReplica{}, &ModelReplicaList{},
		&RoleRevision{},
	)
	// The options and status kinds clients send with every request (GetOptions, ListOptions, ...).
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}

// Kind names.
const (
	ModelRoleKind    = "ModelRole"
	ModelReplicaKind = "ModelReplica"
	RoleRevisionKind = "RoleRevision"
)
