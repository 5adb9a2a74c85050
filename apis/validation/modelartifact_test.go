package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func artifact(source workerv1.ModelArtifactSource, edits ...func(*workerv1.ModelArtifactSpec)) *workerv1.ModelArtifact {
	a := &workerv1.ModelArtifact{ObjectMeta: metav1.ObjectMeta{Name: "qwen3-8b", Namespace: "team-a"}, Spec: workerv1.ModelArtifactSpec{Source: source}}
	for _, e := range edits {
		e(&a.Spec)
	}
	return a
}

func hf(repo string) workerv1.ModelArtifactSource {
	return workerv1.ModelArtifactSource{HuggingFace: &workerv1.HubSource{Repository: repo}}
}

func claim(name, path string) workerv1.ModelArtifactSource {
	return workerv1.ModelArtifactSource{PersistentVolumeClaim: &workerv1.ClaimSource{ClaimName: name, Path: path}}
}

func image(ref string) workerv1.ModelArtifactSource {
	return workerv1.ModelArtifactSource{Image: &workerv1.ImageSource{Reference: ref}}
}

func allow(p ...string) func(*workerv1.ModelArtifactSpec) {
	return func(s *workerv1.ModelArtifactSpec) { s.AllowPatterns = p }
}

func TestArtifactRefusals(t *testing.T) {
	digest := "sha256:" + sha
	cases := []struct {
		rule     string
		refused  *workerv1.ModelArtifact
		path     string
		parts    []string
		admitted *workerv1.ModelArtifact // the near miss
	}{
		{rule: "a claim path has no '..' element",
			refused: artifact(claim("weights", "models/../etc")), path: "spec.source.persistentVolumeClaim.path",
			parts:    []string{`"models/../etc"`, "climb out of the volume", "write the path from the volume's root"},
			admitted: artifact(claim("weights", "models/..qwen/x..y"))},
		{rule: "a claim name is a DNS-1123 subdomain",
			refused: artifact(claim("Weights_1", "")), path: "spec.source.persistentVolumeClaim.claimName",
			parts: []string{`"Weights_1"`, "a PersistentVolumeClaim name"}, admitted: artifact(claim("weights-1", ""))},
		{rule: "allowPatterns only on a hub source (claim)",
			refused: artifact(claim("weights", ""), allow("*.safetensors")), path: "spec.allowPatterns",
			parts:    []string{"*.safetensors", "a persistentVolumeClaim source", "drop allowPatterns"},
			admitted: artifact(hf("Qwen/Qwen3-8B"), allow("*.safetensors"))},
		{rule: "ignorePatterns only on a hub source (image)",
			refused: artifact(image("registry.local/m/qwen@"+digest), func(s *workerv1.ModelArtifactSpec) { s.IgnorePatterns = []string{"*.bin"} }),
			path:    "spec.ignorePatterns", parts: []string{"*.bin", "an image source", "drop ignorePatterns"},
			admitted: artifact(workerv1.ModelArtifactSource{ModelScope: &workerv1.HubSource{Repository: "Qwen/Qwen3-8B"}}, func(s *workerv1.ModelArtifactSpec) { s.IgnorePatterns = []string{"*.bin"} })},
		{rule: "expectedDigest only on a hub source",
			refused: artifact(claim("weights", ""), func(s *workerv1.ModelArtifactSpec) { s.ExpectedDigest = digest }),
			path:    "spec.expectedDigest", parts: []string{digest, "drop expectedDigest"},
			admitted: artifact(hf("Qwen/Qwen3-8B"), func(s *workerv1.ModelArtifactSpec) { s.ExpectedDigest = digest })},
		{rule: "a pattern holds no control character",
			refused: artifact(hf("Qwen/Qwen3-8B"), allow("*.json", "model\n*.safetensors")), path: "spec.allowPatterns[1]",
			parts:    []string{`"model\n*.safetensors"`, "control character", "write the pattern without it"},
			admitted: artifact(hf("Qwen/Qwen3-8B"), allow("*.json", "model *.safetensors"))},
		{rule: "an image reference is pinned by a sha256 digest",
			refused: artifact(image("registry.local/m/qwen:v1")), path: "spec.source.image.reference",
			parts:    []string{"registry.local/m/qwen:v1", "pinned by a sha256 digest", "@sha256:<64 lowercase hex digits>"},
			admitted: artifact(image("registry.local/m/qwen@" + digest))},
		{rule: "an image digest is lowercase hex",
			refused: artifact(image("registry.local/m/qwen@sha256:" + "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789")), path: "spec.source.image.reference",
			admitted: artifact(image("registry.local/m/qwen@sha256:" + "abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789"))},
		{rule: "an image reference carries no tag beside its digest",
			refused: artifact(image("registry.local:5000/m/qwen:v1@" + digest)), path: "spec.source.image.reference",
			parts:    []string{"a tag beside the digest"},
			admitted: artifact(image("registry.local:5000/m/qwen@" + digest))},
		{rule: "an image repository parses",
			refused: artifact(image("registry.local/M/Qwen@" + digest)), path: "spec.source.image.reference",
			parts: []string{"does not parse"}, admitted: artifact(image("registry.local/m/qwen@" + digest))},
		{rule: "a hub repository is an id the hub's URL carries",
			refused: artifact(hf("Qwen/../secret")), path: "spec.source.huggingFace.repository",
			parts: []string{"Qwen/../secret", "<owner>/<name>"}, admitted: artifact(hf("Qwen/Qwen2.5-7B-Instruct"))},
		{rule: "a hub repository has at most one slash",
			refused: artifact(hf("a/b/c")), path: "spec.source.huggingFace.repository", admitted: artifact(hf("gpt2"))},
		{rule: "a revision holds no control character",
			refused: artifact(workerv1.ModelArtifactSource{HuggingFace: &workerv1.HubSource{Repository: "Qwen/Qwen3-8B", Revision: "main\t"}}),
			path:    "spec.source.huggingFace.revision", parts: []string{"control character"},
			admitted: artifact(workerv1.ModelArtifactSource{HuggingFace: &workerv1.HubSource{Repository: "Qwen/Qwen3-8B", Revision: "refs/pr/1"}})},
		{rule: "a hub Secret name is a DNS-1123 subdomain",
			refused: artifact(workerv1.ModelArtifactSource{ModelScope: &workerv1.HubSource{Repository: "Qwen/Qwen3-8B", SecretRef: &workerv1.LocalReference{Name: "Hub_Token"}}}),
			path:    "spec.source.modelScope.secretRef.name", parts: []string{"a Secret name"},
			admitted: artifact(workerv1.ModelArtifactSource{ModelScope: &workerv1.HubSource{Repository: "Qwen/Qwen3-8B", SecretRef: &workerv1.LocalReference{Name: "hub-token"}}})},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			errs := refusaltest.Checked(t, validation.ValidateArtifact(tc.refused, nil))
			if assert.Len(t, errs, 1) {
				assert.Equal(t, tc.path, errs[0].Field)
				for _, part := range tc.parts {
					assert.Contains(t, errs[0].Error(), part)
				}
			}
			assert.Empty(t, validation.ValidateArtifact(tc.admitted, nil), "the near miss is admitted")
		})
	}
}

// The spec is frozen by the schema (CEL), so an update leaving it as stored is admitted whatever it
// holds: the resolver's finalizer write must pass on an artifact admitted before a rule existed.
func TestArtifactMetadataUpdateOfAnOldArtifact(t *testing.T) {
	stored := artifact(claim("weights", "a/../b"))
	finalized := stored.DeepCopy()
	finalized.Finalizers = []string{workerv1.FinalizerModelArtifactProtection}
	assert.Empty(t, validation.ValidateArtifact(finalized, stored))
	assert.NotEmpty(t, validation.ValidateArtifact(stored, nil), "near miss: the same spec created")
}

func TestArtifactRevisionDefault(t *testing.T) {
	ms := func(rev string) *workerv1.ModelArtifact {
		return artifact(workerv1.ModelArtifactSource{ModelScope: &workerv1.HubSource{Repository: "Qwen/Qwen3-8B", Revision: rev}})
	}
	pointer, rev := validation.ArtifactRevisionDefault(artifact(hf("Qwen/Qwen3-8B")), nil)
	assert.Equal(t, "/spec/source/huggingFace/revision", pointer)
	assert.Equal(t, "main", rev)
	pointer, rev = validation.ArtifactRevisionDefault(ms(""), nil)
	assert.Equal(t, "/spec/source/modelScope/revision", pointer)
	assert.Equal(t, "master", rev)
	pointer, _ = validation.ArtifactRevisionDefault(ms("v1.0"), nil)
	assert.Empty(t, pointer, "a revision given is kept")
	pointer, _ = validation.ArtifactRevisionDefault(artifact(claim("weights", "")), nil)
	assert.Empty(t, pointer, "a claim has no revision")
	pointer, rev = validation.ArtifactRevisionDefault(ms(""), ms("master"))
	require.Equal(t, "master", rev, "an update is defaulted like a create, so a re-apply without the field keeps the stored spec")
	assert.NotEmpty(t, pointer)
	pointer, _ = validation.ArtifactRevisionDefault(ms(""), ms(""))
	assert.Empty(t, pointer, "an artifact stored without a revision (before the webhook) is not defaulted on update: its spec is frozen")
}
