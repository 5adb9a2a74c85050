// Package elastic writes the observation document of every Elastic EP deployment, the ConfigMap
// elastic-observation-<md UID> (elastic-dp-lifecycle.md §1.7), from the layers mdplane can read.
package elastic
