package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/settings"
	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// group is a DRAM group of 64Gi members on the nodes labelled kv=<pool>.
func group(pool string, edits ...func(*workerv1.KVCacheBackendMember)) workerv1.KVCacheBackendMember {
	g := workerv1.KVCacheBackendMember{NodeSelector: map[string]string{"kv": pool}, Medium: "DRAM", CapacityPerMember: resource.MustParse("64Gi"), FabricInterfaceCount: 1}
	for _, e := range edits {
		e(&g)
	}
	return g
}

func managedBackend(groups ...workerv1.KVCacheBackendMember) *workerv1.KVCacheBackend {
	return &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: "mooncake"}, Spec: workerv1.KVCacheBackendSpec{
		Connection: workerv1.KVCacheBackendConnection{Managed: &workerv1.KVCacheBackendManaged{Members: groups}}}}
}

func withSpec(b *workerv1.KVCacheBackend, edit func(*workerv1.KVCacheBackendSpec)) *workerv1.KVCacheBackend {
	edit(&b.Spec)
	return b
}

func TestBackendRefusals(t *testing.T) {
	disk := func(g *workerv1.KVCacheBackendMember) {
		g.LocalDisks = []workerv1.KVCacheBackendMemberLocalDisk{{Path: "/mnt/nvme"}}
	}
	capacity := func(q string) func(*workerv1.KVCacheBackendMember) {
		return func(g *workerv1.KVCacheBackendMember) { g.CapacityPerMember = resource.MustParse(q) }
	}
	mounts := func(paths ...string) func(*workerv1.KVCacheBackendMember) {
		return func(g *workerv1.KVCacheBackendMember) {
			for _, p := range paths {
				g.HostPaths = append(g.HostPaths, workerv1.KVCacheBackendMemberHostPath{Path: p, MountPath: p})
			}
		}
	}
	cases := []struct {
		rule          string
		refused, old  *workerv1.KVCacheBackend
		path          string
		parts         []string
		admitted      *workerv1.KVCacheBackend // the near-miss
		admittedAfter *workerv1.KVCacheBackend // its stored object, when an update; defaults to old
	}{
		{rule: "an image must parse as an image reference",
			refused: withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) { s.Image = "Mooncake:0.3" }),
			path:    "spec.image", parts: []string{"not an image reference", "registry/repository:tag"},
			admitted: withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) { s.Image = "gpustack/mirrored-mooncake:0.3.13.post1-cann9.1" })},
		{rule: "a group's image must parse as an image reference",
			refused:  managedBackend(group("a", func(g *workerv1.KVCacheBackendMember) { g.Image = "bad image" })),
			path:     "spec.connection.managed.members[0].image",
			admitted: managedBackend(group("a", func(g *workerv1.KVCacheBackendMember) { g.Image = "registry.local:5000/mooncake@sha256:" + sha }))},
		{rule: "an image pull secret needs a name",
			refused: withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) {
				s.ImagePullSecrets = []corev1.LocalObjectReference{{}}
			}),
			path: "spec.imagePullSecrets[0].name", parts: []string{"Required value"},
			admitted: withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) {
				s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-creds"}}
			})},
		{rule: "an image pull secret's name is a DNS-1123 subdomain",
			refused: withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) {
				s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "Registry_Creds"}}
			}),
			path: "spec.imagePullSecrets[0].name", parts: []string{"a Secret name", "lowercase RFC 1123 subdomain"},
			admitted: withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) {
				s.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry.creds"}}
			})},
		{rule: "a group's capacity per member is positive",
			refused: managedBackend(group("a", capacity("0"))), path: "spec.connection.managed.members[0].capacityPerMember",
			parts: []string{`"0"`, "positive size"}, admitted: managedBackend(group("a", capacity("1Mi")))},
		{rule: "a group with a disk tier needs at least the store's 16Mi bucket per member",
			refused: managedBackend(group("a", disk, capacity("8Mi"))), path: "spec.connection.managed.members[0].capacityPerMember",
			parts: []string{"disk tier", "16Mi", "raise capacityPerMember or drop the disk tier"}, admitted: managedBackend(group("a", disk, capacity("16Mi")))},
		{rule: "a group's host paths mount at distinct paths",
			refused: managedBackend(group("a", mounts("/usr/local/Ascend/driver", "/usr/local/dcmi", "/usr/local/Ascend/driver"))),
			path:    "spec.connection.managed.members[0].hostPaths[2].mountPath", parts: []string{"Duplicate value", "also spec.connection.managed.members[0].hostPaths[0].mountPath"},
			admitted: managedBackend(group("a", mounts("/usr/local/Ascend/driver", "/usr/local/dcmi")))},
		{rule: "a host path does not mount over the group's own disk tier",
			refused: managedBackend(group("a", disk, mounts("/mnt/nvme"))), path: "spec.connection.managed.members[0].hostPaths[0].mountPath",
			parts: []string{"disk tier"}, admitted: managedBackend(group("a", disk, mounts("/mnt/other")))},
		{rule: "a group's medium is frozen",
			refused: managedBackend(group("a", func(g *workerv1.KVCacheBackendMember) { g.Medium = "VRAM" })), old: managedBackend(group("a")),
			path: "spec.connection.managed.members[0].medium", parts: []string{"frozen (stored DRAM)", "add a group with the new medium"},
			admitted: managedBackend(group("a", capacity("128Gi")))},
		{rule: "groups are not reordered: a group's index is its identity",
			refused: managedBackend(group("b"), group("a")), old: managedBackend(group("a"), group("b")),
			path: "spec.connection.managed.members[0]", parts: []string{"Forbidden", "was stored at index 1", "mooncake-member-1", "put it back at index 1"},
			admitted: managedBackend(group("a"), group("b"), group("c"))},
		{rule: "removing a group from the front moves the others, which is refused",
			refused: managedBackend(group("b")), old: managedBackend(group("a"), group("b")),
			path: "spec.connection.managed.members[0]", parts: []string{"was stored at index 1"},
			admitted: managedBackend(group("a"))},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			errs, _ := validation.ValidateBackend(tc.refused, tc.old, defaultBackendImage)
			refusaltest.Checked(t, errs)
			if assert.NotEmpty(t, errs) { // a swap moves two groups: the first is named first
				assert.Equal(t, tc.path, errs[0].Field)
				for _, part := range tc.parts {
					assert.Contains(t, errs[0].Error(), part)
				}
			}
			old := tc.admittedAfter
			if old == nil {
				old = tc.old
			}
			errs, _ = validation.ValidateBackend(tc.admitted, old, defaultBackendImage)
			assert.Empty(t, errs, "the near-miss is admitted")
		})
	}
}

func TestABackendUpdateLeavingTheSpecIsAdmitted(t *testing.T) {
	stored := managedBackend(group("a", func(g *workerv1.KVCacheBackendMember) { g.CapacityPerMember = resource.MustParse("0") }))
	finalized := stored.DeepCopy()
	finalized.Finalizers = []string{"kvcache.gpustack.ai/backend"}
	errs, _ := validation.ValidateBackend(finalized, stored, defaultBackendImage)
	assert.Empty(t, errs, "a metadata-only update of a backend admitted before a rule existed")
	edited := finalized.DeepCopy()
	edited.Spec.Image = "gpustack/mirrored-mooncake:0.3.13"
	errs, _ = validation.ValidateBackend(edited, stored, defaultBackendImage)
	assert.NotEmpty(t, errs, "a spec edit is judged whole")
}

// defaultBackendImage is Setting kv-cache-backend-image's default.
var defaultBackendImage = settings.Defaults().KVCacheBackendImage

func TestAManagedBackendNeedsAnImage(t *testing.T) {
	bare := managedBackend(group("a"))
	errs, _ := validation.ValidateBackend(bare, nil, "")
	if assert.Len(t, errs, 1) {
		assert.Equal(t, "spec.image", errs[0].Field)
		assert.Contains(t, errs[0].Error(), "the Setting kv-cache-backend-image is blank; name the image here, or set the Setting")
	}
	errs, _ = validation.ValidateBackend(bare, nil, defaultBackendImage)
	assert.Empty(t, errs, "near miss: the Setting names the fallback")
	named := withSpec(managedBackend(group("a")), func(s *workerv1.KVCacheBackendSpec) { s.Image = "gpustack/mirrored-mooncake:0.3.13.post1-cpu" })
	errs, _ = validation.ValidateBackend(named, nil, "")
	assert.Empty(t, errs, "near miss: the backend names its image")
	external := &workerv1.KVCacheBackend{Spec: workerv1.KVCacheBackendSpec{Connection: workerv1.KVCacheBackendConnection{External: &workerv1.KVCacheBackendExternal{}}}}
	errs, _ = validation.ValidateBackend(external, nil, "")
	assert.Empty(t, errs, "near miss: an external store runs no image of ours")
}

const sha = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestBackendWarnings(t *testing.T) {
	protocol := func(p string) func(*workerv1.KVCacheBackendMember) {
		return func(g *workerv1.KVCacheBackendMember) {
			g.Transport = &workerv1.KVCacheBackendMemberTransport{Protocol: p}
		}
	}
	interfaces := func(g *workerv1.KVCacheBackendMember) { g.FabricInterfaceCount = 4 }
	cases := []struct {
		rule    string
		backend *workerv1.KVCacheBackend
		want    []string
	}{
		{rule: "a fabric interface count on a TCP group requests nothing, and says so",
			backend: managedBackend(group("a", protocol(workerv1.TransportTCP), interfaces)),
			want:    []string{"spec.connection.managed.members[0].fabricInterfaceCount is 4 but the group's protocol is TCP: only RDMA and EFA members request fabric interfaces, so the count requests nothing"}},
		{rule: "a group inheriting Auto is warned as Auto",
			backend: managedBackend(group("a", interfaces)),
			want:    []string{"spec.connection.managed.members[0].fabricInterfaceCount is 4 but the group's protocol is Auto: only RDMA and EFA members request fabric interfaces, so the count requests nothing"}},
		{rule: "an RDMA group's interfaces are its own",
			backend: managedBackend(group("a", protocol(workerv1.TransportRDMA), interfaces))},
		{rule: "a group inheriting the backend's EFA is not warned",
			backend: withSpec(managedBackend(group("a", interfaces)), func(s *workerv1.KVCacheBackendSpec) { s.Transport.Protocol = workerv1.TransportEFA })},
		{rule: "the default count of one is never warned",
			backend: managedBackend(group("a", protocol(workerv1.TransportTCP)))},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			errs, warnings := validation.ValidateBackend(tc.backend, nil, defaultBackendImage)
			refusaltest.Checked(t, errs)
			assert.Empty(t, errs)
			assert.Equal(t, tc.want, warnings)
		})
	}
}
