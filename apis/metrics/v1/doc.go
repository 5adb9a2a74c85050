// Package v1 holds ModelDeploymentMetrics, the read-only snapshot of a deployment's engine and router
// metrics that mdplane-controllers serves as metrics.worker.gpustack.ai/v1
// (docs/decisions/0045-metrics-snapshot.md). It is served by an aggregated API, never stored, so
// it has no CRD.
//
// +kubebuilder:object:generate=true
// +kubebuilder:skip
package v1
