package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// ValidateBindingPath is where the KVCachePoolBinding webhook is served.
const ValidateBindingPath = "/validate-worker-gpustack-ai-v1-kvcachepoolbinding"

// admittedWindow is how long an admitted Binding holds its domain here before its create is surely
// on the API server: two creates racing through this server cannot both take one domain.
const admittedWindow = 30 * time.Second

// BindingValidator refuses a KVCachePoolBinding whose domain name another Binding on the same master
// already declares (validation.ValidateBinding), reading the stored Bindings, pools and backends
// uncached.
type BindingValidator struct {
	Reader client.Reader

	mu       sync.Mutex
	admitted map[string]admittedBinding // master/domain -> the Binding admitted for it lately
}

type admittedBinding struct {
	binding workerv1.KVCachePoolBinding
	at      time.Time
}

// Handle answers one admission review of a KVCachePoolBinding.
func (v *BindingValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("") // the domain and the pool are frozen by the schema
	}
	b := &workerv1.KVCachePoolBinding{}
	if err := json.Unmarshal(req.Object.Raw, b); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if b.Namespace == "" {
		b.Namespace = req.Namespace
	}
	var stored workerv1.KVCachePoolBindingList
	if err := v.Reader.List(ctx, &stored); err != nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("listing KVCachePoolBindings: %w", err))
	}
	backends, err := v.poolBackends(ctx)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	backendOf := func(pool string) string { return backends[pool] }

	v.mu.Lock()
	defer v.mu.Unlock()
	stored.Items = append(stored.Items, v.recent(time.Now())...)
	if errs := validation.ValidateBinding(b, stored.Items, backendOf); len(errs) > 0 {
		return invalid(workerv1.KVCachePoolBindingKind, b.Name, errs)
	}
	if master := backendOf(b.Spec.PoolRef.Name); master != "" {
		v.admitted[master+"/"+validation.DomainName(b)] = admittedBinding{binding: *b, at: time.Now()}
	}
	return admission.Allowed("")
}

// recent are the Bindings admitted within the window, dropping the older ones. Caller holds mu.
func (v *BindingValidator) recent(now time.Time) []workerv1.KVCachePoolBinding {
	if v.admitted == nil {
		v.admitted = map[string]admittedBinding{}
	}
	var out []workerv1.KVCachePoolBinding
	for key, a := range v.admitted {
		if now.Sub(a.at) > admittedWindow {
			delete(v.admitted, key)
			continue
		}
		out = append(out, a.binding)
	}
	return out
}

// poolBackends maps each KVCachePool to the KVCacheBackend serving it, when that backend exists.
func (v *BindingValidator) poolBackends(ctx context.Context) (map[string]string, error) {
	var pools workerv1.KVCachePoolList
	if err := v.Reader.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing KVCachePools: %w", err)
	}
	out := map[string]string{}
	for _, p := range pools.Items {
		if len(p.Spec.Backends) == 0 {
			continue
		}
		found, err := get(ctx, v.Reader, client.ObjectKey{Name: p.Spec.Backends[0]}, &workerv1.KVCacheBackend{})
		if err != nil {
			return nil, err
		}
		if found {
			out[p.Name] = p.Spec.Backends[0]
		}
	}
	return out, nil
}

// invalid is the Invalid status kubectl prints as the field error lines.
func invalid(kind, name string, errs field.ErrorList) admission.Response {
	status := apierrors.NewInvalid(workerv1.SchemeGroupVersion.WithKind(kind).GroupKind(), name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}
