package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ModelArtifact names model weights once, so deployments can reference them by name and a digest can
// anchor what they run.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,shortName=mart,categories=gpustack
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=".status.resolved.revision"
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=".status.resolved.sizeBytes"
// +kubebuilder:printcolumn:name="Resolved",type=string,JSONPath=".status.conditions[?(@.type=='Resolved')].status"
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=".status.nodes.ready"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type ModelArtifact struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the source of the weights. Frozen.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is frozen: other weights are another ModelArtifact, which is created rather than edited"
	Spec ModelArtifactSpec `json:"spec"`
	// Status reports the resolved revision and its delivery to nodes.
	// +optional
	Status ModelArtifactStatus `json:"status,omitempty"`
}

// ModelArtifactList is a list of ModelArtifacts.
//
// +kubebuilder:object:root=true
type ModelArtifactList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the ModelArtifacts.
	Items []ModelArtifact `json:"items"`
}

// ModelArtifactSpec is the desired state of a ModelArtifact.
type ModelArtifactSpec struct {
	// Source is where the weights come from: exactly one of its members.
	Source ModelArtifactSource `json:"source"`
	// AllowPatterns limit a hub download to matching files.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	AllowPatterns []string `json:"allowPatterns,omitempty"`
	// IgnorePatterns exclude matching files from a hub download.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	IgnorePatterns []string `json:"ignorePatterns,omitempty"`
	// ExpectedDigest anchors a hub download: sha256: and 64 hex digits.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ExpectedDigest string `json:"expectedDigest,omitempty"`
}

// ModelArtifactSource is exactly one source of weights.
//
// +kubebuilder:validation:XValidation:rule="[has(self.huggingFace), has(self.modelScope), has(self.persistentVolumeClaim), has(self.image)].filter(x, x).size() == 1",message="spec.source names exactly one of huggingFace, modelScope, persistentVolumeClaim or image"
type ModelArtifactSource struct {
	// HuggingFace is a Hugging Face hub repository.
	// +optional
	HuggingFace *HubSource `json:"huggingFace,omitempty"`
	// ModelScope is a ModelScope hub repository.
	// +optional
	ModelScope *HubSource `json:"modelScope,omitempty"`
	// PersistentVolumeClaim holds the weights at a path.
	// +optional
	PersistentVolumeClaim *ClaimSource `json:"persistentVolumeClaim,omitempty"`
	// Image is an OCI image holding the weights, by digest.
	// +optional
	Image *ImageSource `json:"image,omitempty"`
}

// HubSource is a repository on a model hub.
type HubSource struct {
	// Repository on the hub, such as Qwen/Qwen2.5-72B-Instruct.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Repository string `json:"repository"`
	// Revision: a branch, tag or commit; main on Hugging Face and master on ModelScope when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Revision string `json:"revision,omitempty"`
	// SecretRef names a Secret in this namespace whose token key authenticates to the hub.
	// +optional
	SecretRef *LocalReference `json:"secretRef,omitempty"`
}

// ClaimSource is a path on a PersistentVolumeClaim.
type ClaimSource struct {
	// ClaimName of the PersistentVolumeClaim in this namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClaimName string `json:"claimName"`
	// Path of the weights inside the volume.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^[^/].*$`
	Path string `json:"path,omitempty"`
}

// ImageSource is an OCI image holding weights.
type ImageSource struct {
	// Reference to the image, pinned by digest (repository@sha256:...).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^.+@sha256:[0-9a-f]{64}$`
	Reference string `json:"reference"`
}

// ModelArtifactStatus is the observed state of a ModelArtifact.
type ModelArtifactStatus struct {
	// ObservedGeneration is the generation last resolved.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Resolved is the revision the source resolved to.
	// +optional
	Resolved *ResolvedArtifact `json:"resolved,omitempty"`
	// Nodes counts nodes holding the weights.
	// +optional
	Nodes *ArtifactNodes `json:"nodes,omitempty"`
	// Conditions of the artifact: Resolved and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ResolvedArtifact is a resolved revision.
type ResolvedArtifact struct {
	// Revision, a commit.
	// +optional
	Revision string `json:"revision,omitempty"`
	// ManifestDigest is the digest of the file manifest.
	// +optional
	ManifestDigest string `json:"manifestDigest,omitempty"`
	// DigestSource is Hub or Expected.
	// +optional
	// +kubebuilder:validation:Enum=Hub;Expected
	DigestSource string `json:"digestSource,omitempty"`
	// FileCount of the revision.
	// +optional
	FileCount int64 `json:"fileCount,omitempty"`
	// SizeBytes of the revision.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// ResolvedTime is when the revision was resolved.
	// +optional
	ResolvedTime *metav1.Time `json:"resolvedTime,omitempty"`
	// LastValidatedTime is when the revision was last checked.
	// +optional
	LastValidatedTime *metav1.Time `json:"lastValidatedTime,omitempty"`
}

// ArtifactNodes counts nodes by delivery state.
type ArtifactNodes struct {
	// Ready nodes hold the weights.
	// +kubebuilder:validation:Minimum=0
	Ready int32 `json:"ready"`
	// Downloading nodes are fetching them.
	// +kubebuilder:validation:Minimum=0
	Downloading int32 `json:"downloading"`
	// Failed nodes could not fetch them.
	// +kubebuilder:validation:Minimum=0
	Failed int32 `json:"failed"`
	// DownloadingPercent is the progress of the downloads.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	DownloadingPercent *int32 `json:"downloadingPercent,omitempty"`
}
