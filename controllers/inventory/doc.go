// Package inventory writes what an InstanceType's status says of the cluster's Nodes and the Pods
// bound to them: which accelerator groups a Node offers (its feature-discovery labels or the
// administrator's override), which Nodes make up a type and which of them count, the type's
// accelerator or CPU capacity views, its observed detail, phase and conditions. The computation is
// pure (ComputeStatus); the Reconciler reads the Nodes and Pods and applies the status.
package inventory
