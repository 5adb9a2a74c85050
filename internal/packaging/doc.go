// Package packaging builds mdplane's Crossplane packages (the Configuration and the two Function
// packages with their runtime images embedded) and the controllers' image, offline and reproducibly.
package packaging
