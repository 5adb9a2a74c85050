// Package replicas stamps a ModelReplica's member Pods and instance Service from its role's revision
// and reads them back into the replica's status; the members controller creates exactly these
// objects and the render-roles function and `mdplane render` print them.
package replicas
