package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestCrossplaneChart: the chart renders as Helm installs the published release: core's
// ServiceAccount bound to the ClusterRole crossplane, which aggregates every ClusterRole labelled
// to it and grants nothing of its own; the built-in aggregate grants nothing in
// rbac.authorization.k8s.io; the RBAC manager has its own ServiceAccount and may escalate; both
// Deployments run the release's image, core with the stack's registry CA and extra flags.
func TestCrossplaneChart(t *testing.T) {
	dir, err := moduleDir(".", "github.com/crossplane/crossplane/v2")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := CrossplaneChart(dir, CrossplaneValues(Options{CrossplanePollInterval: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		byName[o.GetKind()+"/"+o.GetName()] = o
	}
	for _, want := range []string{
		"ServiceAccount/crossplane", "ServiceAccount/rbac-manager", "ClusterRole/crossplane",
		"ClusterRole/crossplane:system:aggregate-to-crossplane", "ClusterRoleBinding/crossplane",
		"ClusterRole/crossplane-rbac-manager", "ClusterRoleBinding/crossplane-rbac-manager",
		"ClusterRole/crossplane:allowed-provider-permissions", "ClusterRole/crossplane-admin",
	} {
		if byName[want] == nil {
			t.Errorf("the chart rendered no %s", want)
		}
	}
	core := byName["ClusterRole/crossplane"]
	if selector, _, _ := unstructured.NestedSlice(core.Object, "aggregationRule", "clusterRoleSelectors"); len(selector) != 1 {
		t.Errorf("ClusterRole crossplane aggregates %v", selector)
	}
	if rules, _, _ := unstructured.NestedSlice(core.Object, "rules"); len(rules) != 0 {
		t.Errorf("ClusterRole crossplane grants rules of its own: %v", rules)
	}
	builtIn := byName["ClusterRole/crossplane:system:aggregate-to-crossplane"]
	rules, _, _ := unstructured.NestedSlice(builtIn.Object, "rules")
	for _, r := range rules {
		groups, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "apiGroups")
		for _, g := range groups {
			if g == "rbac.authorization.k8s.io" {
				t.Errorf("the built-in aggregate grants %v", r)
			}
		}
	}
	subjects, _, _ := unstructured.NestedSlice(byName["ClusterRoleBinding/crossplane"].Object, "subjects")
	if len(subjects) != 1 || subjects[0].(map[string]any)["name"] != "crossplane" || subjects[0].(map[string]any)["namespace"] != CrossplaneNamespace {
		t.Errorf("ClusterRoleBinding crossplane binds %v", subjects)
	}
	if ns := byName["ServiceAccount/rbac-manager"].GetNamespace(); ns != CrossplaneNamespace {
		t.Errorf("the RBAC manager's ServiceAccount is in %q", ns)
	}
	for _, name := range []string{"Deployment/crossplane", "Deployment/crossplane-rbac-manager"} {
		d := byName[name]
		if d == nil {
			t.Fatalf("the chart rendered no %s", name)
		}
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		if image := containers[0].(map[string]any)["image"]; image != CrossplaneImage {
			t.Errorf("%s runs %v, want %s", name, image, CrossplaneImage)
		}
	}
	coreContainers, _, _ := unstructured.NestedSlice(byName["Deployment/crossplane"].Object, "spec", "template", "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(coreContainers[0].(map[string]any), "args")
	if !slices.Contains(args, "--poll-interval=5s") {
		t.Errorf("core's args %v lack the stack's --poll-interval", args)
	}
	env, _, _ := unstructured.NestedSlice(coreContainers[0].(map[string]any), "env")
	if !slices.ContainsFunc(env, func(e any) bool { return e.(map[string]any)["name"] == "CA_BUNDLE_PATH" }) {
		t.Errorf("core's env %v has no CA_BUNDLE_PATH", env)
	}
}

// TestDeviationsAreDocumented: every deviation of the stack from a default install is in
// docs/install.md's list, by its flag and its component, so users read what the stack changes.
func TestDeviationsAreDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(raw), "\n## What the test stack changes from a default install\n")
	if !found {
		t.Fatal(`docs/install.md has no section "What the test stack changes from a default install"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, d := range Deviations {
		if !strings.Contains(section, "`"+d.Component+"`") {
			t.Errorf("docs/install.md's list does not name the component %s", d.Component)
		}
		if d.Flag != "" && !strings.Contains(section, "`"+d.Flag) {
			t.Errorf("docs/install.md's list does not name %s's %s", d.Component, d.Flag)
		}
	}
}

// TestUnlistedControllerFlagRefused: a flag a test gives mdplane-controllers that Deviations does
// not list stops the stack from starting, naming it; a listed one passes.
func TestUnlistedControllerFlagRefused(t *testing.T) {
	if err := checkListed("mdplane-controllers", []string{"--park-after=20s"}); err != nil {
		t.Errorf("a listed flag: %v", err)
	}
	err := checkListed("mdplane-controllers", []string{"--member-workers=64"})
	if err == nil || !strings.Contains(err.Error(), "--member-workers") {
		t.Errorf("an unlisted flag: %v", err)
	}
}
