// Package retirement is the retirement protocol's state machine: the
// operation that takes one seated replica a scale-down no longer declares out of the endpoints, drains
// it, deletes it with its Workload and observes the release, each phase within its budget. It takes
// an operation and what a pass observed and returns the next operation and what to do; the rollout
// controller does the reading and the writing.
package retirement
