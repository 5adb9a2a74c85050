package kvcachepools

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// BackendFieldOwner owns the status of an external KVCacheBackend this controller applies.
const BackendFieldOwner = "worker.gpustack.ai/kv-cache-backends"

// BackendStatus is what an external backend's status says: its endpoints as its spec declares
// them, and its phase. A managed backend's status is its own operator's: nil.
type BackendStatus struct {
	Endpoints    []workerv1.KVCacheBackendEndpoint `json:"endpoints"`
	Phase        string                            `json:"phase"`
	PhaseMessage string                            `json:"phaseMessage"`
}

// ExternalBackendStatus is the status of an external backend: Ready with a Client endpoint to
// publish, Error without one, Deleting once deleted. mdplane runs nothing of an external store and
// reads none of it, so its capacity stays unknown (absent, never zero).
func ExternalBackendStatus(b *workerv1.KVCacheBackend) *BackendStatus {
	if b.Spec.Connection.External == nil {
		return nil
	}
	s := &BackendStatus{Endpoints: append([]workerv1.KVCacheBackendEndpoint{}, b.Spec.Connection.External.Endpoints...)}
	client := ""
	for _, e := range s.Endpoints {
		if e.Name == workerv1.KVCacheBackendEndpointNameClient {
			client = e.Address
		}
	}
	switch {
	case b.DeletionTimestamp != nil:
		s.Phase, s.PhaseMessage = workerv1.KVCachePhaseDeleting, "the backend is being deleted"
	case client == "":
		s.Phase, s.PhaseMessage = workerv1.KVCachePhaseError,
			"spec.connection.external.endpoints lists no Client endpoint, so engines have nothing to connect to; add {name: Client, address: <host:port>}"
	default:
		s.Phase, s.PhaseMessage = workerv1.KVCachePhaseReady, fmt.Sprintf("external store: engines connect to %s", client)
	}
	return s
}

// BackendReconciler publishes each external KVCacheBackend's status (ExternalBackendStatus).
type BackendReconciler struct {
	Client client.Client
}

// SetupWithManager watches backends: their spec, deletion and the status fields this writes.
func (r *BackendReconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("kvcachebackend_status").
		For(&workerv1.KVCacheBackend{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			was, okOld := e.ObjectOld.(*workerv1.KVCacheBackend)
			is, okNew := e.ObjectNew.(*workerv1.KVCacheBackend)
			return !okOld || !okNew || was.Generation != is.Generation || (was.DeletionTimestamp == nil) != (is.DeletionTimestamp == nil) ||
				was.Status.Phase != is.Status.Phase || was.Status.PhaseMessage != is.Status.PhaseMessage ||
				!equality.Semantic.DeepEqual(was.Status.Endpoints, is.Status.Endpoints)
		}})).
		Complete(r)
}

// Reconcile applies an external backend's status when it does not already say it.
func (r *BackendReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	b := &workerv1.KVCacheBackend{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	s := ExternalBackendStatus(b)
	if s == nil || (b.Status.Phase == s.Phase && b.Status.PhaseMessage == s.PhaseMessage && equality.Semantic.DeepEqual(b.Status.Endpoints, s.Endpoints)) {
		return reconcile.Result{}, nil
	}
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	if err != nil {
		return reconcile.Result{}, err
	}
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": workerv1.SchemeGroupVersion.String(), "kind": workerv1.KVCacheBackendKind,
		"metadata": map[string]any{"name": b.Name}, "status": status}}
	if err := r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(BackendFieldOwner), client.ForceOwnership); err != nil {
		return reconcile.Result{}, fmt.Errorf("publishing the status of KVCacheBackend %s: %w", b.Name, err)
	}
	return reconcile.Result{}, nil
}
