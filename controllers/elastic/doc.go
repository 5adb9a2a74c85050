// Package elastic resizes every Elastic EP deployment's engine to its width through the master's
// native resize, recording each operation before it is asked (the ConfigMap elastic-resize-<md
// UID>), and writes the deployment's observation document (elastic-observation-<md UID>) and its
// ElasticResize condition.
package elastic
