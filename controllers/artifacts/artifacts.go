package artifacts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// The defaults of Config: the public hubs, and Setting model-artifact-revalidate-interval's 24h.
const (
	DefaultHuggingFaceEndpoint = "https://huggingface.co"
	DefaultModelScopeEndpoint  = "https://www.modelscope.cn"
	DefaultRevalidateInterval  = 24 * time.Hour
	DefaultRetryInterval       = 5 * time.Minute
	// DefaultRequestTimeout bounds one hub call.
	DefaultRequestTimeout = 30 * time.Second
)

// Config is what the resolver reads from the installation's Settings; zero fields take the defaults.
type Config struct {
	// HuggingFaceEndpoint is Setting model-artifact-huggingface-endpoint.
	HuggingFaceEndpoint string
	// ModelScopeEndpoint is Setting model-artifact-modelscope-endpoint.
	ModelScopeEndpoint string
	// RevalidateInterval is Setting model-artifact-revalidate-interval: how long a resolution
	// stands before the source is asked again.
	RevalidateInterval time.Duration
	// RetryInterval is how long a resolution refused by the source (RevisionNotFound, AccessDenied,
	// SecretNotFound, EmptyManifest, DigestMismatch) waits before it is tried again: the fix is on
	// the hub or in a Secret, neither of which is watched.
	RetryInterval time.Duration
	// HTTPSProxy and NoProxy are Settings model-artifact-https-proxy and -no-proxy: the proxy the
	// hub calls go through; blank keeps the controller's own proxy environment.
	HTTPSProxy, NoProxy string
	// CABundle is Setting model-artifact-ca-bundle: a ConfigMap in Namespace whose certificates
	// the hub calls also trust; blank trusts the system roots alone.
	CABundle string
	// Namespace is the one the controller runs in, where the CA bundle ConfigMap lives.
	Namespace string
}

// WithDefaults is c with every zero field defaulted.
func (c Config) WithDefaults() Config {
	if c.HuggingFaceEndpoint == "" {
		c.HuggingFaceEndpoint = DefaultHuggingFaceEndpoint
	}
	if c.ModelScopeEndpoint == "" {
		c.ModelScopeEndpoint = DefaultModelScopeEndpoint
	}
	if c.RevalidateInterval <= 0 {
		c.RevalidateInterval = DefaultRevalidateInterval
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	return c
}

// transport is the hub calls' transport under cfg's proxy and CA bundle Settings.
func (r *Reconciler) transport(ctx context.Context, cfg Config) (*http.Transport, *failure) {
	var bundle map[string]string
	if cfg.CABundle != "" {
		cm := &corev1.ConfigMap{}
		if err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: cfg.Namespace, Name: cfg.CABundle}, cm); err != nil {
			return nil, fail(workerv1.ReasonSourceUnavailable, "reading ConfigMap %s/%s, which Setting %s names: %v; create it with the hub's CA certificates, or clear the Setting",
				cfg.Namespace, cfg.CABundle, settings.ArtifactCABundle, err)
		}
		bundle = cm.Data
	}
	t, err := hubTransport(cfg.HTTPSProxy, cfg.NoProxy, bundle)
	if err != nil {
		return nil, fail(workerv1.ReasonSourceUnavailable, "ConfigMap %s/%s, which Setting %s names, holds %v; put the hub's CA certificates in it as PEM",
			cfg.Namespace, cfg.CABundle, settings.ArtifactCABundle, err)
	}
	return t, nil
}

// Reconciler resolves ModelArtifacts and keeps their protection finalizer.
type Reconciler struct {
	// Client reads artifacts, deployments and claims from the cache and writes artifacts.
	Client client.Client
	// Secrets reads a hub source's Secret straight from the API server (get only: no Secret is
	// cached or watched).
	Secrets  client.Reader
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	// HTTP calls the hubs; nil is a client with DefaultRequestTimeout.
	HTTP   *http.Client
	Config Config
	// Settings reads the mdplane-settings EnvironmentConfig (uncached); its hub endpoints and
	// revalidation interval replace Config's on every pass, so a Setting change reaches the next
	// resolution. nil keeps Config as it is (unit tests).
	Settings settings.Getter
}

// SetupWithManager watches ModelArtifacts (their spec, deletion and finalizers, not the status this
// controller writes), the ModelDeployments naming them (coming, going, being deleted) and the
// PersistentVolumeClaims claim sources name. A failing hub is retried with a backoff of 5 s doubling
// to 10 min.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).
		Named("modelartifact_resolver").
		For(&workerv1.ModelArtifact{}, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!equality.Semantic.DeepEqual(e.ObjectOld.GetDeletionTimestamp(), e.ObjectNew.GetDeletionTimestamp()) ||
				!slices.Equal(e.ObjectOld.GetFinalizers(), e.ObjectNew.GetFinalizers())
		}})).
		Watches(&workerv1.ModelDeployment{}, handler.EnqueueRequestsFromMapFunc(artifactOf), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return !slices.Equal(artifactOf(context.Background(), e.ObjectOld), artifactOf(context.Background(), e.ObjectNew)) ||
				(e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil)
		}})).
		Watches(&corev1.PersistentVolumeClaim{}, handler.EnqueueRequestsFromMapFunc(r.artifactsOfClaim)).
		WithOptions(controller.Options{RateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](5*time.Second, 10*time.Minute)}).
		Complete(r)
}

func artifactOf(_ context.Context, o client.Object) []reconcile.Request {
	md, ok := o.(*workerv1.ModelDeployment)
	if !ok || md.Spec.Model.ArtifactRef == nil {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: md.Namespace, Name: md.Spec.Model.ArtifactRef.Name}}}
}

func (r *Reconciler) artifactsOfClaim(ctx context.Context, o client.Object) []reconcile.Request {
	list := &workerv1.ModelArtifactList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, a := range list.Items {
		if c := a.Spec.Source.PersistentVolumeClaim; c != nil && c.ClaimName == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Name}})
		}
	}
	return out
}

// Reconcile keeps the finalizer, resolves or revalidates when due, and writes the status when it
// changed.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	a := &workerv1.ModelArtifact{}
	if err := r.Client.Get(ctx, req.NamespacedName, a); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if err := r.protect(ctx, a); err != nil {
		return reconcile.Result{}, err
	}
	if a.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	cfg := r.Config.WithDefaults()
	if r.Settings != nil {
		s, _, err := settings.Get(ctx, r.Settings)
		if err != nil {
			return reconcile.Result{}, err // a bad value never falls back to a default: it names the key
		}
		cfg.HuggingFaceEndpoint, cfg.ModelScopeEndpoint, cfg.RevalidateInterval = s.ArtifactHuggingFaceEndpoint, s.ArtifactModelScopeEndpoint, s.ArtifactRevalidateInterval
		cfg.HTTPSProxy, cfg.NoProxy, cfg.CABundle = s.ArtifactHTTPSProxy, s.ArtifactNoProxy, s.ArtifactCABundle
	}
	now := r.Clock.Now()
	status, result, resolveErr := r.next(ctx, a, cfg, now)
	if !equality.Semantic.DeepEqual(status, &a.Status) {
		r.announce(a, status)
		orig := a.DeepCopy()
		a.Status = *status
		if err := r.Client.Status().Patch(ctx, a, client.MergeFrom(orig)); err != nil {
			return reconcile.Result{}, fmt.Errorf("writing the status of ModelArtifact %s: %w", req.NamespacedName, err)
		}
	}
	return result, resolveErr
}

// protect keeps the finalizer while a ModelDeployment in the namespace (a terminating one too, whose
// Pods may still mount the weights) names the artifact, and releases it otherwise. Nothing is added
// to an artifact being deleted: the API server refuses a new finalizer then.
func (r *Reconciler) protect(ctx context.Context, a *workerv1.ModelArtifact) error {
	mds := &workerv1.ModelDeploymentList{}
	if err := r.Client.List(ctx, mds, client.InNamespace(a.Namespace), client.MatchingFields{index.DeploymentArtifact: a.Name}); err != nil {
		return fmt.Errorf("listing the deployments naming ModelArtifact %s/%s: %w", a.Namespace, a.Name, err)
	}
	names := make([]string, 0, len(mds.Items))
	for _, md := range mds.Items {
		names = append(names, md.Name)
	}
	slices.Sort(names)
	has := controllerutil.ContainsFinalizer(a, workerv1.FinalizerModelArtifactProtection)
	want := len(names) > 0
	switch {
	case want && has && a.DeletionTimestamp != nil:
		r.Recorder.Eventf(a, nil, corev1.EventTypeNormal, "DeletionWaiting", "Delete",
			"kept until no ModelDeployment names it: still named by %s", strings.Join(names, ", "))
		return nil
	case want == has, want && a.DeletionTimestamp != nil:
		return nil
	}
	orig := a.DeepCopy()
	if want {
		controllerutil.AddFinalizer(a, workerv1.FinalizerModelArtifactProtection)
	} else {
		controllerutil.RemoveFinalizer(a, workerv1.FinalizerModelArtifactProtection)
	}
	if err := r.Client.Patch(ctx, a, client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("updating the finalizer of ModelArtifact %s/%s: %w", a.Namespace, a.Name, err)
	}
	return nil
}

// next is the status after this pass, the requeue and, for a source that could not be reached, the
// error that retries with backoff.
func (r *Reconciler) next(ctx context.Context, a *workerv1.ModelArtifact, cfg Config, now time.Time) (*workerv1.ModelArtifactStatus, reconcile.Result, error) {
	status := a.Status.DeepCopy()
	resolved := meta.FindStatusCondition(status.Conditions, workerv1.ArtifactResolved)
	fresh := status.Resolved != nil && status.ObservedGeneration == a.Generation &&
		resolved != nil && resolved.Status == metav1.ConditionTrue && resolved.ObservedGeneration == a.Generation
	degraded := meta.IsStatusConditionTrue(status.Conditions, workerv1.ArtifactDegraded)
	var last time.Time
	if fresh && status.Resolved.LastValidatedTime != nil {
		last = status.Resolved.LastValidatedTime.Time
	}
	due := !fresh || degraded || !now.Before(last.Add(cfg.RevalidateInterval))
	s := a.Spec.Source
	if fresh && s.Image != nil {
		return status, reconcile.Result{}, nil // a digest names the same bytes forever: nothing to revalidate
	}
	if !due && s.Hub() != nil {
		return status, reconcile.Result{RequeueAfter: last.Add(cfg.RevalidateInterval).Sub(now)}, nil
	}
	got, message, f := r.attempt(ctx, a, cfg, fresh)
	if got != nil {
		got.ResolvedTime = &metav1.Time{Time: now}
		if s.Image == nil {
			got.LastValidatedTime = &metav1.Time{Time: now}
		}
	}
	apply(status, a, got, message, f, fresh, due || degraded)
	status.ObservedGeneration = a.Generation
	return status, requeue(status, a, f, cfg, now), errorOf(f)
}

// attempt resolves (or, fresh, revalidates) the artifact's source.
func (r *Reconciler) attempt(ctx context.Context, a *workerv1.ModelArtifact, cfg Config, fresh bool) (*workerv1.ResolvedArtifact, string, *failure) {
	s := a.Spec.Source
	switch {
	case s.Image != nil:
		return &workerv1.ResolvedArtifact{}, fmt.Sprintf("image %s is pinned by its digest", s.Image.Reference), nil
	case s.PersistentVolumeClaim != nil:
		return r.claim(ctx, a)
	case s.Hub() != nil:
		return r.hub(ctx, a, cfg, fresh)
	}
	return nil, "", fail(workerv1.ReasonSourceUnavailable, "spec.source names no source")
}

// apply writes an attempt into the status. A first resolution sets Resolved (True with the
// resolution, or False with the reason, the resolution cleared). A revalidation leaves the
// resolution standing: a failure sets Degraded True with the reason, a success (when it was due)
// moves lastValidatedTime and sets Degraded False. A claim is checked on every pass (it is watched),
// so its Resolved message follows the claim's phase.
func apply(status *workerv1.ModelArtifactStatus, a *workerv1.ModelArtifact, got *workerv1.ResolvedArtifact, message string, f *failure, fresh, validated bool) {
	gen := a.Generation
	switch {
	case fresh && f == nil:
		if a.Spec.Source.PersistentVolumeClaim != nil {
			meta.SetStatusCondition(&status.Conditions, condition(workerv1.ArtifactResolved, workerv1.ReasonArtifactResolved, message, gen))
		}
		if validated {
			status.Resolved.LastValidatedTime = got.LastValidatedTime
			meta.SetStatusCondition(&status.Conditions, healthy(gen, "the last revalidation confirmed the resolution"))
		}
	case fresh:
		c := condition(workerv1.ArtifactDegraded, f.reason, "revalidation failed; the resolution stands for the deployments using it: "+f.message, gen)
		meta.SetStatusCondition(&status.Conditions, c)
	case f == nil:
		status.Resolved = got
		meta.SetStatusCondition(&status.Conditions, condition(workerv1.ArtifactResolved, workerv1.ReasonArtifactResolved, message, gen))
		meta.SetStatusCondition(&status.Conditions, healthy(gen, "resolved"))
	default:
		status.Resolved = nil
		c := condition(workerv1.ArtifactResolved, f.reason, f.message, gen)
		c.Status = metav1.ConditionFalse
		meta.SetStatusCondition(&status.Conditions, c)
		meta.SetStatusCondition(&status.Conditions, healthy(gen, "nothing resolved yet, so nothing to degrade"))
	}
}

// requeue is when the artifact is looked at again: a refusal after RetryInterval, a missing claim
// when the claim comes (watched), a resolution when its revalidation is due, an image never.
func requeue(status *workerv1.ModelArtifactStatus, a *workerv1.ModelArtifact, f *failure, cfg Config, now time.Time) reconcile.Result {
	switch {
	case f != nil && f.transient:
		return reconcile.Result{} // the error retries with backoff
	case f != nil && f.reason == workerv1.ReasonClaimNotFound:
		return reconcile.Result{}
	case f != nil:
		return reconcile.Result{RequeueAfter: cfg.RetryInterval}
	case a.Spec.Source.Image != nil:
		return reconcile.Result{}
	}
	if status.Resolved != nil && status.Resolved.LastValidatedTime != nil {
		return reconcile.Result{RequeueAfter: status.Resolved.LastValidatedTime.Add(cfg.RevalidateInterval).Sub(now)}
	}
	return reconcile.Result{RequeueAfter: cfg.RevalidateInterval}
}

// errorOf is the error that retries a source that could not be reached with backoff.
func errorOf(f *failure) error {
	if f != nil && f.transient {
		return f
	}
	return nil
}

func condition(kind, reason, message string, generation int64) metav1.Condition {
	return metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: reason, Message: message, ObservedGeneration: generation}
}

func healthy(generation int64, message string) metav1.Condition {
	c := condition(workerv1.ArtifactDegraded, workerv1.ReasonArtifactHealthy, message, generation)
	c.Status = metav1.ConditionFalse
	return c
}

// claim resolves a claim source: the claim exists; its phase and access modes go in the message.
func (r *Reconciler) claim(ctx context.Context, a *workerv1.ModelArtifact) (*workerv1.ResolvedArtifact, string, *failure) {
	c := a.Spec.Source.PersistentVolumeClaim
	pvc := &corev1.PersistentVolumeClaim{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: c.ClaimName}, pvc)
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", fail(workerv1.ReasonClaimNotFound, "PersistentVolumeClaim %s does not exist in namespace %s: create it, or name an existing claim in a new ModelArtifact", c.ClaimName, a.Namespace)
	case err != nil:
		return nil, "", fail(workerv1.ReasonSourceUnavailable, "reading PersistentVolumeClaim %s: %v", c.ClaimName, err)
	}
	modes := make([]string, 0, len(pvc.Spec.AccessModes))
	for _, m := range pvc.Spec.AccessModes {
		modes = append(modes, string(m))
	}
	phase := string(pvc.Status.Phase)
	if phase == "" {
		phase = string(corev1.ClaimPending)
	}
	msg := fmt.Sprintf("PersistentVolumeClaim %s is %s", c.ClaimName, phase)
	if pvc.Spec.VolumeName != "" {
		msg += " to PersistentVolume " + pvc.Spec.VolumeName
	}
	msg += fmt.Sprintf(", access modes [%s]", strings.Join(modes, ", "))
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadOnlyMany) && !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		msg += " (neither ReadOnlyMany nor ReadWriteMany: only one Pod of all the deployments naming it can mount it)"
	}
	if c.Path != "" {
		msg += "; the weights are at " + c.Path
	}
	return &workerv1.ResolvedArtifact{}, msg, nil
}

// hub resolves a hub source: the spec's revision (or its default) on a first resolution, the
// resolved commit on a revalidation, which must give the same manifest digest.
func (r *Reconciler) hub(ctx context.Context, a *workerv1.ModelArtifact, cfg Config, revalidate bool) (*workerv1.ResolvedArtifact, string, *failure) {
	src := a.Spec.Source.Hub()
	revision := src.Revision
	if revision == "" {
		revision = a.Spec.Source.DefaultRevision()
	}
	if revalidate {
		revision = a.Status.Resolved.Revision
	}
	token := ""
	if src.SecretRef != nil {
		secret := &corev1.Secret{}
		err := r.Secrets.Get(ctx, types.NamespacedName{Namespace: a.Namespace, Name: src.SecretRef.Name}, secret)
		switch {
		case apierrors.IsNotFound(err):
			return nil, "", fail(workerv1.ReasonSecretNotFound, "Secret %s does not exist in namespace %s: create it with the hub token under its %s key", src.SecretRef.Name, a.Namespace, workerv1.ArtifactTokenKey)
		case err != nil:
			return nil, "", fail(workerv1.ReasonSourceUnavailable, "reading Secret %s: %v", src.SecretRef.Name, err)
		}
		t, ok := secret.Data[workerv1.ArtifactTokenKey]
		if !ok || len(t) == 0 {
			return nil, "", fail(workerv1.ReasonSecretNotFound, "Secret %s has no %s key: put the hub token under it", src.SecretRef.Name, workerv1.ArtifactTokenKey)
		}
		token = strings.TrimSpace(string(t))
	}
	c := hubClient{http: r.HTTP}
	if c.http == nil {
		transport, f := r.transport(ctx, cfg)
		if f != nil {
			return nil, "", f
		}
		defer transport.CloseIdleConnections() // a resolution is rare: no connection is kept for the next
		c.http = &http.Client{Timeout: DefaultRequestTimeout, Transport: transport}
	}
	var m Manifest
	var err error
	hubName, endpoint := "Hugging Face", cfg.HuggingFaceEndpoint
	if a.Spec.Source.HuggingFace != nil {
		m, err = c.huggingFace(ctx, endpoint, src.Repository, revision, token)
	} else {
		hubName, endpoint = "ModelScope", cfg.ModelScopeEndpoint
		m, err = c.modelScope(ctx, endpoint, src.Repository, revision, token)
	}
	if f := (*failure)(nil); errors.As(err, &f) {
		return nil, "", f
	} else if err != nil {
		return nil, "", fail(workerv1.ReasonSourceUnavailable, "%v", err)
	}
	files := Filter(m.Files, a.Spec.AllowPatterns, a.Spec.IgnorePatterns)
	if len(files) == 0 {
		return nil, "", fail(workerv1.ReasonEmptyManifest, "%s revision %s of %s (commit %s) has %d files, none of them kept by allowPatterns %q and ignorePatterns %q: loosen the patterns in a new ModelArtifact",
			hubName, revision, src.Repository, m.Commit, len(m.Files), a.Spec.AllowPatterns, a.Spec.IgnorePatterns)
	}
	digest := Digest(files)
	source := workerv1.DigestSourceHub
	switch {
	case revalidate && digest != a.Status.Resolved.ManifestDigest:
		return nil, "", fail(workerv1.ReasonDigestMismatch, "%s now lists commit %s of %s with manifest %s, not the resolved %s: the hub changed the files under a commit",
			hubName, m.Commit, src.Repository, digest, a.Status.Resolved.ManifestDigest)
	case a.Spec.ExpectedDigest != "" && digest != a.Spec.ExpectedDigest:
		return nil, "", fail(workerv1.ReasonDigestMismatch, "%s revision %s of %s (commit %s) has manifest %s, not spec.expectedDigest %s: the revision holds other files than the ones anchored; name the anchored commit, or anchor the new manifest in a new ModelArtifact",
			hubName, revision, src.Repository, m.Commit, digest, a.Spec.ExpectedDigest)
	case a.Spec.ExpectedDigest != "":
		source = workerv1.DigestSourceExpected
	}
	var size int64
	for _, f := range files {
		size += f.Size
	}
	return &workerv1.ResolvedArtifact{Revision: m.Commit, ManifestDigest: digest, DigestSource: source, FileCount: int64(len(files)), SizeBytes: size},
		fmt.Sprintf("%s revision %s of %s is commit %s: %d files, %d bytes, manifest %s", hubName, revision, src.Repository, m.Commit, len(files), size, digest), nil
}

// announce records an event for each condition that changed: what a person reading the artifact's
// events wants to know.
func (r *Reconciler) announce(a *workerv1.ModelArtifact, status *workerv1.ModelArtifactStatus) {
	for _, kind := range []string{workerv1.ArtifactResolved, workerv1.ArtifactDegraded} {
		was, is := meta.FindStatusCondition(a.Status.Conditions, kind), meta.FindStatusCondition(status.Conditions, kind)
		if is == nil || (was != nil && was.Status == is.Status && was.Reason == is.Reason) {
			continue
		}
		switch {
		case kind == workerv1.ArtifactResolved && is.Status == metav1.ConditionTrue:
			r.Recorder.Eventf(a, nil, corev1.EventTypeNormal, is.Reason, "Resolve", "%s", is.Message)
		case kind == workerv1.ArtifactResolved:
			r.Recorder.Eventf(a, nil, corev1.EventTypeWarning, is.Reason, "Resolve", "%s", is.Message)
		case is.Status == metav1.ConditionTrue:
			r.Recorder.Eventf(a, nil, corev1.EventTypeWarning, is.Reason, "Revalidate", "%s", is.Message)
		case was != nil && was.Status == metav1.ConditionTrue:
			r.Recorder.Eventf(a, nil, corev1.EventTypeNormal, "Revalidated", "Revalidate", "the source confirms the resolution again")
		}
	}
}
