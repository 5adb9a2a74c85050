package replicas

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
)

// NewReplica is the ModelReplica the rollout controller creates in an empty slot of role: on the
// role's current revision, controlled by the role. Its name is generated: a replacement must never
// collide with the object it replaces while that one is still being deleted.
func NewReplica(role *v1alpha1.ModelRole, ordinal int32) *v1alpha1.ModelReplica {
	spec := role.Spec
	meta := objectMeta(role.Namespace, "", naming.ReplicaLabels(spec.DeploymentName, spec.RoleName, ordinal))
	meta.GenerateName = naming.ReplicaGenerateName(spec.DeploymentName, spec.RoleName, ordinal)
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelRoleKind,
		Name: role.Name, UID: role.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	replica := &v1alpha1.ModelReplica{
		TypeMeta:   typeMeta(v1alpha1.SchemeGroupVersion.String(), v1alpha1.ModelReplicaKind),
		ObjectMeta: meta,
		Spec: v1alpha1.ModelReplicaSpec{
			DeploymentName: spec.DeploymentName, RoleName: spec.RoleName, Ordinal: ordinal,
			Revision: spec.Revision, RevisionName: naming.RevisionName(spec.DeploymentName, spec.RoleName, spec.Revision),
			ConfigDigest: spec.ConfigDigest, RenderVersion: spec.RenderVersion,
			RequiredNodeAffinity: spec.RequiredNodeAffinity.DeepCopy(),
		},
	}
	if e := spec.Elastic; e != nil && e.Part == v1alpha1.ElasticMembers && ordinal == 0 {
		// The master boots at the width of the day it is created; a replica is never updated, so
		// later width edits do not move it.
		replica.Spec.ElasticBootWidth = spec.Replicas
	}
	return replica
}

// CurrentRevision is the RoleRevision of a role's current configuration: what its ControllerRevision
// holds.
func CurrentRevision(spec v1alpha1.ModelRoleSpec) *v1alpha1.RoleRevision {
	return &v1alpha1.RoleRevision{
		TypeMeta: typeMeta(v1alpha1.SchemeGroupVersion.String(), v1alpha1.RoleRevisionKind),
		Revision: spec.Revision,
		Size:     spec.Size,
		Template: spec.Template,
		Elastic:  spec.Elastic,
	}
}

// NewRevision is the ControllerRevision the rollout controller snapshots a role's current
// configuration in, controlled by the role, before it creates a replica of it.
func NewRevision(role *v1alpha1.ModelRole) (*appsv1.ControllerRevision, error) {
	spec := role.Spec
	data, err := json.Marshal(CurrentRevision(spec))
	if err != nil {
		return nil, err
	}
	meta := objectMeta(role.Namespace, naming.RevisionName(spec.DeploymentName, spec.RoleName, spec.Revision), naming.RoleLabels(spec.DeploymentName, spec.RoleName))
	meta.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelRoleKind,
		Name: role.Name, UID: role.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	return &appsv1.ControllerRevision{TypeMeta: typeMeta("apps/v1", "ControllerRevision"), ObjectMeta: meta,
		Data: runtime.RawExtension{Raw: data}, Revision: 1}, nil
}

// ReadRevision decodes the RoleRevision a ControllerRevision holds.
func ReadRevision(cr *appsv1.ControllerRevision) (*v1alpha1.RoleRevision, error) {
	if cr.Data.Raw == nil {
		return nil, fmt.Errorf("revision %s/%s holds no RoleRevision", cr.Namespace, cr.Name)
	}
	revision := &v1alpha1.RoleRevision{}
	if err := json.Unmarshal(cr.Data.Raw, revision); err != nil {
		return nil, fmt.Errorf("revision %s/%s holds no readable RoleRevision: %w", cr.Namespace, cr.Name, err)
	}
	return revision, nil
}
