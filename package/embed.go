// Package manifests embeds the generated CRDs, XRDs and Compositions, so that offline checks judge
// manifests against exactly what an installation serves.
package manifests

import "embed"

// FS holds crds/, xrds/, compositions/ and webhooks/.
//
//go:embed crds/*.yaml xrds/*.yaml compositions/*.yaml webhooks/*.yaml
var FS embed.FS
