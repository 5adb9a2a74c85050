package v1

// PoolClientEndpointPublished is the KVCachePool condition saying whether status.clientEndpoint
// holds the backend's Client endpoint, and who publishes it: mdplane for an external backend, the
// backend's own operator for a managed one.
const PoolClientEndpointPublished = "ClientEndpointPublished"

// Reasons of the ClientEndpointPublished condition.
const (
	// ReasonExternalBackend: the endpoint is the Client entry of the external backend's spec.
	ReasonExternalBackend = "ExternalBackend"
	// ReasonManagedBackend: the managed backend's operator published the endpoint.
	ReasonManagedBackend = "ManagedBackend"
	// ReasonAwaitingBackendOperator: the backend is managed and its operator has not published an
	// endpoint yet; mdplane never guesses one.
	ReasonAwaitingBackendOperator = "AwaitingBackendOperator"
	// ReasonBackendNotFound: the backend spec.backends names does not exist.
	ReasonBackendNotFound = "BackendNotFound"
	// ReasonBackendDeleting: the backend is being deleted.
	ReasonBackendDeleting = "BackendDeleting"
	// ReasonNoClientEndpoint: the external backend lists no Client endpoint.
	ReasonNoClientEndpoint = "NoClientEndpoint"
)

// The KV cache phases mdplane writes (on pools, external backends and Bindings), of Provisioning,
// Ready, Degraded, Error and Deleting.
const (
	KVCachePhaseReady    = "Ready"
	KVCachePhaseError    = "Error"
	KVCachePhaseDeleting = "Deleting"
)
