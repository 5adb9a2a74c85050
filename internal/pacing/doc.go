// Package pacing decides, from plain values, a role's next replacement and reads a role's slots from
// its replicas, their Pods and their groups' Workloads: the rollout controller acts on these
// decisions and `mdplane plan` simulates a rollout from them, so the two cannot drift.
package pacing
