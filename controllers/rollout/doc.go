// Package rollout turns a role's replicas over one at a time behind the admission gate, the cadence
// Crossplane cannot express, and handles replica departures.
package rollout
