package validation

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// hubRepository is a hub repository id: a name, or an owner and a name, of letters, digits, '.',
// '_' and '-'. It goes into the hub's URL path, so nothing else is let through.
var hubRepository = regexp.MustCompile(`^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)?$`)

// ValidateArtifact judges a ModelArtifact on the rules its schema cannot say; old is nil on create.
// The schema already holds the source union to exactly one member and freezes the spec (CEL), so an
// update that leaves the spec as stored is admitted whatever it holds: the resolver must never be
// locked out of its finalizer on an artifact admitted before a rule existed.
func ValidateArtifact(a, old *workerv1.ModelArtifact) field.ErrorList {
	if old != nil && equality.Semantic.DeepEqual(a.Spec, old.Spec) {
		return nil
	}
	spec := field.NewPath("spec")
	source := spec.Child("source")
	var errs field.ErrorList
	hub := false
	switch s := a.Spec.Source; {
	case s.HuggingFace != nil:
		hub = true
		errs = append(errs, validateHubSource(s.HuggingFace, source.Child("huggingFace"))...)
	case s.ModelScope != nil:
		hub = true
		errs = append(errs, validateHubSource(s.ModelScope, source.Child("modelScope"))...)
	case s.PersistentVolumeClaim != nil:
		errs = append(errs, validateClaimSource(s.PersistentVolumeClaim, source.Child("persistentVolumeClaim"))...)
	case s.Image != nil:
		errs = append(errs, validateImageSource(s.Image, source.Child("image"))...)
	}
	if !hub {
		kind := "this source"
		switch {
		case a.Spec.Source.PersistentVolumeClaim != nil:
			kind = "a persistentVolumeClaim source"
		case a.Spec.Source.Image != nil:
			kind = "an image source"
		}
		for _, f := range []struct {
			name string
			set  bool
			val  any
		}{
			{"allowPatterns", len(a.Spec.AllowPatterns) > 0, a.Spec.AllowPatterns},
			{"ignorePatterns", len(a.Spec.IgnorePatterns) > 0, a.Spec.IgnorePatterns},
			{"expectedDigest", a.Spec.ExpectedDigest != "", a.Spec.ExpectedDigest},
		} {
			if f.set {
				errs = append(errs, field.Invalid(spec.Child(f.name), f.val, fmt.Sprintf(
					"only a hub source (huggingFace or modelScope) is filtered and anchored, and %s delivers its files as they are; drop %s, or name a hub source", kind, f.name)))
			}
		}
	}
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"allowPatterns", a.Spec.AllowPatterns}, {"ignorePatterns", a.Spec.IgnorePatterns}} {
		for i, p := range list.patterns {
			if strings.ContainsFunc(p, unicode.IsControl) {
				errs = append(errs, field.Invalid(spec.Child(list.name).Index(i), p,
					"a pattern holds a control character (a newline, a tab, ...), which no hub file name holds; write the pattern without it"))
			}
		}
	}
	return errs
}

// validateHubSource: the repository is an id the hub's URL can carry, the revision holds no control
// character, and the Secret's name is one a Secret can have.
func validateHubSource(h *workerv1.HubSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if h.Repository != "" && (!hubRepository.MatchString(h.Repository) || hasDotElement(h.Repository)) {
		errs = append(errs, field.Invalid(p.Child("repository"), h.Repository,
			"a hub repository is <owner>/<name> (or a bare <name>) of letters, digits, '.', '_' and '-', with no '.' or '..' element; write it as the hub shows it, such as Qwen/Qwen3-8B"))
	}
	if strings.ContainsFunc(h.Revision, unicode.IsControl) {
		errs = append(errs, field.Invalid(p.Child("revision"), h.Revision,
			"a revision holds a control character, which no branch, tag or commit holds; write the branch, tag or 40-character commit without it"))
	}
	if h.SecretRef != nil {
		for _, msg := range validation.IsDNS1123Subdomain(h.SecretRef.Name) {
			errs = append(errs, field.Invalid(p.Child("secretRef", "name"), h.SecretRef.Name, "a Secret name: "+msg))
		}
	}
	return errs
}

// validateClaimSource: the claim's name is one a claim can have, and the path stays inside the
// volume.
func validateClaimSource(c *workerv1.ClaimSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(c.ClaimName) {
		errs = append(errs, field.Invalid(p.Child("claimName"), c.ClaimName, "a PersistentVolumeClaim name: "+msg))
	}
	for _, element := range strings.Split(c.Path, "/") {
		if element == ".." {
			errs = append(errs, field.Invalid(p.Child("path"), c.Path,
				"a '..' element would climb out of the volume, which the kubelet refuses as a subPath; write the path from the volume's root, such as models/qwen3-8b"))
			break
		}
	}
	return errs
}

// validateImageSource: the reference is exactly <registry/repository>@sha256:<64 lowercase hex>,
// with no tag: an image volume must name the same bytes on every node.
func validateImageSource(i *workerv1.ImageSource, p *field.Path) field.ErrorList {
	repo, digest, found := strings.Cut(i.Reference, "@")
	bad := func(why string) field.ErrorList {
		return field.ErrorList{field.Invalid(p.Child("reference"), i.Reference, why+
			"; write <registry>/<repository>@sha256:<64 lowercase hex digits>, such as registry.example.com/models/qwen3-8b@sha256:"+strings.Repeat("0", 64))}
	}
	if !found || !sha256Digest.MatchString(digest) {
		return bad("an image source is pinned by a sha256 digest of 64 lowercase hex digits")
	}
	if strings.Contains(repo[strings.LastIndex(repo, "/")+1:], ":") {
		return bad("a tag beside the digest is ambiguous (the kubelet pulls the digest, a reader sees the tag)")
	}
	if _, err := name.NewRepository(repo); err != nil {
		return bad(fmt.Sprintf("the repository does not parse (%v)", err))
	}
	return nil
}

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// hasDotElement reports whether a slash-separated name has a '.' or '..' element.
func hasDotElement(s string) bool {
	for _, e := range strings.Split(s, "/") {
		if e == "." || e == ".." {
			return true
		}
	}
	return false
}

// ArtifactRevisionDefault is the revision the mutating webhook writes into a hub source that names
// none (main on Hugging Face, master on ModelScope), with the JSON pointer it goes to; "" when
// nothing is defaulted. On an update, nothing is defaulted when the stored hub source names no
// revision either (an artifact stored before the webhook existed): its frozen spec would otherwise
// be refused.
func ArtifactRevisionDefault(a, old *workerv1.ModelArtifact) (pointer, revision string) {
	hub := a.Spec.Source.Hub()
	if hub == nil || hub.Revision != "" {
		return "", ""
	}
	if old != nil {
		if stored := old.Spec.Source.Hub(); stored != nil && stored.Revision == "" {
			return "", ""
		}
	}
	member := "huggingFace"
	if a.Spec.Source.HuggingFace == nil {
		member = "modelScope"
	}
	return "/spec/source/" + member + "/revision", a.Spec.Source.DefaultRevision()
}
