package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/test/cluster"
)

// The team API example's Function, as Crossplane names the package it installs for the dependency
// xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform.
const patchAndTransform = "crossplane-contrib-function-patch-and-transform"

// chatModel is the team API example's kind.
func chatModel(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("platform.example.org/v1alpha1")
	u.SetKind("ChatModel")
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

// TestATeamAPIComposedFromModelDeployment installs the team API example (examples/team-api) beside
// mdplane with the Crossplane CLI, running docs/composing.md's crossplane xpkg commands as a platform
// team would, and uses it as a team would: a ChatModel becomes Ready when the ModelDeployment it
// composes does and reports its Ready replicas; an edit of its replica count scales the deployment
// without replacing the running replicas; an edit of its model is refused at once with the XRD's
// message, and the deployment is left as it was.
//
// The stack plays xpkg.crossplane.io for the example's Function dependency: its package is built
// from the pinned module's package/ directory and pushed to the stack's registry, which an
// ImageConfig stands in for, and its process is run by the stack's External runtime.
func TestATeamAPIComposedFromModelDeployment(t *testing.T) {
	sequential(t, "installs a Configuration that depends on mdplane's own, so Crossplane's package manager resolves mdplane's packages again")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "support-bot"
	tmp := t.TempDir() // the commands' $TMPDIR, where the built package waits for its push
	mirror := publishPatchAndTransform(t, ctx, tmp)
	t.Cleanup(func() { uninstallTeamAPI(t, ctx, mirror) })

	blocks, err := pageBlocks("composing.md")
	if err != nil {
		t.Fatal(err)
	}
	var xpkgLines []string
	for _, b := range blocks {
		for _, line := range commandLines(b.body) {
			if b.lang == "sh" && strings.HasPrefix(line, "crossplane xpkg ") {
				xpkgLines = append(xpkgLines, line)
			}
		}
	}
	if len(xpkgLines) != 3 {
		t.Fatalf("docs/composing.md's crossplane xpkg commands (build, push, install): %q", xpkgLines)
	}
	for _, line := range xpkgLines {
		out, err := crossplaneCLI(t, tmp, line)
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		t.Logf("%s\n%s", line, out)
	}

	applyCluster(t, ctx, ns)
	queue(t, ctx, "team-api", a10gEntrance, ns, 3)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	t.Cleanup(func() {
		// The ChatModel first: while it stands, Crossplane composes its deployment again.
		if _, err := stack.Kubectl("delete", "chatmodels", "--all", "-n", ns, "--timeout=2m"); err != nil {
			t.Error(err)
		}
	})
	kubectlApply(t, readExample(t, "team-api/examples/chatmodel.yaml", "namespace: team-a", "namespace: "+ns))

	eventually(t, 3*time.Minute, "the ChatModel Ready with its ModelDeployment, two replicas Ready", func() error {
		if err := running(ctx, ns, name, 2); err != nil {
			return err
		}
		if status, err := deploymentCondition(ctx, ns, name, "Ready"); err != nil || status != "True" {
			return fmt.Errorf("ModelDeployment Ready=%s: %v", status, err)
		}
		return chatModelReady(ctx, ns, name, 2)
	})
	if out, err := stack.Kubectl("get", "chatmodel", "-n", ns); err == nil {
		t.Logf("kubectl get chatmodel -n %s\n%s", ns, out)
	}
	before, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}

	// A replica-count edit passes down and scales the deployment in place.
	if _, err := stack.Kubectl("patch", "chatmodel", name, "-n", ns, "--type=merge", "-p", `{"spec":{"replicas":3}}`); err != nil {
		t.Fatal(err)
	}
	eventually(t, editRendered+2*time.Minute, "three replicas Ready, the first two untouched", func() error {
		if err := runningKeeping(ctx, ns, name, 3, before); err != nil {
			return err
		}
		return chatModelReady(ctx, ns, name, 3)
	})

	// A model edit is refused by the team API itself, with the way out; the near miss above (the
	// replica count) passed.
	out, err := stack.Kubectl("patch", "chatmodel", name, "-n", ns, "--type=merge", "-p", `{"spec":{"model":"Qwen/Qwen2.5-14B-Instruct"}}`)
	if err == nil || !strings.Contains(out+err.Error(), "model is frozen: a ChatModel of another model is a new ChatModel; create one and delete this") {
		t.Fatalf("a model edit of a ChatModel: %v\n%s", err, out)
	}
	md, err := modelDeployment(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if md.Spec.Model.Name != "Qwen/Qwen2.5-7B-Instruct" {
		t.Fatalf("the deployment's model is %q after a refused edit", md.Spec.Model.Name)
	}
	if out, err := stack.Kubectl("get", "chatmodel", "-n", ns); err == nil {
		t.Logf("kubectl get chatmodel -n %s\n%s", ns, out)
	}
}

// chatModelReady passes once the ChatModel is Ready and Synced and reports want Ready replicas.
func chatModelReady(ctx context.Context, namespace, name string, want int64) error {
	u := chatModel(namespace, name)
	if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		return err
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	status := map[any]any{}
	for _, c := range conditions {
		c := c.(map[string]any)
		status[c["type"]] = c["status"]
	}
	if status["Ready"] != "True" || status["Synced"] != "True" {
		return fmt.Errorf("ChatModel Ready=%v Synced=%v", status["Ready"], status["Synced"])
	}
	if got, _, _ := unstructured.NestedInt64(u.Object, "status", "readyReplicas"); got != want {
		return fmt.Errorf("ChatModel status.readyReplicas %d, want %d", got, want)
	}
	return nil
}

// publishPatchAndTransform plays xpkg.crossplane.io for the example's Function: its package, built
// from the pinned module with the Crossplane CLI and its runtime image (the stack's build of the
// pinned module) embedded, as the publisher builds it, is pushed to the stack's registry, and an
// ImageConfig rewrites the public path to it; Crossplane runs it as any Function. It returns the
// ImageConfig's name.
func publishPatchAndTransform(t *testing.T, ctx context.Context, tmp string) string {
	t.Helper()
	here, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "-C", filepath.Join(here, "..", "cluster", "tools", "function-patch-and-transform"),
		"list", "-m", "-f", "{{.Dir}}", "github.com/crossplane-contrib/function-patch-and-transform").Output()
	if err != nil {
		t.Fatalf("locating function-patch-and-transform's module: %v", err)
	}
	module := strings.TrimSpace(string(out))
	xpkg := filepath.Join(tmp, "function-patch-and-transform.xpkg")
	runtime := filepath.Join(tmp, "function-patch-and-transform-runtime.tar")
	if err := stack.FunctionRuntimeImage("function-patch-and-transform", cluster.PatchAndTransformVersion, runtime); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		fmt.Sprintf("crossplane xpkg build --package-root=%s/package --embed-runtime-image-tarball=%s -o %s", module, runtime, xpkg),
		fmt.Sprintf("crossplane xpkg push -f %s %s/crossplane-contrib/function-patch-and-transform:%s", xpkg, stack.Registry, cluster.PatchAndTransformVersion),
	} {
		if out, err := crossplaneCLI(t, tmp, line); err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
	}
	const mirror = "team-api-xpkg-crossplane-io"
	if err := stack.Client.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
		"metadata": map[string]any{"name": mirror},
		"spec": map[string]any{
			"matchImages":  []any{map[string]any{"type": "Prefix", "prefix": "xpkg.crossplane.io/crossplane-contrib/"}},
			"rewriteImage": map[string]any{"prefix": stack.Registry + "/crossplane-contrib/"},
		}}}); err != nil {
		t.Fatal(err)
	}
	return mirror
}

// uninstallTeamAPI removes what docs/composing.md installs, in its order: the Configuration, then
// the Function it brought (Crossplane leaves dependencies installed), and the test's mirror.
func uninstallTeamAPI(t *testing.T, ctx context.Context, mirror string) {
	t.Helper()
	for _, args := range [][]string{
		{"delete", "configuration.pkg.crossplane.io", "chatmodel-api", "--ignore-not-found", "--timeout=2m"},
		{"delete", "function.pkg.crossplane.io", patchAndTransform, "--ignore-not-found", "--timeout=2m"},
		{"delete", "imageconfig.pkg.crossplane.io", mirror, "--ignore-not-found"},
	} {
		if out, err := stack.Kubectl(args...); err != nil {
			t.Errorf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	eventually(t, 2*time.Minute, "the ChatModel kind gone with its Configuration", func() error {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		err := stack.Client.Get(ctx, client.ObjectKey{Name: "chatmodels.platform.example.org"}, crd)
		if err == nil {
			return fmt.Errorf("CRD chatmodels.platform.example.org still there")
		}
		return client.IgnoreNotFound(err)
	})
}

// crossplaneCLI runs a command line of the Crossplane CLI as a platform team would, in a shell at
// the repository root, with the stack as the current cluster, the version of the CLI build.sh pins
// as crossplane, the stack's registry as $REGISTRY and trusted, and tmp as $TMPDIR.
func crossplaneCLI(t *testing.T, tmp, line string) (string, error) {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(stack.Binary("crossplane-cli", cluster.CrossplaneCLIVersion), filepath.Join(bin, "crossplane")); err != nil {
		return "", err
	}
	return shellWith(line, "PATH="+bin+":"+os.Getenv("PATH"), "REGISTRY="+stack.Registry+"/platform",
		"SSL_CERT_FILE="+stack.RegistryCA(), "TMPDIR="+tmp, "HOME="+t.TempDir())
}
