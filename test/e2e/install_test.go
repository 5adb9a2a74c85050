package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/test/cluster"
)

// docBlock is one fenced code block of a page: the language its fence names, its lines, and the
// heading of the section it is in.
type docBlock struct{ lang, body, section string }

// pageBlocks are the fenced code blocks of a page of docs/, in the page's order.
func pageBlocks(page string) ([]docBlock, error) {
	f, err := os.Open(filepath.Join("..", "..", "docs", page))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var blocks []docBlock
	lang, indent, section, body := "", "", "", []string(nil)
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case !in && strings.HasPrefix(sc.Text(), "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case !in && strings.HasPrefix(line, "```"):
			// A block inside a list item is indented as its fence is; its lines keep their own
			// indentation relative to that.
			in, lang, body = true, strings.TrimPrefix(line, "```"), nil
			indent, _, _ = strings.Cut(sc.Text(), "```") // the line holds a fence: it was trimmed to one
		case in && line == "```":
			blocks = append(blocks, docBlock{lang, strings.Join(body, "\n"), section})
			in = false
		case in:
			body = append(body, strings.TrimPrefix(sc.Text(), indent))
		}
	}
	return blocks, sc.Err()
}

// docBlocks are the fenced code blocks of docs/install.md, by language.
func docBlocks() (map[string][]string, error) {
	blocks, err := pageBlocks("install.md")
	if err != nil {
		return nil, err
	}
	byLang := map[string][]string{}
	for _, b := range blocks {
		byLang[b.lang] = append(byLang[b.lang], b.body)
	}
	return byLang, nil
}

// sectionLines are the lines of shell blocks under one heading that start with one of the prefixes.
func sectionLines(blocks []docBlock, section string, prefixes ...string) []string {
	in := map[string][]string{}
	for _, b := range blocks {
		if b.section == section {
			in[b.lang] = append(in[b.lang], b.body)
		}
	}
	return docLines(in, prefixes...)
}

// installedPackages are the packages the Configuration brings: the kind of their revisions, the
// name Crossplane gives each, and its image's repository under ghcr.io/mdplane.
var installedPackages = []struct{ list, pkg, image string }{
	{"ConfigurationRevisionList", "mdplane", "mdplane"},
	{"FunctionRevisionList", "mdplane-function-render-roles", "function-render-roles"},
	{"FunctionRevisionList", "mdplane-function-kv-cache", "function-kv-cache"},
}

// The stack installed mdplane through the package manager (see cluster.Stack.install); this test
// checks what that left behind, and runs the commands of docs/install.md that can run here.
func TestInstallationAsDocumented(t *testing.T) {
	sequential(t, "upgrades mdplane's packages and rolls them back")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	blocks, err := docBlocks()
	if err != nil {
		t.Fatal(err)
	}
	// The rights docs/operations.md tells the reader to check are checked with the page's own.
	operations, err := pageBlocks("operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range operations {
		if b.lang == "sh" && strings.Contains(b.body, "kubectl auth can-i") {
			blocks["sh"] = append(blocks["sh"], b.body)
		}
	}

	t.Run("the packages came from the registry, through the documented mirror rewrite", func(t *testing.T) {
		for _, rev := range installedPackages {
			list := &unstructured.UnstructuredList{}
			list.SetAPIVersion("pkg.crossplane.io/v1")
			list.SetKind(rev.list)
			if err := stack.Client.List(ctx, list, client.MatchingLabels{"pkg.crossplane.io/package": rev.pkg}); err != nil || len(list.Items) != 1 {
				t.Fatalf("revisions of %s: %d, %v", rev.pkg, len(list.Items), err)
			}
			item := list.Items[0].Object
			if image, _, _ := unstructured.NestedString(item, "spec", "image"); image != "ghcr.io/mdplane/"+rev.image+":"+cluster.PackageVersion {
				t.Errorf("%s: the revision's image is %s, not the published name", rev.pkg, image)
			}
			want := stack.Registry + "/mdplane/" + rev.image + ":" + cluster.PackageVersion
			if resolved, _, _ := unstructured.NestedString(item, "status", "resolvedImage"); resolved != want {
				t.Errorf("%s: resolved %s, want %s (the stack's registry)", rev.pkg, resolved, want)
			}
		}
	})

	t.Run("the install commands of the page that can run here", func(t *testing.T) {
		if !strings.Contains(strings.Join(blocks["sh"], "\n"), "kubectl apply --server-side -k package/") {
			t.Error("the page does not give the command the stack ran: kubectl apply --server-side -k package/")
		}
		crossplaneServiceAccount(t, ctx)
		ran := 0
		for _, line := range docLines(blocks, "kubectl wait configuration", "kubectl wait function", "kubectl auth can-i") {
			if out, err := shell(line); err != nil || strings.TrimSpace(out) == "no" {
				t.Errorf("%s: %v\n%s", line, err, out)
			}
			ran++
		}
		if ran < 10 {
			t.Errorf("ran %d commands of the pages, want the waits (install, upgrade, rollback) and the can-i checks of both pages", ran)
		}
		for _, block := range blocks["yaml"] {
			if !strings.Contains(block, "apiVersion: pkg.crossplane.io/") {
				continue
			}
			// The stack installed these objects with its own registry as the mirror: applied as the
			// page gives them, they must agree with what is installed field by field, or server-side
			// apply reports a conflict.
			f := filepath.Join(t.TempDir(), "doc.yaml")
			block = strings.ReplaceAll(block, "registry.example.internal", stack.Registry)
			if err := os.WriteFile(f, []byte(block), 0o644); err != nil {
				t.Fatal(err)
			}
			if out, err := stack.Kubectl("apply", "--server-side", "--dry-run=server", "-f", f); err != nil {
				t.Errorf("%s\n%v\n%s", block, err, out)
			}
		}
	})

	t.Run("each ServiceAccount may do its job and no more", func(t *testing.T) {
		const controllers, webhooks, api = "mdplane-controllers", "mdplane-webhooks", "mdplane-api"
		for _, row := range []struct {
			rule, account, verb, group, resource, name, namespace string
			allowed                                               bool
		}{
			{"the controllers delete a departing replica's Pods", controllers, "delete", "", "pods", "", "team-a", true},
			{"the controllers reap a group's Workload", controllers, "delete", "kueue.x-k8s.io", "workloads", "", "team-a", true},
			{"the controllers manage the queues of an InstanceType", controllers, "patch", "kueue.x-k8s.io", "clusterqueues", "", "", true},
			{"the controllers elect a leader in their namespace", controllers, "update", "coordination.k8s.io", "leases", "", cluster.Namespace, true},
			{"the controllers create a replica's Pods", controllers, "create", "", "pods", "", "team-a", true},
			{"the controllers never update a Pod", controllers, "update", "", "pods", "", "team-a", false},
			{"the controllers patch a Pod's eligibility and serving labels (metadata only)", controllers, "patch", "", "pods", "", "team-a", true},
			{"the controllers read a hub token's Secret by name", controllers, "get", "", "secrets", "hf-token", "team-a", true},
			{"the controllers never list Secrets", controllers, "list", "", "secrets", "", "team-a", false},
			{"the controllers never write Secrets", controllers, "update", "", "secrets", "hf-token", "team-a", false},
			{"the controllers never touch webhook configurations", controllers, "update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "mdplane", "", false},
			{"the controllers never update a deployment", controllers, "update", "worker.gpustack.ai", "modeldeployments", "", "team-a", false},
			{"the controllers remove a consumed retirement retry directive (patch)", controllers, "patch", "worker.gpustack.ai", "modeldeployments", "", "team-a", true},
			{"the controllers list EndpointSlices for a retirement's withdrawal", controllers, "list", "discovery.k8s.io", "endpointslices", "", "team-a", true},
			{"the controllers never watch EndpointSlices", controllers, "watch", "discovery.k8s.io", "endpointslices", "", "team-a", false},
			{"the controllers publish a KVCachePool's endpoint", controllers, "patch", "worker.gpustack.ai", "kvcachepools/status", "", "", true},
			{"the controllers watch the KVCacheBackends pools name", controllers, "watch", "worker.gpustack.ai", "kvcachebackends", "", "", true},
			{"the controllers never write a KVCacheBackend", controllers, "patch", "worker.gpustack.ai", "kvcachebackends", "", "", false},
			{"the controllers never edit a KVCachePool's spec", controllers, "update", "worker.gpustack.ai", "kvcachepools", "", "", false},
			{"the controllers label a Node as one of an InstanceType's (patch)", controllers, "patch", "", "nodes", "", "", true},
			{"the controllers never update a Node", controllers, "update", "", "nodes", "", "", false},
			{"the controllers write a ModelRole's status", controllers, "patch", "internal.mdplane.io", "modelroles/status", "", "team-a", true},
			{"the controllers never edit a ModelRole, which Crossplane composes", controllers, "patch", "internal.mdplane.io", "modelroles", "", "team-a", false},
			{"the controllers keep a role's disruption budget (patch)", controllers, "patch", "policy", "poddisruptionbudgets", "", "team-a", true},
			{"the controllers never delete a disruption budget: it leaves with its role", controllers, "delete", "policy", "poddisruptionbudgets", "", "team-a", false},
			{"the controllers never delete a Node", controllers, "delete", "", "nodes", "", "", false},
			{"the webhooks read InstanceTypes", webhooks, "get", "worker.gpustack.ai", "instancetypes", "", "", true},
			{"the webhooks keep their own certificate", webhooks, "update", "", "secrets", "mdplane-webhook-cert", cluster.Namespace, true},
			{"the webhooks inject their CA", webhooks, "update", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "mdplane", "", true},
			{"the webhooks never update another Secret", webhooks, "update", "", "secrets", "other", cluster.Namespace, false},
			{"the webhooks never touch another webhook configuration", webhooks, "update", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "kueue", "", false},
			{"the webhooks never delete Pods", webhooks, "delete", "", "pods", "", "team-a", false},
			{"the API writes a role's count (patch)", api, "patch", "worker.gpustack.ai", "modeldeployments", "", "team-a", true},
			{"the API never updates a deployment", api, "update", "worker.gpustack.ai", "modeldeployments", "", "team-a", false},
			{"the API authorizes each reader", api, "create", "authorization.k8s.io", "subjectaccessreviews", "", "", true},
			{"the API injects its CA into its APIServices", api, "update", "apiregistration.k8s.io", "apiservices", "v1.roles.worker.gpustack.ai", "", true},
			{"the API never touches another APIService", api, "update", "apiregistration.k8s.io", "apiservices", "v1beta1.metrics.k8s.io", "", false},
			{"the API keeps its own certificate", api, "update", "", "secrets", "mdplane-api-cert", cluster.Namespace, true},
			{"the API never updates the webhooks' certificate", api, "update", "", "secrets", "mdplane-webhook-cert", cluster.Namespace, false},
			{"the API never deletes Pods", api, "delete", "", "pods", "", "team-a", false},
			{"the controllers serve no API: no SubjectAccessReviews", controllers, "create", "authorization.k8s.io", "subjectaccessreviews", "", "", false},
		} {
			t.Run(row.rule, func(t *testing.T) {
				resource, subresource, _ := strings.Cut(row.resource, "/")
				review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
					User: "system:serviceaccount:" + cluster.Namespace + ":" + row.account,
					ResourceAttributes: &authzv1.ResourceAttributes{Verb: row.verb, Group: row.group, Resource: resource, Subresource: subresource,
						Name: row.name, Namespace: row.namespace},
				}}
				if err := stack.Client.Create(ctx, review); err != nil {
					t.Fatal(err)
				}
				if review.Status.Allowed != row.allowed {
					t.Errorf("%s may %s %s/%s: %t, want %t (%s)", row.account, row.verb, row.resource, row.name,
						review.Status.Allowed, row.allowed, review.Status.Reason)
				}
			})
		}
	})

	t.Run("the webhooks issued their certificate and injected its CA", func(t *testing.T) {
		secret := &unstructured.Unstructured{}
		secret.SetAPIVersion("v1")
		secret.SetKind("Secret")
		if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: "mdplane-webhook-cert"}, secret); err != nil {
			t.Fatal(err)
		}
		ca, _, _ := unstructured.NestedString(secret.Object, "data", "ca.crt")
		if ca == "" {
			t.Fatal("the Secret mdplane-webhook-cert holds no ca.crt")
		}
		for _, kind := range []string{"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
			cfg := &unstructured.Unstructured{}
			cfg.SetAPIVersion("admissionregistration.k8s.io/v1")
			cfg.SetKind(kind)
			if err := stack.Client.Get(ctx, types.NamespacedName{Name: "mdplane"}, cfg); err != nil {
				t.Fatal(err)
			}
			hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
			for _, h := range hooks {
				if bundle, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "caBundle"); bundle != ca {
					t.Errorf("%s mdplane: the CA bundle is not the webhooks' CA", kind)
				}
			}
		}
	})

	t.Run("the controllers hold their leader lease as their ServiceAccount", func(t *testing.T) {
		lease := &unstructured.Unstructured{}
		lease.SetAPIVersion("coordination.k8s.io/v1")
		lease.SetKind("Lease")
		if err := stack.Client.Get(ctx, types.NamespacedName{Namespace: cluster.Namespace, Name: "mdplane-controllers.worker.gpustack.ai"}, lease); err != nil {
			t.Fatal(err)
		}
		if holder, _, _ := unstructured.NestedString(lease.Object, "spec", "holderIdentity"); holder == "" {
			t.Error("the lease has no holder")
		}
	})

	// Last, because every later test of the suite then runs on the packages the rollback restored.
	t.Run("the documented upgrade and rollback keep running replicas", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		t.Cleanup(cancel) // after the namespace's teardown, which runOnH20 registers later
		ns := ownName(t, "ns")
		const name, next = "upgrade", "v0.2.0"
		runOnH20(t, ctx, ns, "upgrade", 2, name, 1, deploymentOnH20(ns, name, "server Server 1 1"))
		before, err := standing(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if err := stack.Publish(ctx, next); err != nil {
			t.Fatal(err)
		}
		page, err := pageBlocks("install.md")
		if err != nil {
			t.Fatal(err)
		}
		for _, step := range []struct{ section, version string }{{"Upgrade", next}, {"Roll back", cluster.PackageVersion}} {
			patches := sectionLines(page, step.section, "kubectl patch function", "kubectl patch configuration")
			if len(patches) != 3 {
				t.Fatalf("%s: the page's patches: %q", step.section, patches)
			}
			for _, line := range patches {
				if !strings.Contains(line, ":"+step.version+`"`) {
					t.Fatalf("%s: %s does not name %s", step.section, line, step.version)
				}
				if out, err := shell(line); err != nil {
					t.Fatalf("%s: %v\n%s", line, err, out)
				}
			}
			for _, rev := range installedPackages {
				eventually(t, 2*time.Minute, rev.pkg+" "+step.version+" active and healthy", func() error {
					return activeRevision(ctx, rev.list, rev.pkg, "ghcr.io/mdplane/"+rev.image+":"+step.version)
				})
			}
			// The page's cluster-side apply is the one the stack ran at install, with the tag the
			// step names; the controllers here run from this checkout, so the step checks it is there.
			waits := sectionLines(page, step.section, "kubectl wait configuration")
			applies := sectionLines(page, step.section, "kubectl apply --server-side -k package/")
			if len(waits) != 1 || len(applies) != 1 {
				t.Fatalf("%s: the page's wait %q and cluster-side apply %q", step.section, waits, applies)
			}
			if out, err := shell(waits[0]); err != nil {
				t.Errorf("%s: %v\n%s", waits[0], err, out)
			}
			// The deployment's status is rendered by the new Functions within a poll; its Pod stays.
			eventually(t, 2*time.Minute, step.section+": the running replica kept", func() error {
				return runningKeeping(ctx, ns, name, 1, before)
			})
		}
		// The rolled-back release composes and admits what an edit asks for, beside the kept Pod.
		patchReplicas(t, ns, name, 2)
		eventually(t, editRendered+time.Minute, "a second replica after the rollback, the first kept", func() error {
			return runningKeeping(ctx, ns, name, 2, before)
		})
	})
}

// docLines are the lines of the page's shell blocks that start with one of the prefixes.
func docLines(blocks map[string][]string, prefixes ...string) []string {
	var lines []string
	for _, block := range blocks["sh"] {
		for _, line := range strings.Split(block, "\n") {
			for _, p := range prefixes {
				if strings.HasPrefix(line, p) {
					lines = append(lines, line)
					break
				}
			}
		}
	}
	return lines
}

// shell runs one command line of the page as a reader would, in a shell at the repository root, with
// the stack's kubectl as kubectl and the stack as the current cluster.
func shell(line string) (string, error) {
	return shellWith(line)
}

// shellWith is shell with more environment (a later PATH entry is searched after kubectl's).
func shellWith(line string, env ...string) (string, error) {
	bin, err := os.MkdirTemp("", "mdplane-e2e-kubectl-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(bin)
	if err := os.Symlink(stack.KubectlBinary(), filepath.Join(bin, "kubectl")); err != nil {
		return "", err
	}
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = filepath.Join("..", "..") // the page's commands run from the repository root
	path := os.Getenv("PATH")
	for _, e := range env {
		if p, ok := strings.CutPrefix(e, "PATH="); ok {
			path = p
		}
	}
	cmd.Env = append(append(os.Environ(), env...), "PATH="+bin+":"+path, "KUBECONFIG="+stack.Kubeconfig)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// activeRevision passes once the package's active revision is of the image and healthy.
func activeRevision(ctx context.Context, list, pkg, image string) error {
	revisions := &unstructured.UnstructuredList{}
	revisions.SetAPIVersion("pkg.crossplane.io/v1")
	revisions.SetKind(list)
	if err := stack.Client.List(ctx, revisions, client.MatchingLabels{"pkg.crossplane.io/package": pkg}); err != nil {
		return err
	}
	for _, rev := range revisions.Items {
		state, _, _ := unstructured.NestedString(rev.Object, "spec", "desiredState")
		got, _, _ := unstructured.NestedString(rev.Object, "spec", "image")
		if state != "Active" {
			continue
		}
		if got != image {
			return fmt.Errorf("the active revision %s is of %s", rev.GetName(), got)
		}
		conditions, _, _ := unstructured.NestedSlice(rev.Object, "status", "conditions")
		for _, c := range conditions {
			if c := c.(map[string]any); c["type"] == "Healthy" && c["status"] != "True" {
				return fmt.Errorf("%s: %v", rev.GetName(), c["message"])
			}
		}
		return nil
	}
	return fmt.Errorf("%s has no active revision", pkg)
}

// crossplaneServiceAccount gives the ServiceAccount Crossplane runs as the ClusterRole its Helm chart
// installs: nothing of its own here, only what it aggregates by label. It waits until Kubernetes'
// aggregation controller has filled it in.
func crossplaneServiceAccount(t *testing.T, ctx context.Context) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "crossplane"}, AggregationRule: &rbacv1.AggregationRule{
		ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"rbac.crossplane.io/aggregate-to-crossplane": "true"}}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "crossplane"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "crossplane"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "crossplane", Namespace: "crossplane-system"}}}
	for _, obj := range []client.Object{role, binding} {
		if err := stack.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, "the aggregated rules", func() error {
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(role), role); err != nil {
			return err
		}
		if len(role.Rules) == 0 {
			return errors.New("no rules aggregated yet")
		}
		return nil
	})
}

// uninstallAsDocumented runs the uninstall commands of docs/install.md and waits until nothing of
// mdplane's is left: its packages, its kinds (the Configuration's and the kustomize base's), its
// webhook configurations, RBAC and namespace. It runs after every test, on the suite's stack.
func uninstallAsDocumented(ctx context.Context) error {
	blocks, err := docBlocks()
	if err != nil {
		return err
	}
	lines := docLines(blocks, "kubectl delete")
	if len(lines) != 4 {
		return fmt.Errorf("the page's uninstall commands: %q", lines)
	}
	for _, line := range lines {
		if out, err := shell(line); err != nil {
			return fmt.Errorf("%s: %w\n%s", line, err, out)
		}
	}
	gone := []struct {
		obj  client.Object
		name string
	}{
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": "Configuration"}}, "mdplane"},
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1", "kind": "Function"}}, "mdplane-function-render-roles"},
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}, "instancetypes.worker.gpustack.ai"},
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}, "modeldeployments.worker.gpustack.ai"},
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition"}}, "modelreplicas.internal.mdplane.io"},
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration"}}, "mdplane"},
		{&rbacv1.ClusterRole{}, "mdplane:aggregate-to-crossplane"},
		{&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}, cluster.Namespace},
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, g := range gone {
		for {
			err := stack.Client.Get(ctx, types.NamespacedName{Name: g.name}, g.obj)
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%T %s still there two minutes after the uninstall (%v)", g.obj, g.name, err)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}
