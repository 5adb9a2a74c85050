// Package admission judges manifests offline the way a cluster admits them: the API server's schema
// validation first, then the mutating webhooks' defaults, then mdplane's admission rules
// (ModelDeployments with the InstanceTypes and KV cache objects the manifests carry,
// KVCacheBackends, ModelArtifacts), with the Settings of the mdplane-settings EnvironmentConfig
// among them (all defaults when absent; a bad value is a refusal of that document, as the
// EnvironmentConfig webhook refuses it).
package admission

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mdplane/mdplane/apis/settings"
	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/schemacheck"
	"github.com/mdplane/mdplane/internal/tenantclaim"
)

// Refusal is one reason an object would not be admitted.
type Refusal struct {
	// Source is the file and document the object came from, and Object names it.
	Source, Object string
	// Path is the field path; Reason the message.
	Path, Reason string
}

// String is the refusal as one line: <field>: <message> (<object>, <source>).
func (r Refusal) String() string {
	at := r.Path
	if at == "" {
		at = "<object>"
	}
	return fmt.Sprintf("%s: %s (%s, %s)", at, r.Reason, r.Object, r.Source)
}

// Judge admits docs as creates, or as updates of the objects in stored with the same kind,
// namespace and name. It returns every object as it would be stored (defaulted, status kept) and
// every refusal.
func Judge(checker *schemacheck.Checker, docs, stored []schemacheck.Document) ([]*unstructured.Unstructured, []Refusal, error) {
	old := map[string]*unstructured.Unstructured{}
	for _, d := range stored {
		old[schemacheck.Key(d.Object)] = d.Object
	}
	var objects []*unstructured.Unstructured
	var refusals []Refusal
	cluster := validation.Cluster{InstanceTypes: map[string]*workerv1.InstanceType{}}
	cache := cacheObjects{bindings: map[string]*workerv1.KVCachePoolBinding{}, pools: map[string]*workerv1.KVCachePool{}, backends: map[string]*workerv1.KVCacheBackend{}}
	for _, d := range docs {
		if checker.Knows(d.Object.GroupVersionKind()) {
			_, violations, err := checker.Check(d.Object, old[schemacheck.Key(d.Object)])
			if err != nil {
				return nil, nil, err
			}
			for _, v := range violations {
				refusals = append(refusals, Refusal{d.Source, schemacheck.Describe(d.Object), v.Path, v.Reason})
			}
		}
		obj := checker.Default(d.Object)
		if err := defaultArtifact(checker, obj, old[schemacheck.Key(d.Object)]); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		objects = append(objects, obj)
		if obj.GroupVersionKind() == workerv1.SchemeGroupVersion.WithKind(workerv1.InstanceTypeKind) {
			it := &workerv1.InstanceType{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, it); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", d.Source, err)
			}
			cluster.InstanceTypes[it.Name] = it
		}
		if err := cache.add(obj); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Source, err)
		}
	}
	if len(refusals) > 0 {
		return objects, refusals, nil // the rules below read objects the schema would have refused
	}
	if err := defaultDeployments(docs, objects, cluster.InstanceTypes); err != nil {
		return nil, nil, err
	}
	s, refused := judgeSettings(docs, objects)
	if len(refused) > 0 {
		return objects, refused, nil // the rules below read the Settings
	}
	cluster.Settings = &s
	refusals = append(refusals, judgeBindings(docs, objects, stored, cache)...)
	claimDomains(objects, cache)
	for i, d := range docs {
		obj := objects[i]
		if judge, ok := kindRules[obj.GroupVersionKind()]; ok {
			errs, err := judge(checker, obj, old[schemacheck.Key(d.Object)], s)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", d.Source, err)
			}
			for _, e := range errs {
				refusals = append(refusals, Refusal{d.Source, schemacheck.Describe(obj), e.Field, e.ErrorBody()})
			}
			continue
		}
		if obj.GroupVersionKind() != workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind) {
			continue
		}
		errs, err := judgeDeployment(checker, obj, old[schemacheck.Key(d.Object)], cluster, cache)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Source, err)
		}
		for _, e := range errs {
			refusals = append(refusals, Refusal{d.Source, schemacheck.Describe(obj), e.Field, e.ErrorBody()})
		}
	}
	return objects, refusals, nil
}

// judgeDeployment runs the ModelDeployment webhook's rules with the cluster objects among the
// documents, as an update of prev when one is stored.
func judgeDeployment(checker *schemacheck.Checker, obj, prev *unstructured.Unstructured, cluster validation.Cluster, cache cacheObjects) (field.ErrorList, error) {
	md := &workerv1.ModelDeployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, md); err != nil {
		return nil, err
	}
	cluster.KVCache = cache.chain(md)
	if prev == nil {
		return validation.ValidateCreate(md, cluster), nil
	}
	stored, err := storedDeployment(checker, prev, cluster.InstanceTypes)
	if err != nil {
		return nil, err
	}
	return validation.ValidateUpdate(md, stored, cluster), nil
}

// storedDeployment is prev as the cluster stored it: the mutating webhook defaulted it at its
// create, so a stored manifest that omits a role's card count holds the count the edit is given.
// The defaults only fill what is unset: a version read back from the cluster is left as it is.
func storedDeployment(checker *schemacheck.Checker, prev *unstructured.Unstructured, types map[string]*workerv1.InstanceType) (*workerv1.ModelDeployment, error) {
	obj := checker.Default(prev)
	stored := &workerv1.ModelDeployment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, stored); err != nil {
		return nil, err
	}
	if err := validation.ApplyDefaults(obj.Object, validation.DeploymentDefaults(stored, types)); err != nil {
		return nil, err
	}
	stored = &workerv1.ModelDeployment{}
	return stored, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, stored)
}

// kindRules are the webhooks of the kinds judged alone (without the other documents), by kind.
var kindRules = map[schema.GroupVersionKind]func(checker *schemacheck.Checker, obj, prev *unstructured.Unstructured, s settings.Settings) (field.ErrorList, error){
	workerv1.SchemeGroupVersion.WithKind(workerv1.KVCacheBackendKind): judgeBackend,
	workerv1.SchemeGroupVersion.WithKind(workerv1.ModelArtifactKind):  judgeArtifact,
}

// judgeArtifact runs the artifact webhook's rules on a ModelArtifact, as an update of prev when one
// is stored.
func judgeArtifact(checker *schemacheck.Checker, obj, prev *unstructured.Unstructured, _ settings.Settings) (field.ErrorList, error) {
	a, stored, err := artifacts(checker, obj, prev)
	if err != nil {
		return nil, err
	}
	return validation.ValidateArtifact(a, stored), nil
}

// judgeSettings reads the Settings from the mdplane-settings EnvironmentConfig among the documents:
// the defaults without one, a refusal per bad value, and a refusal of a second one.
func judgeSettings(docs []schemacheck.Document, objects []*unstructured.Unstructured) (settings.Settings, []Refusal) {
	var found *unstructured.Unstructured
	var refusals []Refusal
	for i, obj := range objects {
		if !settings.IsSettings(obj) {
			continue
		}
		if found != nil {
			refusals = append(refusals, Refusal{docs[i].Source, schemacheck.Describe(obj), "metadata.name",
				fmt.Sprintf("a second EnvironmentConfig %s; keep one", settings.EnvironmentConfigName)})
			continue
		}
		found = obj
		if v := obj.GetAPIVersion(); v != settings.APIVersion {
			refusals = append(refusals, Refusal{docs[i].Source, schemacheck.Describe(obj), "apiVersion",
				fmt.Sprintf("%s is not served by Crossplane v2; write apiVersion: %s", v, settings.APIVersion)})
		}
		_, _, errs := settings.FromObject(obj)
		for _, e := range errs {
			refusals = append(refusals, Refusal{docs[i].Source, schemacheck.Describe(obj), e.Field, e.ErrorBody()})
		}
	}
	if len(refusals) > 0 {
		return settings.Settings{}, refusals
	}
	s, _, _ := settings.FromObject(found)
	return s, nil
}

// SettingsWarnings are the warnings the Settings webhook would return for the mdplane-settings
// documents among docs (keys mdplane does not read), one line each with its source.
func SettingsWarnings(docs []schemacheck.Document) []string {
	var out []string
	for _, d := range docs {
		if !settings.IsSettings(d.Object) {
			continue
		}
		_, warnings, _ := settings.FromObject(d.Object)
		for _, w := range warnings {
			out = append(out, fmt.Sprintf("%s (%s, %s)", w, schemacheck.Describe(d.Object), d.Source))
		}
	}
	return out
}

// judgeBackend runs the backend webhook's rules on a KVCacheBackend, as an update of prev when one
// is stored, with the Settings' fallback image.
func judgeBackend(checker *schemacheck.Checker, obj, prev *unstructured.Unstructured, s settings.Settings) (field.ErrorList, error) {
	b := &workerv1.KVCacheBackend{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b); err != nil {
		return nil, err
	}
	var stored *workerv1.KVCacheBackend
	if prev != nil {
		stored = &workerv1.KVCacheBackend{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(checker.Default(prev).Object, stored); err != nil {
			return nil, err
		}
	}
	errs, _ := validation.ValidateBackend(b, stored, s.KVCacheBackendImage)
	return errs, nil
}

// artifacts reads a ModelArtifact and, when one is stored, the stored one (defaulted as stored).
func artifacts(checker *schemacheck.Checker, obj, prev *unstructured.Unstructured) (a, stored *workerv1.ModelArtifact, err error) {
	a = &workerv1.ModelArtifact{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, a); err != nil {
		return nil, nil, err
	}
	if prev != nil {
		stored = &workerv1.ModelArtifact{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(checker.Default(prev).Object, stored); err != nil {
			return nil, nil, err
		}
	}
	return a, stored, nil
}

// defaultArtifact writes what the mutating webhook would write into obj, when it is a ModelArtifact.
func defaultArtifact(checker *schemacheck.Checker, obj, prev *unstructured.Unstructured) error {
	if obj.GroupVersionKind() != workerv1.SchemeGroupVersion.WithKind(workerv1.ModelArtifactKind) {
		return nil
	}
	a, stored, err := artifacts(checker, obj, prev)
	if err != nil {
		return err
	}
	return validation.ApplyDefaults(obj.Object, validation.ArtifactDefaults(a, stored))
}

// defaultDeployments writes what the mutating webhook would write into each ModelDeployment among
// objects, with the InstanceTypes among the documents (the webhook reads them from the cluster), so
// the rules and the render judge the object a cluster stores.
func defaultDeployments(docs []schemacheck.Document, objects []*unstructured.Unstructured, types map[string]*workerv1.InstanceType) error {
	for i, obj := range objects {
		if obj.GroupVersionKind() != workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind) {
			continue
		}
		md := &workerv1.ModelDeployment{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, md); err != nil {
			return fmt.Errorf("%s: %w", docs[i].Source, err)
		}
		if err := validation.ApplyDefaults(obj.Object, validation.DeploymentDefaults(md, types)); err != nil {
			return fmt.Errorf("%s: %w", docs[i].Source, err)
		}
	}
	return nil
}

// cacheObjects are the KV cache Bindings, pools and backends among the judged documents.
type cacheObjects struct {
	bindings map[string]*workerv1.KVCachePoolBinding // by namespace/name
	pools    map[string]*workerv1.KVCachePool
	backends map[string]*workerv1.KVCacheBackend
}

func (c cacheObjects) add(obj *unstructured.Unstructured) error {
	var err error
	switch obj.GroupVersionKind() {
	case workerv1.SchemeGroupVersion.WithKind(workerv1.KVCachePoolBindingKind):
		b := &workerv1.KVCachePoolBinding{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b)
		c.bindings[b.Namespace+"/"+b.Name] = b
	case workerv1.SchemeGroupVersion.WithKind(workerv1.KVCachePoolKind):
		p := &workerv1.KVCachePool{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, p)
		c.pools[p.Name] = p
	case workerv1.SchemeGroupVersion.WithKind(workerv1.KVCacheBackendKind):
		b := &workerv1.KVCacheBackend{}
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b)
		c.backends[b.Name] = b
	}
	return err
}

// judgeBindings runs the Binding webhook's rule on each new KVCachePoolBinding among the documents,
// against the stored ones and those before it, as the API server would admit them in order.
func judgeBindings(docs []schemacheck.Document, objects []*unstructured.Unstructured, stored []schemacheck.Document, cache cacheObjects) []Refusal {
	var bindings []workerv1.KVCachePoolBinding
	isStored := map[string]bool{}
	for _, d := range stored {
		if b, ok := asBinding(d.Object); ok {
			bindings = append(bindings, *b)
			isStored[schemacheck.Key(d.Object)] = true
		}
	}
	var refusals []Refusal
	for i, obj := range objects {
		b, ok := asBinding(obj)
		if !ok {
			continue
		}
		if !isStored[schemacheck.Key(docs[i].Object)] {
			for _, e := range validation.ValidateBinding(b, bindings, cache.backendOf) {
				refusals = append(refusals, Refusal{docs[i].Source, schemacheck.Describe(obj), e.Field, e.ErrorBody()})
			}
		}
		bindings = append(bindings, *b)
	}
	return refusals
}

// claimDomains writes on each Binding the DomainClaimed condition mdplane-controllers would: the
// render uses only a Binding holding its claim. Bindings the documents admit hold distinct domains
// per master (judgeBindings refuses the rest), so each one whose pool is among them holds its claim;
// a condition the document already carries is kept.
func claimDomains(objects []*unstructured.Unstructured, cache cacheObjects) {
	for _, obj := range objects {
		b, ok := asBinding(obj)
		if !ok || meta.FindStatusCondition(b.Status.Conditions, workerv1.BindingDomainClaimed) != nil {
			continue
		}
		c := tenantclaim.Condition(b, "", tenantclaim.Outcome{}, metav1.Time{})
		if backend := cache.backendOf(b.Spec.PoolRef.Name); backend != "" {
			c = tenantclaim.Condition(b, tenantclaim.Name(backend, validation.DomainName(b)), tenantclaim.Outcome{Held: true}, metav1.Time{})
		}
		b.Status.Conditions = append(b.Status.Conditions, c)
		// A decoded Binding's status converts back and sets: neither can fail.
		status, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(&b.Status)
		_ = unstructured.SetNestedField(obj.Object, status, "status")
		cache.bindings[b.Namespace+"/"+b.Name] = b
	}
}

// backendOf names the backend a pool among the documents names, "" when the pool is absent: the
// backend is the master a domain is unique on, known with the pool, as the webhook judges it.
func (c cacheObjects) backendOf(pool string) string {
	p := c.pools[pool]
	if p == nil || len(p.Spec.Backends) == 0 {
		return ""
	}
	return p.Spec.Backends[0]
}

// asBinding decodes a KVCachePoolBinding document; ok is false for any other kind.
func asBinding(obj *unstructured.Unstructured) (*workerv1.KVCachePoolBinding, bool) {
	if obj.GroupVersionKind() != workerv1.SchemeGroupVersion.WithKind(workerv1.KVCachePoolBindingKind) {
		return nil, false
	}
	b := &workerv1.KVCachePoolBinding{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, b); err != nil {
		return nil, false // the schema check has refused what does not decode
	}
	return b, true
}

// chain is what the webhook would read for a deployment's spec.kvCache. When the documents carry
// no Binding at all, nothing was given to read, and the chain is left unread (nil) rather than
// reported missing: an offline check of a lone deployment judges as it always did.
func (c cacheObjects) chain(md *workerv1.ModelDeployment) *validation.KVCacheChain {
	return CacheChain(md, c.bindings, c.pools, c.backends)
}

// CacheChain is the chain a deployment's spec.kvCache names among the given objects (Bindings by
// namespace/name, pools and backends by name): nil without spec.kvCache or without any Binding
// given, else the Binding, its pool and the pool's first backend, each nil when absent.
func CacheChain(md *workerv1.ModelDeployment, bindings map[string]*workerv1.KVCachePoolBinding, pools map[string]*workerv1.KVCachePool,
	backends map[string]*workerv1.KVCacheBackend) *validation.KVCacheChain {
	if md.Spec.KVCache == nil || len(bindings) == 0 {
		return nil
	}
	ch := &validation.KVCacheChain{Binding: bindings[md.Namespace+"/"+md.Spec.KVCache.PoolRef.Name]}
	if ch.Binding == nil {
		return ch
	}
	if ch.Pool = pools[ch.Binding.Spec.PoolRef.Name]; ch.Pool == nil || len(ch.Pool.Spec.Backends) == 0 {
		return ch
	}
	ch.Backend = backends[ch.Pool.Spec.Backends[0]]
	return ch
}
