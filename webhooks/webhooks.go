// Package webhooks is mdplane's admission surface: for ModelDeployments the validating webhook runs
// the rules of apis/validation with the InstanceTypes and the KV cache Binding, pool and backend
// read straight from the API server, and the mutating webhook defaults each role's accelerator
// count from its InstanceType; for KVCacheBackends a validating webhook runs the rules their schema
// cannot say; for ModelArtifacts a validating webhook runs theirs and a mutating webhook defaults a
// hub source's revision (main on Hugging Face, master on ModelScope). Both ModelDeployment webhooks
// follow the Settings of the mdplane-settings EnvironmentConfig (read uncached, like everything
// else here), and a validating webhook refuses a bad value in that EnvironmentConfig when it is
// written.
package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"golang.org/x/sync/errgroup"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mdplane/mdplane/apis/settings"
	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Paths the webhook server serves; package/webhooks registers them.
const (
	ValidatePath         = "/validate-worker-gpustack-ai-v1-modeldeployment"
	MutatePath           = "/mutate-worker-gpustack-ai-v1-modeldeployment"
	ValidateBackendPath  = "/validate-worker-gpustack-ai-v1-kvcachebackend"
	ValidateArtifactPath = "/validate-worker-gpustack-ai-v1-modelartifact"
	MutateArtifactPath   = "/mutate-worker-gpustack-ai-v1-modelartifact"
)

// Reader reads objects straight from the API server: a stale cache must not decide admission.
type Reader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// typeNames are the InstanceTypes the roles that pass keep name: their own and, for an Elastic EP
// role, its Ray head's (judged CPU-only).
func typeNames(md *workerv1.ModelDeployment, keep func(workerv1.ModelDeploymentRole) bool) []string {
	var names []string
	for _, role := range md.Spec.Roles {
		if !keep(role) {
			continue
		}
		names = append(names, role.InstanceType)
		if role.ElasticEP != nil {
			names = append(names, role.ElasticEP.HeadInstanceType)
		}
	}
	return names
}

// everyRole keeps every role.
func everyRole(workerv1.ModelDeploymentRole) bool { return true }

// instanceTypes reads the InstanceTypes named, side by side; a missing one is left out, which the
// rules report.
func instanceTypes(ctx context.Context, r Reader, names []string) (map[string]*workerv1.InstanceType, error) {
	names = slices.Clone(names)
	slices.Sort(names)
	names = slices.DeleteFunc(slices.Compact(names), func(n string) bool { return n == "" })
	read := make([]*workerv1.InstanceType, len(names))
	g, ctx := errgroup.WithContext(ctx)
	for i, name := range names {
		g.Go(func() error {
			it := &workerv1.InstanceType{}
			err := r.Get(ctx, client.ObjectKey{Name: name}, it)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("reading InstanceType %q: %w", name, err)
			default:
				read[i] = it
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := map[string]*workerv1.InstanceType{}
	for i, it := range read {
		if it != nil {
			out[names[i]] = it
		}
	}
	return out, nil
}

// kvCacheChain reads spec.kvCache's Binding, its pool and the pool's backend; a link that does not
// exist is left nil, and so are the links after it, which the rules report or skip. Each link names
// the next, and a review waiting for each answer before asking for the next would wait three round
// trips: the pool and backend that the last answers named are read side by side with the Binding,
// and a link the fresh answers name otherwise is read after them. Every link judged is read after
// the review arrived.
func kvCacheChain(ctx context.Context, r Reader, md *workerv1.ModelDeployment) (*validation.KVCacheChain, error) {
	bindingKey := client.ObjectKey{Namespace: md.Namespace, Name: md.Spec.KVCache.PoolRef.Name}
	poolName, backendName := lastLinks(r, bindingKey)
	binding := readAhead(ctx, r, bindingKey, &workerv1.KVCachePoolBinding{})
	pool := guessAhead(ctx, r, poolName, &workerv1.KVCachePool{})
	backend := guessAhead(ctx, r, backendName, &workerv1.KVCacheBackend{})
	ch := &validation.KVCacheChain{}
	if found, err := binding.wait(); !found || err != nil {
		return ch, err
	}
	ch.Binding = binding.obj
	pool = pool.orRead(ctx, r, client.ObjectKey{Name: ch.Binding.Spec.PoolRef.Name}, &workerv1.KVCachePool{})
	if found, err := pool.wait(); !found || err != nil {
		return ch, err
	}
	ch.Pool = pool.obj
	if len(ch.Pool.Spec.Backends) == 0 {
		return ch, nil
	}
	backend = backend.orRead(ctx, r, client.ObjectKey{Name: ch.Pool.Spec.Backends[0]}, &workerv1.KVCacheBackend{})
	if found, err := backend.wait(); !found || err != nil {
		return ch, err
	}
	ch.Backend = backend.obj
	return ch, nil
}

// recentAnswers is a Reader that remembers its last answers (SharedReads).
type recentAnswers interface {
	Recent(key client.ObjectKey, obj client.Object) bool
}

// lastLinks are the pool and backend the last answers of r chained to a Binding, "" where r
// remembers none.
func lastLinks(r Reader, bindingKey client.ObjectKey) (pool, backend string) {
	recent, ok := r.(recentAnswers)
	if !ok {
		return "", ""
	}
	b := &workerv1.KVCachePoolBinding{}
	if !recent.Recent(bindingKey, b) {
		return "", ""
	}
	p := &workerv1.KVCachePool{}
	if !recent.Recent(client.ObjectKey{Name: b.Spec.PoolRef.Name}, p) || len(p.Spec.Backends) == 0 {
		return b.Spec.PoolRef.Name, ""
	}
	return b.Spec.PoolRef.Name, p.Spec.Backends[0]
}

// pendingRead is one object read in the background.
type pendingRead[T client.Object] struct {
	key   client.ObjectKey
	obj   T
	done  chan struct{}
	found bool
	err   error
}

// readAhead starts reading key into obj.
func readAhead[T client.Object](ctx context.Context, r Reader, key client.ObjectKey, obj T) *pendingRead[T] {
	p := &pendingRead[T]{key: key, obj: obj, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.found, p.err = get(ctx, r, key, obj)
	}()
	return p
}

// guessAhead starts reading the cluster-scoped object a link is guessed to name; nil for no guess.
func guessAhead[T client.Object](ctx context.Context, r Reader, name string, obj T) *pendingRead[T] {
	if name == "" {
		return nil
	}
	return readAhead(ctx, r, client.ObjectKey{Name: name}, obj)
}

// orRead is p when it reads key, else a read of key into obj started now.
func (p *pendingRead[T]) orRead(ctx context.Context, r Reader, key client.ObjectKey, obj T) *pendingRead[T] {
	if p != nil && p.key == key {
		return p
	}
	return readAhead(ctx, r, key, obj)
}

// wait waits for the read; found is false when the object does not exist.
func (p *pendingRead[T]) wait() (found bool, err error) {
	<-p.done
	return p.found, p.err
}

// get reads one object; found is false when it does not exist.
func get(ctx context.Context, r Reader, key client.ObjectKey, obj client.Object) (bool, error) {
	err := r.Get(ctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

func decode(raw []byte) (*workerv1.ModelDeployment, error) {
	md := &workerv1.ModelDeployment{}
	return md, json.Unmarshal(raw, md)
}

// Validator refuses what the spec's refusal table refuses.
type Validator struct {
	Reader Reader
}

// Handle answers one admission review.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	md, err := decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	cluster := validation.Cluster{}
	// Rules that read an InstanceType decline for a deployment being deleted, and the Settings are
	// not read for it: a bad value must not block the update that releases its finalizers.
	if md.DeletionTimestamp == nil {
		var err error
		if cluster, err = readCluster(ctx, v.Reader, md); err != nil {
			var invalid *settings.InvalidError
			if errors.As(err, &invalid) {
				// A bad value the Settings webhook did not see (it was down, or the object
				// predates it): refuse with its message, which names the key and the way out.
				return admission.Denied(err.Error())
			}
			return admission.Errored(http.StatusInternalServerError, err)
		}
	}
	var errs = validation.ValidateCreate(md, cluster)
	if req.Operation == admissionv1.Update {
		old, err := decode(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
		errs = validation.ValidateUpdate(md, old, cluster)
	}
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	status := apierrors.NewInvalid(workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind).GroupKind(), md.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

// readCluster reads what a deployment's rules consult: the Settings, the InstanceTypes and the cache
// chain, side by side, so a review waits for the longest of them rather than for their sum.
func readCluster(ctx context.Context, r Reader, md *workerv1.ModelDeployment) (validation.Cluster, error) {
	var cluster validation.Cluster
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		s, _, err := settings.Get(ctx, r)
		cluster.Settings = &s
		return err
	})
	g.Go(func() (err error) {
		cluster.InstanceTypes, err = instanceTypes(ctx, r, typeNames(md, everyRole))
		return err
	})
	if md.Spec.KVCache != nil {
		g.Go(func() (err error) {
			cluster.KVCache, err = kvCacheChain(ctx, r, md)
			return err
		})
	}
	if name := md.Labels[workerv1.LabelPriorityClass]; name != "" {
		g.Go(func() error {
			wpc := &unstructured.Unstructured{}
			wpc.SetGroupVersionKind(workloadPriorityClass)
			found, err := get(ctx, r, client.ObjectKey{Name: name}, wpc)
			if meta.IsNoMatchError(err) {
				found, err = false, nil // Kueue serves no WorkloadPriorityClass: none exists
			}
			cluster.PriorityClasses = map[string]bool{name: found}
			return err
		})
	}
	return cluster, g.Wait()
}

// workloadPriorityClass is the kind a deployment's kueue.x-k8s.io/priority-class label names.
var workloadPriorityClass = schema.GroupVersionKind{Group: "kueue.x-k8s.io", Version: "v1beta2", Kind: "WorkloadPriorityClass"}

// Defaulter sets the one default a schema cannot reach: a role's accelerator count, 1 on an
// acceleratable InstanceType (apis/validation.DeploymentDefaults, which `mdplane validate` and
// `render` run too).
type Defaulter struct {
	Reader Reader
}

// Handle answers one admission review with a patch.
func (d *Defaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	md, err := decode(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if md.DeletionTimestamp != nil {
		return admission.Allowed("being deleted")
	}
	// Only a role that leaves its card count to the default reads its InstanceType: a deployment
	// declaring every count is answered without a read.
	types, err := instanceTypes(ctx, d.Reader, typeNames(md, validation.CardsUndeclared))
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	defaults := validation.DeploymentDefaults(md, types)
	if len(defaults) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("defaulted the accelerator count from the InstanceType", patches(defaults)...)
}

// patches are the defaults as "add" operations: only what is defaulted is patched.
func patches(defaults []validation.Default) []jsonpatch.JsonPatchOperation {
	out := make([]jsonpatch.JsonPatchOperation, 0, len(defaults))
	for _, d := range defaults {
		out = append(out, jsonpatch.NewOperation("add", d.Pointer, d.Value))
	}
	return out
}

// BackendValidator refuses the KVCacheBackend edits its schema cannot judge, and warns of a fabric
// interface count that requests nothing. It reads Setting kv-cache-backend-image, the image of a
// managed store that names none.
type BackendValidator struct {
	Reader Reader
}

// Handle answers one admission review of a KVCacheBackend.
func (v BackendValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	b := &workerv1.KVCacheBackend{}
	if err := json.Unmarshal(req.Object.Raw, b); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	var old *workerv1.KVCacheBackend
	if req.Operation == admissionv1.Update {
		old = &workerv1.KVCacheBackend{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	s, _, err := settings.Get(ctx, v.Reader)
	var invalid *settings.InvalidError
	switch {
	case errors.As(err, &invalid):
		return admission.Denied(err.Error())
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	}
	errs, warnings := validation.ValidateBackend(b, old, s.KVCacheBackendImage)
	if len(errs) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	status := apierrors.NewInvalid(workerv1.SchemeGroupVersion.WithKind(workerv1.KVCacheBackendKind).GroupKind(), b.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}}
}

// decodeArtifacts reads the artifact of a review and, on an update, the stored one.
func decodeArtifacts(req admission.Request) (a, old *workerv1.ModelArtifact, err error) {
	a = &workerv1.ModelArtifact{}
	if err := json.Unmarshal(req.Object.Raw, a); err != nil {
		return nil, nil, err
	}
	if req.Operation == admissionv1.Update {
		old = &workerv1.ModelArtifact{}
		if err := json.Unmarshal(req.OldObject.Raw, old); err != nil {
			return nil, nil, err
		}
	}
	return a, old, nil
}

// ArtifactValidator refuses the ModelArtifacts their schema cannot judge. The schema holds the
// source union and the frozen spec; this holds the rest (apis/validation.ValidateArtifact).
type ArtifactValidator struct{}

// Handle answers one admission review of a ModelArtifact.
func (ArtifactValidator) Handle(_ context.Context, req admission.Request) admission.Response {
	a, old, err := decodeArtifacts(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	errs := validation.ValidateArtifact(a, old)
	if len(errs) == 0 {
		return admission.Allowed("")
	}
	status := apierrors.NewInvalid(workerv1.SchemeGroupVersion.WithKind(workerv1.ModelArtifactKind).GroupKind(), a.Name, errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

// ArtifactDefaulter writes the revision a hub source resolves when it names none: main on Hugging
// Face, master on ModelScope, so the stored spec says what was resolved.
type ArtifactDefaulter struct{}

// Handle answers one admission review of a ModelArtifact with a patch.
func (ArtifactDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	a, old, err := decodeArtifacts(req)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	defaults := validation.ArtifactDefaults(a, old)
	if len(defaults) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched("defaulted the hub revision", patches(defaults)...)
}
