package validation

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// diskTierFloor is the smallest segment a group with a disk tier may declare: the store's bucket.
var diskTierFloor = resource.MustParse("16Mi")

// ValidateBackend judges a KVCacheBackend on the rules its schema cannot say (each would exceed the
// API server's CEL cost budget over 32 groups, or needs the stored object): old is nil on create;
// fallbackImage is Setting kv-cache-backend-image, the image of a managed store whose spec names
// none. It returns the refusals and the warnings to show beside an admitted object. An update that
// leaves the spec as stored (a finalizer, a label) is admitted whatever the stored spec holds: the
// store's own reconciler must never be locked out of an object admitted before a rule existed.
func ValidateBackend(b, old *workerv1.KVCacheBackend, fallbackImage string) (field.ErrorList, []string) {
	if old != nil && equality.Semantic.DeepEqual(b.Spec, old.Spec) {
		return nil, nil
	}
	spec := field.NewPath("spec")
	errs := validateImage(b.Spec.Image, spec.Child("image"))
	if b.Spec.Connection.Managed != nil && b.Spec.Image == "" && fallbackImage == "" {
		errs = append(errs, field.Required(spec.Child("image"), fmt.Sprintf(
			"a managed store needs an image: spec.image is empty and the Setting %s is blank; name the image here, or set the Setting", settings.KVCacheBackendImage)))
	}
	for i, s := range b.Spec.ImagePullSecrets {
		p := spec.Child("imagePullSecrets").Index(i).Child("name")
		if s.Name == "" {
			errs = append(errs, field.Required(p, "an image pull secret needs the name of a Secret in the store's namespace"))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(s.Name) {
			errs = append(errs, field.Invalid(p, s.Name, "a Secret name: "+msg))
		}
	}
	var warnings []string
	if m := b.Spec.Connection.Managed; m != nil {
		groups := spec.Child("connection", "managed", "members")
		for i, g := range m.Members {
			errs = append(errs, validateGroup(g, groups.Index(i))...)
			if w := fabricWarning(b, g, groups.Index(i)); w != "" {
				warnings = append(warnings, w)
			}
		}
		if old != nil && old.Spec.Connection.Managed != nil {
			errs = append(errs, validateGroupsMove(b.Name, m.Members, old.Spec.Connection.Managed.Members, groups)...)
		}
	}
	return errs, warnings
}

// validateImage: an image, when named, parses as an image reference.
func validateImage(image string, p *field.Path) field.ErrorList {
	if image == "" {
		return nil
	}
	if _, err := name.ParseReference(image); err != nil {
		return field.ErrorList{field.Invalid(p, image, fmt.Sprintf("not an image reference (%v); write registry/repository:tag or @sha256:digest", err))}
	}
	return nil
}

// validateGroup: a group's segments are positive (and a disk tier's at least its bucket), its host
// mounts land on distinct paths, none on its own disk tier, and its image parses.
func validateGroup(g workerv1.KVCacheBackendMember, p *field.Path) field.ErrorList {
	errs := validateImage(g.Image, p.Child("image"))
	capacity := p.Child("capacityPerMember")
	switch {
	case g.CapacityPerMember.Sign() <= 0:
		errs = append(errs, field.Invalid(capacity, g.CapacityPerMember.String(), "each member's segment must be a positive size; a member with no segment stores nothing"))
	case len(g.LocalDisks) > 0 && g.CapacityPerMember.Cmp(diskTierFloor) < 0:
		errs = append(errs, field.Invalid(capacity, g.CapacityPerMember.String(), fmt.Sprintf(
			"a group with a disk tier (%s) needs at least %s per member, the store's bucket; raise capacityPerMember or drop the disk tier", p.Child("localDisks"), diskTierFloor.String())))
	}
	disks := map[string]bool{}
	for _, d := range g.LocalDisks {
		disks[d.Path] = true
	}
	seen := map[string]int{}
	for i, h := range g.HostPaths {
		mp := p.Child("hostPaths").Index(i).Child("mountPath")
		if first, dup := seen[h.MountPath]; dup {
			errs = append(errs, field.Duplicate(mp, fmt.Sprintf("%s (also %s): a container mounts one volume per path; mount the second elsewhere", h.MountPath, p.Child("hostPaths").Index(first).Child("mountPath"))))
			continue
		}
		seen[h.MountPath] = i
		if disks[h.MountPath] {
			errs = append(errs, field.Invalid(mp, h.MountPath, fmt.Sprintf("the group's own disk tier is mounted there (%s); mount the host path elsewhere", p.Child("localDisks"))))
		}
	}
	return errs
}

// fabricWarning is the warning for a fabric interface count on a group whose protocol uses none:
// it is admitted (the default is 1 everywhere) but requests nothing.
func fabricWarning(b *workerv1.KVCacheBackend, g workerv1.KVCacheBackendMember, p *field.Path) string {
	protocol := b.Spec.Transport.Protocol
	if g.Transport != nil && g.Transport.Protocol != "" && g.Transport.Protocol != workerv1.TransportAuto {
		protocol = g.Transport.Protocol
	}
	if g.FabricInterfaceCount <= 1 || protocol == workerv1.TransportRDMA || protocol == workerv1.TransportEFA {
		return ""
	}
	if protocol == "" {
		protocol = workerv1.TransportAuto
	}
	return fmt.Sprintf("%s is %d but the group's protocol is %s: only RDMA and EFA members request fabric interfaces, so the count requests nothing",
		p.Child("fabricInterfaceCount"), g.FabricInterfaceCount, protocol)
}

// validateGroupsMove: a group's position is its identity (its DaemonSet, selector labels and
// port), so groups may be appended, removed from the end or edited in place, and a group's medium
// is frozen; a group that moves to another index is refused. A group is recognised by its node
// selector: the new list carrying at index i the selector the stored list had at another index j
// (where i's own stored selector is gone from i) is a move.
func validateGroupsMove(backend string, groups, old []workerv1.KVCacheBackendMember, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	key := func(g workerv1.KVCacheBackendMember) string {
		var b strings.Builder
		for _, k := range slices.Sorted(maps.Keys(g.NodeSelector)) {
			fmt.Fprintf(&b, "%s=%s,", k, g.NodeSelector[k])
		}
		return b.String()
	}
	storedAt := map[string]int{}
	for j, g := range old {
		storedAt[key(g)] = j
	}
	for i, g := range groups {
		if i < len(old) && g.Medium != old[i].Medium {
			errs = append(errs, field.Invalid(p.Index(i).Child("medium"), g.Medium, fmt.Sprintf(
				"the medium of a group is frozen (stored %s): its members' segments live there; add a group with the new medium and remove this one", old[i].Medium)))
		}
		j, known := storedAt[key(g)]
		if !known || j == i || (i < len(old) && key(old[i]) == key(g)) {
			continue
		}
		errs = append(errs, field.Forbidden(p.Index(i), fmt.Sprintf(
			"the group with nodeSelector %v was stored at index %d: a group's index is its identity (its DaemonSet %s-member-%d and its port), so groups may be appended, removed from the end or edited in place, not reordered; put it back at index %d",
			g.NodeSelector, j, backend, j, j)))
	}
	return errs
}
