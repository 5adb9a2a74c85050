package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

// asTenant runs kubectl as alice, who holds only the built-in edit ClusterRole in namespace.
func asTenant(t *testing.T, namespace string) func(args ...string) (string, error) {
	t.Helper()
	kubectlApply(t, fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: alice-edit, namespace: %s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
`, namespace))
	return func(args ...string) (string, error) {
		return stack.Kubectl(append([]string{"--as=alice", "-n", namespace}, args...)...)
	}
}

// TestTenantBoundaries: a user with only the edit ClusterRole in one namespace cannot rewrite the
// Mooncake client configuration of a running replica (the annotation the engine reads as its
// config file: refused by mdplane's ValidatingAdmissionPolicy, for everyone), and cannot create,
// edit or delete mdplane's internal objects — ModelRoles, ModelReplicas, RoleRevisions
// (ControllerRevisions) — which only mdplane and Crossplane write.
func TestTenantBoundaries(t *testing.T) {
	ctx := context.Background()
	const ns = "team-t"
	applyCluster(t, ctx, ns)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	queue(t, ctx, "tenant-a10g", "gpustack-fnv64-7bc37bef52624161", ns, 8)
	kubectlApply(t, strings.NewReplacer("namespace: team-a", "namespace: "+ns, "replicas: 4", "replicas: 1").
		Replace(readExample(t, "qwen-chat.yaml")))
	eventually(t, 3*time.Minute, "the cached deployment's Pod running", func() error { return running(ctx, ns, "qwen-chat", 1) })
	ps, err := pods(ctx, ns, "qwen-chat")
	if err != nil {
		t.Fatal(err)
	}
	pod := ps[0]
	config := pod.Annotations[kvcache.AnnotationClientConfig]
	if config == "" {
		t.Fatalf("Pod %s carries no client configuration", pod.Name)
	}
	alice := asTenant(t, ns)

	t.Run("the client configuration of a running Pod cannot be rewritten", func(t *testing.T) {
		for _, args := range [][]string{
			{"annotate", "pod", pod.Name, "--overwrite", kvcache.AnnotationClientConfig + `={"master_server_address":"evil:50051"}`},
			{"annotate", "pod", pod.Name, kvcache.AnnotationClientConfig + "-"},
		} {
			out, err := alice(args...)
			if err == nil || !strings.Contains(out, "annotation kvcache.gpustack.ai/client-config of a ModelDeployment Pod is mdplane's") {
				t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		out, err := stack.Kubectl("annotate", "pod", pod.Name, "-n", ns, "--overwrite", kvcache.AnnotationClientConfig+"={}")
		if err == nil || !strings.Contains(out, "is mdplane's") {
			t.Fatalf("a cluster admin rewrote it: %v\n%s", err, out)
		}
		if out, err := alice("annotate", "pod", pod.Name, "team/owner=alice"); err != nil {
			t.Fatalf("another annotation is the tenant's to set: %v\n%s", err, out)
		}
	})

	t.Run("mdplane's internal objects are not the tenant's to write", func(t *testing.T) {
		for _, resource := range []string{"modelroles.internal.mdplane.io", "modelreplicas.internal.mdplane.io", "controllerrevisions.apps"} {
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				out, _ := alice("auth", "can-i", verb, resource)
				if strings.TrimSpace(out) != "no" {
					t.Errorf("alice can %s %s: %s", verb, resource, out)
				}
			}
		}
	})
}
