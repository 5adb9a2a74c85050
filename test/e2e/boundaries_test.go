package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	"github.com/mdplane/mdplane/test/cluster"
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

// clientAs is a client that authenticates as the ServiceAccount of a component the stack runs
// (cluster.CrossplaneUser, cluster.ControllersUser), with that component's rights: a test playing
// Crossplane writes what only it and mdplane may, and only what Crossplane may.
func clientAs(t *testing.T, user string) client.Client {
	t.Helper()
	cfg, err := stack.ConfigAs(context.Background(), user)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: stack.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestTenantBoundaries: a user with only the edit ClusterRole in one namespace cannot rewrite the
// Mooncake client configuration of a running replica (the annotation the engine reads as its
// config file: refused by mdplane's ValidatingAdmissionPolicy, for everyone), and cannot create,
// edit or delete mdplane's internal objects — ModelRoles, ModelReplicas, RoleRevisions
// (ControllerRevisions) — which only mdplane and Crossplane write.
func TestTenantBoundaries(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
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

	t.Run("a tenant chooses no owned key nor another Binding or domain", func(t *testing.T) {
		// Each deployment is refused by the webhook or the schema with the field it names; alice may
		// create the same deployment without the offending line.
		tenantDeployment := func(engine, kvCache, roleExtra string) string {
			return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: mine, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: %s
  kvCache: %s
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64%s}
`, ns, engine, kvCache, roleExtra)
		}
		const vllm, sglang = "{name: vLLM, image: vllm/vllm-openai:v0.25.1}", "{name: SGLang, image: lmsysorg/sglang:v0.5.21}"
		const ownBinding = "{poolRef: {name: team-a-dram}}" // applyCluster keeps the Binding's name
		cases := []struct {
			rule, manifest, field, words string
		}{
			{"another namespace's Binding", tenantDeployment(vllm, "{poolRef: {name: team-a-dram, namespace: team-a}}", ""),
				"spec.kvCache.poolRef.namespace", "unknown field"},
			{"a bare endpoint for a Binding", tenantDeployment(vllm, `{poolRef: {name: "mooncake-master.team-a:50051"}}`, ""),
				"spec.kvCache.poolRef.name", "not the name of a KVCachePoolBinding"},
			{"a domain of its own choosing", tenantDeployment(vllm, "{poolRef: {name: team-a-dram}, domain: team-b}", ""),
				"spec.kvCache.domain", "unknown field"},
			{"MOONCAKE_TENANT_ID on SGLang", tenantDeployment(sglang, ownBinding, ", env: [{name: MOONCAKE_TENANT_ID, value: team-a}]"),
				"spec.roles[0].env[0].name", "MOONCAKE_TENANT_ID is owned by mdplane on SGLang"},
			{"MOONCAKE_CONFIG_PATH on vLLM", tenantDeployment(vllm, ownBinding, ", env: [{name: MOONCAKE_CONFIG_PATH, value: /tmp/mine.json}]"),
				"spec.roles[0].env[0].name", "MOONCAKE_CONFIG_PATH is owned by mdplane on vLLM"},
			{"an owned flag with underscores", tenantDeployment(vllm, ownBinding, `, extraArgs: ["--kv_transfer_config={}"]`),
				"spec.roles[0].extraArgs[0]", "--kv-transfer-config is owned by mdplane on vLLM"},
			{"an owned flag as a prefix", tenantDeployment(vllm, ownBinding, `, extraArgs: ["--kv-transfer-conf", "{}"]`),
				"spec.roles[0].extraArgs[0]", "--kv-transfer-config is owned by mdplane on vLLM"},
			{"an owned flag's dotted member", tenantDeployment(vllm, ownBinding, `, extraArgs: ["--kv-transfer-config.kv_role=kv_both"]`),
				"spec.roles[0].extraArgs[0]", "--kv-transfer-config is owned by mdplane on vLLM"},
		}
		for _, tc := range cases {
			f := filepath.Join(t.TempDir(), "mine.yaml")
			if err := os.WriteFile(f, []byte(tc.manifest), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := alice("create", "--dry-run=server", "-f", f)
			if err == nil || !strings.Contains(out, tc.field) || !strings.Contains(out, tc.words) {
				t.Errorf("%s: want a refusal naming %s and saying %q: %v\n%s", tc.rule, tc.field, tc.words, err, out)
			}
		}
		f := filepath.Join(t.TempDir(), "mine.yaml")
		if err := os.WriteFile(f, []byte(tenantDeployment(vllm, ownBinding, "")), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := alice("create", "--dry-run=server", "-f", f); err != nil {
			t.Errorf("alice may create a deployment on her namespace's Binding: %v\n%s", err, out)
		}
	})

	t.Run("mdplane's internal objects are written only by Crossplane and mdplane", func(t *testing.T) {
		for _, resource := range []string{"modelroles.internal.mdplane.io", "modelreplicas.internal.mdplane.io", "controllerrevisions.apps"} {
			for _, verb := range []string{"create", "update", "patch", "delete"} {
				out, _ := alice("auth", "can-i", verb, resource)
				if strings.TrimSpace(out) != "no" {
					t.Errorf("alice can %s %s: %s", verb, resource, out)
				}
			}
		}
		// A cluster admin holds every RBAC right; mdplane's policy refuses the write all the same.
		roles := &v1alpha1.ModelRoleList{}
		replicas := &v1alpha1.ModelReplicaList{}
		revisions := &appsv1.ControllerRevisionList{}
		for _, list := range []client.ObjectList{roles, replicas, revisions} {
			if err := stack.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: "qwen-chat"}); err != nil {
				t.Fatal(err)
			}
		}
		if len(roles.Items) == 0 || len(replicas.Items) == 0 || len(revisions.Items) == 0 {
			t.Fatalf("%d ModelRoles, %d ModelReplicas, %d RoleRevisions", len(roles.Items), len(replicas.Items), len(revisions.Items))
		}
		role, replica, revision := roles.Items[0].Name, replicas.Items[0].Name, revisions.Items[0].Name
		copied := roles.Items[0].DeepCopy()
		copied.ObjectMeta = metav1.ObjectMeta{Name: "by-hand", Namespace: ns, Labels: copied.Labels}
		raw, err := json.Marshal(copied)
		if err != nil {
			t.Fatal(err)
		}
		created := filepath.Join(t.TempDir(), "role.json")
		if err := os.WriteFile(created, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"annotate", "modelrole", role, "team/owner=admin"},
			{"patch", "modelrole", role, "--type=merge", "-p", `{"spec":{"replicas":5}}`},
			{"create", "--dry-run=server", "-f", created},
			{"delete", "modelreplica", replica, "--dry-run=server"},
			{"annotate", "controllerrevision", revision, "team/owner=admin"},
			{"delete", "controllerrevision", revision, "--dry-run=server"},
		} {
			out, err := stack.Kubectl(append([]string{"-n", ns}, args...)...)
			if err == nil || !strings.Contains(out, "are mdplane's internal objects, written only by Crossplane and mdplane-controllers") ||
				!strings.Contains(out, "edit the ModelDeployment instead") {
				t.Errorf("a cluster admin: kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		// Crossplane's own name may: it composes them.
		asCrossplane := clientAs(t, cluster.CrossplaneUser)
		obj := roles.Items[0].DeepCopy()
		patch := client.MergeFrom(obj.DeepCopy())
		obj.Annotations["team/owner"] = "crossplane"
		if err := asCrossplane.Patch(ctx, obj, patch); err != nil {
			t.Errorf("Crossplane annotating its ModelRole: %v", err)
		}
	})
}
