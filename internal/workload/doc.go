// Package workload reads what mdplane asks of a Kueue Workload from its conditions: whether it is
// admitted, whether it holds quota it is not giving up, since when, and why Kueue evicted it.
package workload
