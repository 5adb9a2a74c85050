// Package apis holds the Go types of every kind mdplane serves or composes; the subpackages are one
// API group version each, and the CRDs and XRDs in package/ are generated from them.
package apis
