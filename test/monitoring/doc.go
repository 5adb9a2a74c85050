// Package monitoring checks the Prometheus Operator objects of package/monitoring against the
// operator's API types and against what mdplane renders and installs.
package monitoring
