// Package roles reports each ModelRole's status, summed from its replicas, at a bounded rate: a role
// of hundreds of replicas coming up writes its status a few times a minute, not on every replica
// event, so the deployment above it is woken a bounded number of times.
package roles
