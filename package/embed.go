// Package manifests embeds the generated CRDs, XRDs and Compositions, so that offline checks judge
// manifests against exactly what an installation serves.
package manifests

import "embed"

// FS holds crds/, xrds/ and compositions/.
//
//go:embed crds/*.yaml xrds/*.yaml compositions/*.yaml
var FS embed.FS
