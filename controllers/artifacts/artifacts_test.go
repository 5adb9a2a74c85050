package artifacts_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/artifacts"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/internal/hubtest"
)

const ns = "team-a"

var (
	t0      = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	commitA = hubtest.CommitID("a")
	commitB = hubtest.CommitID("b")
	files   = []hubtest.File{
		{Path: "config.json", Size: 700},
		{Path: "model-00001-of-00002.safetensors", Size: 4_000_000_000, LFS: true},
		{Path: "model-00002-of-00002.safetensors", Size: 3_000_000_000, LFS: true},
		{Path: "onnx/model.onnx", Size: 9_000_000_000, LFS: true},
	}
)

// env is a fake cluster, a local hub serving both APIs, and the resolver pointed at it.
type env struct {
	r      *artifacts.Reconciler
	c      client.Client
	hub    *hubtest.Hub
	server *httptest.Server
	clock  *clocktesting.FakePassiveClock
	events *events.FakeRecorder
}

func newEnv(t *testing.T, objs ...client.Object) *env {
	hub := hubtest.New()
	hub.Put("Qwen/Qwen3-8B", commitA, append([]hubtest.File(nil), files...), "main", "master", "v1.0")
	server := httptest.NewServer(hub)
	t.Cleanup(server.Close)
	c := fakecluster.Builder(objs...).Build()
	e := &env{c: c, hub: hub, server: server, clock: clocktesting.NewFakePassiveClock(t0), events: events.NewFakeRecorder(20)}
	e.r = &artifacts.Reconciler{Client: c, Secrets: c, Recorder: e.events, Clock: e.clock, HTTP: server.Client(),
		Config: artifacts.Config{HuggingFaceEndpoint: server.URL, ModelScopeEndpoint: server.URL + "/"}}
	return e
}

func (e *env) reconcile(t *testing.T, name string) (*workerv1.ModelArtifact, reconcile.Result, error) {
	t.Helper()
	res, err := e.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	a := &workerv1.ModelArtifact{}
	if getErr := e.c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, a); apierrors.IsNotFound(getErr) {
		return nil, res, err
	} else {
		require.NoError(t, getErr)
	}
	return a, res, err
}

func art(name string, source workerv1.ModelArtifactSource, edits ...func(*workerv1.ModelArtifactSpec)) *workerv1.ModelArtifact {
	a := &workerv1.ModelArtifact{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Generation: 1}, Spec: workerv1.ModelArtifactSpec{Source: source}}
	for _, e := range edits {
		e(&a.Spec)
	}
	return a
}

func hf(repo, revision string, secret ...string) workerv1.ModelArtifactSource {
	h := &workerv1.HubSource{Repository: repo, Revision: revision}
	if len(secret) > 0 {
		h.SecretRef = &workerv1.LocalReference{Name: secret[0]}
	}
	return workerv1.ModelArtifactSource{HuggingFace: h}
}

func ms(repo, revision string) workerv1.ModelArtifactSource {
	return workerv1.ModelArtifactSource{ModelScope: &workerv1.HubSource{Repository: repo, Revision: revision}}
}

func secret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func cond(a *workerv1.ModelArtifact, kind string) metav1.Condition {
	c := meta.FindStatusCondition(a.Status.Conditions, kind)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// The canonical manifest, by hand: one line per file sorted by path, "<oid> <size> <path>\n".
func TestDigestCanonicalForm(t *testing.T) {
	got := artifacts.Digest([]artifacts.File{{Path: "b.safetensors", Size: 10, OID: "sha256:" + strings.Repeat("1", 64)}, {Path: "a.json", Size: 2, OID: "git:abc"}})
	sum := sha256.Sum256([]byte("git:abc 2 a.json\nsha256:" + strings.Repeat("1", 64) + " 10 b.safetensors\n"))
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), got)
	assert.Equal(t, got, artifacts.Digest([]artifacts.File{{Path: "a.json", Size: 2, OID: "git:abc"}, {Path: "b.safetensors", Size: 10, OID: "sha256:" + strings.Repeat("1", 64)}}), "order-free")
	assert.NotEqual(t, got, artifacts.Digest([]artifacts.File{{Path: "a.json", Size: 3, OID: "git:abc"}, {Path: "b.safetensors", Size: 10, OID: "sha256:" + strings.Repeat("1", 64)}}), "a size is part of it")
}

func TestFilterIsFnmatch(t *testing.T) {
	fs := []artifacts.File{{Path: "config.json"}, {Path: "model.safetensors"}, {Path: "onnx/model.onnx"}, {Path: "original/consolidated.pth"}, {Path: "tokenizer.json"}}
	paths := func(fs []artifacts.File) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	assert.Equal(t, []string{"config.json", "model.safetensors", "tokenizer.json"}, paths(artifacts.Filter(fs, []string{"*.json", "*.safetensors"}, nil)))
	assert.Equal(t, []string{"config.json", "model.safetensors", "tokenizer.json"}, paths(artifacts.Filter(fs, nil, []string{"onnx/", "original/*"})), "a trailing slash is the directory")
	assert.Equal(t, []string{"onnx/model.onnx"}, paths(artifacts.Filter(fs, []string{"*.onnx"}, nil)), "'*' crosses '/', as fnmatch")
	assert.Equal(t, []string{"config.json"}, paths(artifacts.Filter(fs, []string{"[c]onfig.json", "t?kenizer.jsonx"}, nil)))
	assert.Equal(t, []string{"tokenizer.json"}, paths(artifacts.Filter(fs, []string{"[!c]*.json"}, nil)))
}

// Every reason of the Resolved condition, each produced by a source as the hub or the cluster
// answers it.
func TestResolveReasons(t *testing.T) {
	bound := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "weights", Namespace: ns},
		Spec:   corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}, VolumeName: "pv-1"},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	pending := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}}
	digestOfAll := ""
	cases := []struct {
		rule      string
		artifact  *workerv1.ModelArtifact
		objs      []client.Object
		hub       func(*hubtest.Hub, *httptest.Server)
		reason    string
		status    metav1.ConditionStatus
		message   []string
		transient bool
		check     func(*testing.T, *workerv1.ModelArtifact)
	}{
		{rule: "a Hugging Face revision resolves to its commit and filtered manifest",
			artifact: art("hf", hf("Qwen/Qwen3-8B", "main"), func(s *workerv1.ModelArtifactSpec) { s.IgnorePatterns = []string{"onnx/"} }),
			reason:   workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue, message: []string{"commit " + commitA, "3 files"},
			check: func(t *testing.T, a *workerv1.ModelArtifact) {
				require.NotNil(t, a.Status.Resolved)
				assert.Equal(t, commitA, a.Status.Resolved.Revision)
				assert.EqualValues(t, 3, a.Status.Resolved.FileCount)
				assert.EqualValues(t, 7_000_000_700, a.Status.Resolved.SizeBytes, "lfs.size, not the pointer's size")
				assert.Equal(t, workerv1.DigestSourceHub, a.Status.Resolved.DigestSource)
				assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, a.Status.Resolved.ManifestDigest)
				assert.Equal(t, t0, a.Status.Resolved.ResolvedTime.UTC())
				assert.Equal(t, t0, a.Status.Resolved.LastValidatedTime.UTC())
				assert.EqualValues(t, 1, a.Status.ObservedGeneration)
				digestOfAll = a.Status.Resolved.ManifestDigest
			}},
		{rule: "a ModelScope source without a revision resolves master, through the revisions and the files",
			artifact: art("ms", ms("Qwen/Qwen3-8B", ""), func(s *workerv1.ModelArtifactSpec) { s.IgnorePatterns = []string{"onnx/*"} }),
			reason:   workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue, message: []string{"ModelScope revision master", "commit " + commitA},
			check: func(t *testing.T, a *workerv1.ModelArtifact) {
				assert.Equal(t, commitA, a.Status.Resolved.Revision)
				assert.EqualValues(t, 3, a.Status.Resolved.FileCount, "directories are not files")
				assert.EqualValues(t, 7_000_000_700, a.Status.Resolved.SizeBytes)
			}},
		{rule: "a commit is resolved as itself",
			artifact: art("commit", ms("Qwen/Qwen3-8B", commitA)), reason: workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue},
		{rule: "expectedDigest matching the manifest is the digest's source",
			artifact: art("anchored", hf("Qwen/Qwen3-8B", "main"), func(s *workerv1.ModelArtifactSpec) { s.IgnorePatterns = []string{"onnx/"} }),
			reason:   workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue,
			check: func(t *testing.T, a *workerv1.ModelArtifact) {
				assert.Equal(t, workerv1.DigestSourceHub, a.Status.Resolved.DigestSource, "set up below with the digest of the first case")
			}},
		{rule: "an unknown revision is RevisionNotFound",
			artifact: art("norev", hf("Qwen/Qwen3-8B", "nope")), reason: workerv1.ReasonRevisionNotFound, status: metav1.ConditionFalse,
			message: []string{"404", `revision "nope" of Qwen/Qwen3-8B`}},
		{rule: "an unknown ModelScope branch is RevisionNotFound",
			artifact: art("msnorev", ms("Qwen/Qwen3-8B", "dev")), reason: workerv1.ReasonRevisionNotFound, status: metav1.ConditionFalse,
			message: []string{`no branch or tag "dev"`}},
		{rule: "a private repository without a token is AccessDenied (401)",
			artifact: art("private", hf("org/private", "main")), reason: workerv1.ReasonAccessDenied, status: metav1.ConditionFalse,
			hub: func(h *hubtest.Hub, _ *httptest.Server) {
				h.Put("org/private", commitB, files[:1], "main")
				h.Protect("org/private", "s3cret")
			},
			message: []string{"401", "secretRef"}},
		{rule: "a private repository with another token is AccessDenied (403)",
			artifact: art("wrongtoken", hf("org/private", "main", "hub")), objs: []client.Object{secret("hub", map[string]string{"token": "other"})},
			hub: func(h *hubtest.Hub, _ *httptest.Server) {
				h.Put("org/private", commitB, files[:1], "main")
				h.Protect("org/private", "s3cret")
			},
			reason: workerv1.ReasonAccessDenied, status: metav1.ConditionFalse, message: []string{"403"}},
		{rule: "a private repository with its token resolves",
			artifact: art("token", hf("org/private", "main", "hub")), objs: []client.Object{secret("hub", map[string]string{"token": "s3cret\n"})},
			hub: func(h *hubtest.Hub, _ *httptest.Server) {
				h.Put("org/private", commitB, files[:1], "main")
				h.Protect("org/private", "s3cret")
			},
			reason: workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue},
		{rule: "a missing Secret is SecretNotFound",
			artifact: art("nosecret", hf("Qwen/Qwen3-8B", "main", "hub")), reason: workerv1.ReasonSecretNotFound, status: metav1.ConditionFalse,
			message: []string{"Secret hub does not exist", "token key"}},
		{rule: "a Secret without the token key is SecretNotFound",
			artifact: art("nokey", hf("Qwen/Qwen3-8B", "main", "hub")), objs: []client.Object{secret("hub", map[string]string{"hf_token": "x"})},
			reason: workerv1.ReasonSecretNotFound, status: metav1.ConditionFalse, message: []string{"has no token key"}},
		{rule: "a hub answering 500 is SourceUnavailable, retried with backoff",
			artifact: art("down", hf("Qwen/Qwen3-8B", "main")), hub: func(h *hubtest.Hub, _ *httptest.Server) { h.Fail("", http.StatusInternalServerError) },
			reason: workerv1.ReasonSourceUnavailable, status: metav1.ConditionFalse, message: []string{"500"}, transient: true},
		{rule: "a hub refusing connections is SourceUnavailable",
			artifact: art("gone", ms("Qwen/Qwen3-8B", "master")), hub: func(_ *hubtest.Hub, s *httptest.Server) { s.Close() },
			reason: workerv1.ReasonSourceUnavailable, status: metav1.ConditionFalse, message: []string{"cannot reach"}, transient: true},
		{rule: "patterns keeping no file are EmptyManifest",
			artifact: art("empty", hf("Qwen/Qwen3-8B", "main"), func(s *workerv1.ModelArtifactSpec) { s.AllowPatterns = []string{"*.gguf"} }),
			reason:   workerv1.ReasonEmptyManifest, status: metav1.ConditionFalse, message: []string{"4 files, none of them kept", "*.gguf"}},
		{rule: "a manifest other than expectedDigest is DigestMismatch",
			artifact: art("mismatch", hf("Qwen/Qwen3-8B", "main"), func(s *workerv1.ModelArtifactSpec) { s.ExpectedDigest = "sha256:" + strings.Repeat("0", 64) }),
			reason:   workerv1.ReasonDigestMismatch, status: metav1.ConditionFalse, message: []string{"not spec.expectedDigest sha256:000"}},
		{rule: "a missing claim is ClaimNotFound",
			artifact: art("noclaim", workerv1.ModelArtifactSource{PersistentVolumeClaim: &workerv1.ClaimSource{ClaimName: "weights"}}),
			reason:   workerv1.ReasonClaimNotFound, status: metav1.ConditionFalse, message: []string{"PersistentVolumeClaim weights does not exist"}},
		{rule: "a bound claim resolves without a revision or digest, its phase and access modes in the message",
			artifact: art("claim", workerv1.ModelArtifactSource{PersistentVolumeClaim: &workerv1.ClaimSource{ClaimName: "weights", Path: "qwen"}}), objs: []client.Object{bound},
			reason: workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue, message: []string{"is Bound to PersistentVolume pv-1", "[ReadOnlyMany]", "at qwen"},
			check: func(t *testing.T, a *workerv1.ModelArtifact) {
				assert.Empty(t, a.Status.Resolved.Revision)
				assert.Empty(t, a.Status.Resolved.ManifestDigest)
				assert.NotNil(t, a.Status.Resolved.ResolvedTime)
			}},
		{rule: "a pending claim resolves too, and a single-Pod access mode is pointed out",
			artifact: art("pending", workerv1.ModelArtifactSource{PersistentVolumeClaim: &workerv1.ClaimSource{ClaimName: "pending"}}), objs: []client.Object{pending},
			reason: workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue, message: []string{"is Pending", "only one Pod"}},
		{rule: "an image resolves at once, without a revision or digest",
			artifact: art("image", workerv1.ModelArtifactSource{Image: &workerv1.ImageSource{Reference: "registry.local/m/qwen@sha256:" + strings.Repeat("a", 64)}}),
			reason:   workerv1.ReasonArtifactResolved, status: metav1.ConditionTrue, message: []string{"pinned by its digest"},
			check: func(t *testing.T, a *workerv1.ModelArtifact) {
				assert.Empty(t, a.Status.Resolved.Revision)
				assert.Nil(t, a.Status.Resolved.LastValidatedTime, "nothing to validate a digest against")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if tc.artifact.Name == "anchored" {
				require.NotEmpty(t, digestOfAll, "runs after the first case")
				tc.artifact.Spec.ExpectedDigest = digestOfAll
				tc.check = func(t *testing.T, a *workerv1.ModelArtifact) {
					assert.Equal(t, workerv1.DigestSourceExpected, a.Status.Resolved.DigestSource)
					assert.Equal(t, digestOfAll, a.Status.Resolved.ManifestDigest)
				}
			}
			e := newEnv(t, append(tc.objs, tc.artifact)...)
			if tc.hub != nil {
				tc.hub(e.hub, e.server)
			}
			a, res, err := e.reconcile(t, tc.artifact.Name)
			if tc.transient {
				assert.Error(t, err, "an error: the controller retries with backoff")
			} else {
				assert.NoError(t, err)
			}
			c := cond(a, workerv1.ArtifactResolved)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.EqualValues(t, 1, c.ObservedGeneration)
			for _, part := range tc.message {
				assert.Contains(t, c.Message, part)
			}
			d := cond(a, workerv1.ArtifactDegraded)
			assert.Equal(t, metav1.ConditionFalse, d.Status)
			assert.Equal(t, workerv1.ReasonArtifactHealthy, d.Reason)
			if tc.status == metav1.ConditionFalse {
				assert.Nil(t, a.Status.Resolved)
				if !tc.transient && tc.reason != workerv1.ReasonClaimNotFound {
					assert.Equal(t, artifacts.DefaultRetryInterval, res.RequeueAfter)
				}
			}
			if tc.check != nil {
				tc.check(t, a)
			}
			evs := fakecluster.Events(e.events)
			require.NotEmpty(t, evs, "an event says what happened")
			assert.Contains(t, evs[0], tc.reason)
		})
	}
}

// A resolution is revalidated once an interval, against its commit: a failure degrades the artifact
// and leaves the resolution standing; a success heals it. Between revalidations the hub is not asked
// and nothing is written.
func TestRevalidation(t *testing.T) {
	e := newEnv(t, art("qwen", hf("Qwen/Qwen3-8B", "")))
	a, res, err := e.reconcile(t, "qwen")
	require.NoError(t, err)
	require.Equal(t, metav1.ConditionTrue, cond(a, workerv1.ArtifactResolved).Status)
	assert.Equal(t, artifacts.DefaultRevalidateInterval, res.RequeueAfter)
	assert.Contains(t, cond(a, workerv1.ArtifactResolved).Message, "revision main", "the default revision")
	resolved := a.Status.Resolved.DeepCopy()
	version := a.ResourceVersion
	calls := len(e.hub.Requests())

	e.clock.SetTime(t0.Add(time.Hour))
	a, res, err = e.reconcile(t, "qwen")
	require.NoError(t, err)
	assert.Equal(t, version, a.ResourceVersion, "idempotent: nothing written")
	assert.Len(t, e.hub.Requests(), calls, "not due: the hub is not asked")
	assert.Equal(t, 23*time.Hour, res.RequeueAfter)

	// main moves on; the revalidation asks for the resolved commit, not the branch.
	e.hub.Put("Qwen/Qwen3-8B", commitB, files[:1], "main")
	e.hub.Fail("", http.StatusServiceUnavailable)
	e.clock.SetTime(t0.Add(24 * time.Hour))
	a, _, err = e.reconcile(t, "qwen")
	require.Error(t, err, "retried with backoff")
	assert.Contains(t, e.hub.Requests()[len(e.hub.Requests())-1], "/revision/"+commitA)
	assert.Equal(t, metav1.ConditionTrue, cond(a, workerv1.ArtifactResolved).Status, "the resolution stands")
	d := cond(a, workerv1.ArtifactDegraded)
	assert.Equal(t, metav1.ConditionTrue, d.Status)
	assert.Equal(t, workerv1.ReasonSourceUnavailable, d.Reason)
	assert.Equal(t, resolved, a.Status.Resolved, "revision, digest and times unchanged")

	e.hub.Fail("", 0)
	e.clock.SetTime(t0.Add(24*time.Hour + time.Minute))
	a, res, err = e.reconcile(t, "qwen")
	require.NoError(t, err)
	d = cond(a, workerv1.ArtifactDegraded)
	assert.Equal(t, metav1.ConditionFalse, d.Status)
	assert.Equal(t, workerv1.ReasonArtifactHealthy, d.Reason)
	assert.Equal(t, commitA, a.Status.Resolved.Revision, "still the resolved commit")
	assert.Equal(t, t0.Add(24*time.Hour+time.Minute), a.Status.Resolved.LastValidatedTime.UTC())
	assert.Equal(t, t0, a.Status.Resolved.ResolvedTime.UTC())
	assert.Equal(t, artifacts.DefaultRevalidateInterval, res.RequeueAfter)
	evs := strings.Join(fakecluster.Events(e.events), "\n")
	assert.Contains(t, evs, "SourceUnavailable")
	assert.Contains(t, evs, "Revalidated")

	// The hub now lists other files under the resolved commit.
	e.hub.Put("Qwen/Qwen3-8B", commitA, files[:2])
	e.clock.SetTime(t0.Add(49 * time.Hour))
	a, res, err = e.reconcile(t, "qwen")
	require.NoError(t, err)
	d = cond(a, workerv1.ArtifactDegraded)
	assert.Equal(t, metav1.ConditionTrue, d.Status)
	assert.Equal(t, workerv1.ReasonDigestMismatch, d.Reason)
	assert.Contains(t, d.Message, "the hub changed the files under a commit")
	assert.Equal(t, artifacts.DefaultRetryInterval, res.RequeueAfter)

	// A commit gone from the hub (a force-push, a deleted repository) degrades with RevisionNotFound.
	e.hub.Fail("Qwen/Qwen3-8B", http.StatusNotFound)
	e.clock.SetTime(t0.Add(50 * time.Hour))
	a, _, err = e.reconcile(t, "qwen")
	require.NoError(t, err)
	assert.Equal(t, workerv1.ReasonRevisionNotFound, cond(a, workerv1.ArtifactDegraded).Reason)
	assert.Equal(t, commitA, a.Status.Resolved.Revision, "the resolution stands")
}

// A claim deleted after its artifact resolved degrades it; created again, it heals.
func TestClaimGoneDegrades(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "weights", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	e := newEnv(t, art("claim", workerv1.ModelArtifactSource{PersistentVolumeClaim: &workerv1.ClaimSource{ClaimName: "weights"}}), pvc)
	_, _, err := e.reconcile(t, "claim")
	require.NoError(t, err)
	require.NoError(t, e.c.Delete(context.Background(), pvc.DeepCopy()))
	a, _, err := e.reconcile(t, "claim")
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionTrue, cond(a, workerv1.ArtifactResolved).Status)
	assert.Equal(t, workerv1.ReasonClaimNotFound, cond(a, workerv1.ArtifactDegraded).Reason)
	pvc.ResourceVersion = ""
	require.NoError(t, e.c.Create(context.Background(), pvc))
	a, _, err = e.reconcile(t, "claim")
	require.NoError(t, err)
	assert.Equal(t, metav1.ConditionFalse, cond(a, workerv1.ArtifactDegraded).Status)
}

func deployment(name, artifact string) *workerv1.ModelDeployment {
	return &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: workerv1.ModelDeploymentSpec{Model: workerv1.ModelDeploymentModel{Name: "Qwen/Qwen3-8B", ArtifactRef: &workerv1.LocalReference{Name: artifact}}}}
}

// The finalizer is held while a deployment in the namespace names the artifact, and released when
// none does; an artifact being deleted waits for the last deployment naming it.
func TestProtectionFinalizer(t *testing.T) {
	img := workerv1.ModelArtifactSource{Image: &workerv1.ImageSource{Reference: "r/m@sha256:" + strings.Repeat("a", 64)}}
	other := deployment("other", "another-artifact")
	other.Namespace = ns
	e := newEnv(t, art("qwen", img), deployment("qwen", "qwen"), other)
	a, _, err := e.reconcile(t, "qwen")
	require.NoError(t, err)
	assert.Contains(t, a.Finalizers, workerv1.FinalizerModelArtifactProtection)

	require.NoError(t, e.c.Delete(context.Background(), deployment("qwen", "qwen")))
	a, _, err = e.reconcile(t, "qwen")
	require.NoError(t, err)
	assert.NotContains(t, a.Finalizers, workerv1.FinalizerModelArtifactProtection, "named by no deployment: released")

	named := art("named", img)
	named.Finalizers = []string{workerv1.FinalizerModelArtifactProtection}
	now := metav1.NewTime(t0)
	named.DeletionTimestamp = &now
	e = newEnv(t, named, deployment("qwen", "named"))
	a, _, err = e.reconcile(t, "named")
	require.NoError(t, err)
	require.NotNil(t, a, "kept while a deployment names it")
	assert.Contains(t, strings.Join(fakecluster.Events(e.events), "\n"), "still named by qwen")
	require.NoError(t, e.c.Delete(context.Background(), deployment("qwen", "named")))
	a, _, err = e.reconcile(t, "named")
	require.NoError(t, err)
	assert.Nil(t, a, "released, and gone")
}
