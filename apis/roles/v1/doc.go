// Package v1 is roles.worker.gpustack.ai/v1: one ModelDeploymentRole per role of every
// ModelDeployment, served by mdplane-controllers behind an APIService, with the scale subresource
// an autoscaler drives (a role's count is spec.roles[i].replicas of its deployment, which no CRD's
// scale subresource can point at). It is served by an aggregated API, never stored, so it has no CRD.
//
// +kubebuilder:skip
package v1
