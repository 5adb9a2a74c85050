// Package snapshot assembles a ModelDeploymentMetrics from what a deployment's Pods export, without
// clients: which Pods are read (Select), what their /metrics text holds (Parse), and the gauges,
// windows and cache hits two reads make (Assemble, with the previous reads kept in Samples). The
// scrape and the serving edge live in snapshot/scrape and snapshot/serve.
package snapshot
