// Package renderroles is the render-roles composition function. It has three steps, chosen by the
// kind of the composite it is called for: a ModelDeployment becomes one ModelRole per role plus the
// deployment and role Services; a ModelRole becomes its revision snapshots and one ModelReplica per
// ordinal; a ModelReplica becomes its size Pods and, above size 1, its headless Service. The render
// itself is pure (values in, objects out); fn.go is the thin gRPC edge.
package renderroles
