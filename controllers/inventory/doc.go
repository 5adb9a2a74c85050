// Package inventory decides what an InstanceType's status says from the cluster's Nodes and the
// Pods bound to them: which accelerator groups a Node offers (its feature-discovery labels or the
// administrator's override), which Nodes make up a type and which of them count, the type's
// accelerator or CPU capacity views, its observed detail, phase and conditions. Pure: the caller
// reads the Nodes and Pods and writes the status.
package inventory
