// Package renderroles is the render-roles composition function: a ModelDeployment becomes one ModelRole per
// role, a ModelRole one ModelReplica per ordinal from an immutable revision, and a ModelReplica its
// Pods and headless Service.
package renderroles
