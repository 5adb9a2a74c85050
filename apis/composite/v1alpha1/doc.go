// Package v1alpha1 holds mdplane's internal composite resources, ModelRole and ModelReplica
// (group internal.mdplane.io), and the RoleRevision snapshot a replica's Pods are stamped from.
// Users never write these kinds; the render-roles function composes them.
//
// +kubebuilder:object:generate=true
// +groupName=internal.mdplane.io
package v1alpha1
