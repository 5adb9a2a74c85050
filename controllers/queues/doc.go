// Package queues gives every InstanceType the Kueue queues its deployments are admitted through: a
// ResourceFlavor and a ClusterQueue named after the type and carrying the joint check, a LocalQueue
// named by the type's entrance in each namespace that uses it, and the published entrance.
package queues
