// Package v1 holds the public worker.gpustack.ai/v1 kinds: ModelDeployment (a Crossplane composite
// resource), KVCachePool, KVCachePoolBinding, InstanceType and ModelArtifact.
//
// +kubebuilder:object:generate=true
// +groupName=worker.gpustack.ai
package v1
