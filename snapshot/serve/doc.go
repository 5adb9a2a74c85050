// Package serve is the metrics snapshot's serving edge: the aggregated API the kube-apiserver proxies
// metrics.worker.gpustack.ai/v1 to. It authenticates the front proxy by its client certificate (the
// requestheader CA of kube-system/extension-apiserver-authentication), authorizes the user the proxy
// names with a SubjectAccessReview for get on modeldeployments/metrics in worker.gpustack.ai, serves the
// group's discovery documents, and assembles the snapshot.
package serve
