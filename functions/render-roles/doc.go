// Package renderroles is the render-roles composition function. For a ModelDeployment it composes
// one ModelRole per role (holding the role's resolved Pod template and revision), the deployment's
// and roles' Services and, for Elastic EP, the Ray head, and sums the roles' status into the
// deployment's. The rollout controller creates the replicas from the ModelRoles and the members
// controller stamps their Pods (package replicas). The step observes (reads its request into a plain
// struct, observed objects decoded into their API types), plans (pure: values in, objects and a typed
// status out) and writes (desired objects, conditions, status); fn.go is the thin gRPC edge.
package renderroles
