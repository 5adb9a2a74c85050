// Package plan tells, before an edit of a ModelDeployment is applied, what its rollout will do: per
// role, whether it rolls or scales and why, the order the rollout controller replaces replicas in,
// what a replacement needs from the queue, the serving capacity at each step and what changes inside
// the Pods.
package plan
