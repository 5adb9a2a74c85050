// Package members creates each ModelReplica's member Pods and headless Service from its immutable
// revision, once each, and reports its members and admission on its status: the Pod path, kept off
// Crossplane's re-apply loop.
package members
