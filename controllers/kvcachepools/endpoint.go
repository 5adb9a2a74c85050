package kvcachepools

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Status is the part of a KVCachePool's status this controller applies. An empty ClientEndpoint or
// Phase is left out of the apply, so a value another operator wrote stays and one this controller
// wrote before is withdrawn.
type Status struct {
	ClientEndpoint string
	Phase          string
	PhaseMessage   string
	Condition      metav1.Condition
}

// PoolStatus is what the pool's status says about its endpoint, given the backend it names (nil when
// that backend does not exist). now stamps a condition whose status changes.
func PoolStatus(pool *workerv1.KVCachePool, backend *workerv1.KVCacheBackend, now metav1.Time) Status {
	s := decide(pool, backend)
	s.Condition.Type = workerv1.PoolClientEndpointPublished
	s.Condition.ObservedGeneration = pool.Generation
	s.Condition.LastTransitionTime = now
	if was := meta.FindStatusCondition(pool.Status.Conditions, s.Condition.Type); was != nil && was.Status == s.Condition.Status {
		s.Condition.LastTransitionTime = was.LastTransitionTime
	}
	if s.Phase != "" {
		s.PhaseMessage = s.Condition.Message
	}
	return s
}

func decide(pool *workerv1.KVCachePool, backend *workerv1.KVCacheBackend) Status {
	name := backendName(pool)
	switch {
	case backend == nil:
		return Status{Phase: workerv1.KVCachePhaseError, Condition: metav1.Condition{Status: metav1.ConditionFalse, Reason: workerv1.ReasonBackendNotFound,
			Message: fmt.Sprintf("spec.backends names KVCacheBackend %q, which does not exist, so the pool has no status.clientEndpoint and cached deployments on it do not render; "+
				"create that backend (spec.backends is frozen: a pool on another backend is another pool)", name)}}
	case backend.Spec.Connection.Managed != nil:
		return managed(pool, name, backend.DeletionTimestamp != nil)
	case backend.DeletionTimestamp != nil:
		return Status{Phase: workerv1.KVCachePhaseError, Condition: deleting(name)}
	case backend.Spec.Connection.External == nil:
		// The schema requires one of managed and external; an object read before it existed has
		// neither.
		return Status{Phase: workerv1.KVCachePhaseError, Condition: metav1.Condition{Status: metav1.ConditionFalse, Reason: workerv1.ReasonNoClientEndpoint,
			Message: fmt.Sprintf("KVCacheBackend %q sets neither spec.connection.managed nor spec.connection.external, so it has no Client endpoint to publish; "+
				"give it one of them", name)}}
	}
	for _, e := range backend.Spec.Connection.External.Endpoints {
		if e.Name == workerv1.KVCacheBackendEndpointNameClient {
			return Status{ClientEndpoint: e.Address, Phase: workerv1.KVCachePhaseReady, Condition: metav1.Condition{Status: metav1.ConditionTrue,
				Reason: workerv1.ReasonExternalBackend, Message: fmt.Sprintf("engines connect to %s, the Client endpoint of external KVCacheBackend %q", e.Address, name)}}
		}
	}
	return Status{Phase: workerv1.KVCachePhaseError, Condition: metav1.Condition{Status: metav1.ConditionFalse, Reason: workerv1.ReasonNoClientEndpoint,
		Message: fmt.Sprintf("external KVCacheBackend %q lists no Client endpoint in spec.connection.external.endpoints, so engines have nothing to connect to; "+
			"add {name: Client, address: <host:port>} (the Admin endpoint is never published to clients)", name)}}
}

// managed leaves the endpoint and the phase to the backend's operator (a pool's endpoint is never
// guessed from a Service name) and says only whether it has published the endpoint.
func managed(pool *workerv1.KVCachePool, name string, deleting bool) Status {
	switch {
	case deleting:
		return Status{Condition: deletingManaged(name)}
	case pool.Status.ClientEndpoint != "":
		return Status{Condition: metav1.Condition{Status: metav1.ConditionTrue, Reason: workerv1.ReasonManagedBackend,
			Message: fmt.Sprintf("engines connect to %s, published by the operator of managed KVCacheBackend %q", pool.Status.ClientEndpoint, name)}}
	}
	return Status{Condition: metav1.Condition{Status: metav1.ConditionFalse, Reason: workerv1.ReasonAwaitingBackendOperator,
		Message: fmt.Sprintf("KVCacheBackend %q is managed: its own operator publishes status.clientEndpoint, and has not yet; mdplane leaves the field alone, "+
			"and cached deployments on this pool wait for it (or give the backend spec.connection.external with a Client endpoint)", name)}}
}

func deleting(name string) metav1.Condition {
	return metav1.Condition{Status: metav1.ConditionFalse, Reason: workerv1.ReasonBackendDeleting,
		Message: fmt.Sprintf("KVCacheBackend %q is being deleted, so its Client endpoint is withdrawn from status.clientEndpoint and cached deployments on this pool do not render again; "+
			"recreate the backend once it is gone, or create a pool on another backend (spec.backends is frozen)", name)}
}

func deletingManaged(name string) metav1.Condition {
	c := deleting(name)
	c.Message = fmt.Sprintf("managed KVCacheBackend %q is being deleted; its operator withdraws status.clientEndpoint, and cached deployments on this pool do not render again until it is recreated, "+
		"or create a pool on another backend (spec.backends is frozen)", name)
	return c
}

// backendName is the backend the pool names; the schema makes it exactly one.
func backendName(pool *workerv1.KVCachePool) string {
	if len(pool.Spec.Backends) == 0 {
		return ""
	}
	return pool.Spec.Backends[0]
}

// Changed is true when the pool's status does not already say what s says, so that an unchanged pool
// costs no write.
func Changed(pool *workerv1.KVCachePool, s Status) bool {
	was := meta.FindStatusCondition(pool.Status.Conditions, s.Condition.Type)
	if was == nil || was.Status != s.Condition.Status || was.Reason != s.Condition.Reason || was.Message != s.Condition.Message ||
		was.ObservedGeneration != s.Condition.ObservedGeneration {
		return true
	}
	if s.Phase != "" && (pool.Status.Phase != s.Phase || pool.Status.PhaseMessage != s.PhaseMessage) {
		return true
	}
	return s.ClientEndpoint != "" && pool.Status.ClientEndpoint != s.ClientEndpoint
}
