// Package serve is mdplane's aggregated API (the mdplane-api Deployment), the one server the
// kube-apiserver proxies three groups to: metrics.worker.gpustack.ai/v1 (a deployment's metrics snapshot, authorized with a
// SubjectAccessReview for get on modeldeployments/metrics in worker.gpustack.ai), roles.worker.gpustack.ai/v1
// (every role as a ModelDeploymentRole whose scale subresource writes the deployment's
// spec.roles[i].replicas) and custom.metrics.k8s.io/v1beta2 (a role's waiting and running requests,
// from a snapshot, for a HorizontalPodAutoscaler). It authenticates the front proxy by its client
// certificate (the requestheader CA of kube-system/extension-apiserver-authentication) and serves
// each group's discovery documents.
package serve
