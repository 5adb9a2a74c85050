// Package renderroles is the render-roles composition function. It has two steps, chosen by the
// kind of the composite it is called for: a ModelDeployment becomes one ModelRole per role plus the
// deployment and role Services; a ModelRole becomes its revision snapshots and its status, counted
// from the replicas the rollout controller creates (the members controller stamps their Pods with
// package replicas). Each step observes (reads its request into a plain struct, observed objects
// decoded into their API types), plans (pure: values in, objects and a typed status out) and writes
// (desired objects, conditions, status); fn.go is the thin gRPC edge.
package renderroles
