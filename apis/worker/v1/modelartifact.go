package v1

// FinalizerModelArtifactProtection keeps a ModelArtifact while a ModelDeployment in its namespace
// names it: the resolver controller adds it while some deployment (a terminating one too) names the
// artifact and releases it once none does, so an artifact nobody names deletes at once.
const FinalizerModelArtifactProtection = "worker.gpustack.ai/model-artifact-protection"

// The revisions a hub source resolves when spec.source.<hub>.revision is unset; the mutating
// webhook writes them.
const (
	DefaultHuggingFaceRevision = "main"
	DefaultModelScopeRevision  = "master"
)

// ModelArtifact condition types.
const (
	// ArtifactResolved is True once the source resolved for the artifact's generation; its reason
	// says why not otherwise.
	ArtifactResolved = "Resolved"
	// ArtifactDegraded is True while a revalidation of a resolved artifact fails: the resolution
	// stands (deployments keep it), but the source no longer confirms it.
	ArtifactDegraded = "Degraded"
)

// Reasons of the Resolved and Degraded conditions. A failing revalidation sets Degraded True with
// the reason a first resolution would have set Resolved False with.
const (
	ReasonArtifactResolved  = "Resolved"
	ReasonRevisionNotFound  = "RevisionNotFound"
	ReasonAccessDenied      = "AccessDenied"
	ReasonSourceUnavailable = "SourceUnavailable"
	ReasonSecretNotFound    = "SecretNotFound"
	ReasonClaimNotFound     = "ClaimNotFound"
	ReasonEmptyManifest     = "EmptyManifest"
	ReasonDigestMismatch    = "DigestMismatch"
	ReasonArtifactHealthy   = "Healthy"
)

// status.resolved.digestSource: the hub's manifest alone, or the hub's manifest matching
// spec.expectedDigest.
const (
	DigestSourceHub      = "Hub"
	DigestSourceExpected = "Expected"
)

// ArtifactTokenKey is the key of a hub source's Secret holding the token.
const ArtifactTokenKey = "token"

// DefaultRevision is the revision a hub source resolves when its own is unset: main on Hugging Face,
// master on ModelScope, nothing for the other sources.
func (s ModelArtifactSource) DefaultRevision() string {
	switch {
	case s.HuggingFace != nil:
		return DefaultHuggingFaceRevision
	case s.ModelScope != nil:
		return DefaultModelScopeRevision
	}
	return ""
}

// Hub is the hub source, when the artifact has one.
func (s ModelArtifactSource) Hub() *HubSource {
	if s.HuggingFace != nil {
		return s.HuggingFace
	}
	return s.ModelScope
}
