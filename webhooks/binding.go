package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/tenantclaim"
)

// ValidateBindingPath is where the KVCachePoolBinding webhook is served.
const ValidateBindingPath = "/validate-worker-gpustack-ai-v1-kvcachepoolbinding"

// BindingValidator refuses a KVCachePoolBinding whose domain name another Binding on the same master
// already declares (validation.ValidateBinding), reading the stored Bindings and pools uncached, and
// takes the domain's claim (package tenantclaim) for the Binding it admits: the claim, not this
// process's memory, is what keeps two creates racing through different replicas from both taking
// one domain. A Binding whose pool does not exist yet is admitted unclaimed; the controller claims
// for it once the pool exists.
type BindingValidator struct {
	Reader client.Reader
	// Claims writes the claim Leases, in Namespace (the operator's).
	Claims    client.Writer
	Namespace string
	// Now is the clock; time.Now when nil.
	Now func() time.Time
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
	if errs := validation.ValidateBinding(b, stored.Items, backendOf); len(errs) > 0 {
		return invalid(workerv1.KVCachePoolBindingKind, b.Name, errs)
	}
	backend := backendOf(b.Spec.PoolRef.Name)
	if backend == "" {
		return admission.Allowed(fmt.Sprintf("KVCachePool %q does not exist yet: the domain is claimed when it does", b.Spec.PoolRef.Name))
	}
	return v.claim(ctx, b, backend, req.DryRun != nil && *req.DryRun)
}

// claim takes the Binding's domain claim on backend, or on a dry run only reads whether it would.
func (v *BindingValidator) claim(ctx context.Context, b *workerv1.KVCachePoolBinding, backend string, dryRun bool) admission.Response {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	c := tenantclaim.For(v.Namespace, backend, b)
	declares := tenantclaim.BindingDeclares(v.Reader, backend, c.Domain)
	var out tenantclaim.Outcome
	var err error
	if dryRun {
		out, err = tenantclaim.Peek(ctx, v.Reader, c, declares, now())
	} else {
		out, err = tenantclaim.Take(ctx, v.Reader, v.Claims, c, declares, now())
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if out.Held {
		return admission.Allowed("")
	}
	return invalid(workerv1.KVCachePoolBindingKind, b.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "domain", "name"), c.Domain, taken(c, out))})
}

// taken says who holds the claim and the ways out.
func taken(c tenantclaim.Claim, out tenantclaim.Outcome) string {
	if out.InFlight {
		return fmt.Sprintf("KVCachePoolBinding %s took domain %q on KVCacheBackend %q moments ago (claim Lease %s/%s), and its create may still be stored: "+
			"two Bindings would share one tenant; name another domain, or create this one again after %s if that create failed",
			out.Holder, c.Domain, c.Backend, c.Namespace, out.Lease, tenantclaim.InFlight)
	}
	return fmt.Sprintf("KVCachePoolBinding %s already claims domain %q on KVCacheBackend %q (claim Lease %s/%s), and a domain name is the tenant the backend's master keys blocks by, "+
		"so two Bindings would share one tenant; name another domain, or reference Binding %s to share its blocks", out.Holder, c.Domain, c.Backend, c.Namespace, out.Lease, out.Holder)
}

// poolBackends maps each KVCachePool to the KVCacheBackend it names: the master its Bindings' domains
// are unique on, known (and frozen) with the pool whether or not the backend exists yet.
func (v *BindingValidator) poolBackends(ctx context.Context) (map[string]string, error) {
	var pools workerv1.KVCachePoolList
	if err := v.Reader.List(ctx, &pools); err != nil {
		return nil, fmt.Errorf("listing KVCachePools: %w", err)
	}
	out := map[string]string{}
	for _, p := range pools.Items {
		if len(p.Spec.Backends) > 0 {
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
