// Package rollout turns a role's replicas over one at a time behind the admission gate, the cadence
// Crossplane cannot express, and handles departures: scale-downs, lost members, the Workloads and
// instance Services departed replicas leave behind.
package rollout
