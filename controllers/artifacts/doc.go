// Package artifacts resolves every ModelArtifact: a hub source to its 40-character commit and the
// digest of its filtered file manifest, a claim to its existing PersistentVolumeClaim, an image to
// its digest-pinned reference; it revalidates a resolution every interval, reports the Resolved and
// Degraded conditions, and keeps the model-artifact-protection finalizer while a ModelDeployment in
// the namespace names the artifact.
package artifacts
