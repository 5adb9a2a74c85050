// Package rolestatus sums what is below a role into its status (counts, eligibility, PodsCreated,
// the revisions in use), and roles' conditions into their deployment's: pure functions of the
// objects read, shared by the roles controller and the render-roles function.
package rolestatus
