package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// CrossplaneNamespace is the namespace Crossplane's Helm release installs into, as its docs do.
const CrossplaneNamespace = "crossplane-system"

// The ServiceAccounts of Crossplane's chart: core's and the RBAC manager's.
const (
	crossplaneAccount  = "crossplane"
	rbacManagerAccount = "rbac-manager"
)

// CrossplaneUser is the name the stack's Crossplane authenticates as: its ServiceAccount's, as a
// cluster's Crossplane Pod has, which mdplane's policies name.
const CrossplaneUser = "system:serviceaccount:" + CrossplaneNamespace + ":" + crossplaneAccount

// CrossplaneGroups are the groups a token of Crossplane's ServiceAccount authenticates with, for a
// SubjectAccessReview that asks what Crossplane may do.
var CrossplaneGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + CrossplaneNamespace, "system:authenticated"}

// crossplaneRBACTemplates are the templates of Crossplane's Helm chart that make its identities and
// their rights: core's ServiceAccount, ClusterRole (aggregating every ClusterRole labelled
// rbac.crossplane.io/aggregate-to-crossplane) and binding, and the RBAC manager's. The rest of the
// chart (Deployments, Services, Secrets) the stack replaces with local processes.
var crossplaneRBACTemplates = []string{
	"serviceaccount.yaml", "clusterrole.yaml", "clusterrolebinding.yaml",
	"rbac-manager-serviceaccount.yaml", "rbac-manager-clusterrole.yaml", "rbac-manager-clusterrolebinding.yaml",
	"rbac-manager-allowed-provider-permissions.yaml", "rbac-manager-managed-clusterroles.yaml",
}

// CrossplaneChartRBAC renders the RBAC templates of the Crossplane chart shipped in the module at
// moduleDir with the chart's default values, as `helm install crossplane --namespace
// crossplane-system` renders them.
func CrossplaneChartRBAC(moduleDir string) ([]*unstructured.Unstructured, error) {
	chart := filepath.Join(moduleDir, "cluster", "charts", "crossplane")
	var meta struct {
		Name, Version, AppVersion string `json:",omitempty"`
	}
	var values map[string]any
	for file, into := range map[string]any{"Chart.yaml": &meta, "values.yaml": &values} {
		raw, err := os.ReadFile(filepath.Join(chart, file))
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(raw, into); err != nil {
			return nil, fmt.Errorf("reading Crossplane's chart %s: %w", file, err)
		}
	}
	data := map[string]any{
		"Chart":   map[string]any{"Name": meta.Name, "Version": meta.Version, "AppVersion": meta.AppVersion},
		"Release": map[string]any{"Name": "crossplane", "Namespace": CrossplaneNamespace, "Service": "Helm"},
		"Values":  values,
	}
	files := append([]string{"_helpers.tpl"}, crossplaneRBACTemplates...)
	for i, f := range files {
		files[i] = filepath.Join(chart, "templates", f)
	}
	tpl := template.New("chart").Option("missingkey=zero")
	tpl.Funcs(helmFuncs(tpl))
	if _, err := tpl.ParseFiles(files...); err != nil {
		return nil, fmt.Errorf("parsing Crossplane's chart: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, f := range crossplaneRBACTemplates {
		var b bytes.Buffer
		if err := tpl.ExecuteTemplate(&b, f, data); err != nil {
			return nil, fmt.Errorf("rendering Crossplane's chart template %s: %w", f, err)
		}
		// Helm prints a missing value as nothing.
		rendered := strings.ReplaceAll(b.String(), "<no value>", "")
		for _, doc := range strings.Split(rendered, "\n---") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("the template %s of Crossplane's chart rendered no YAML: %w\n%s", f, err, doc)
			}
			if len(obj) > 0 {
				out = append(out, &unstructured.Unstructured{Object: obj})
			}
		}
	}
	return out, nil
}

// helmFuncs are the template functions of Helm's (Sprig's) that the chart's RBAC templates call,
// with Helm's meaning.
func helmFuncs(tpl *template.Template) template.FuncMap {
	indent := func(n int, s string) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
	}
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var b bytes.Buffer
			err := tpl.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
		"default": func(d any, v ...any) any {
			if len(v) == 0 || v[0] == nil || v[0] == "" || v[0] == false {
				return d
			}
			return v[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"quote":      func(v any) string { return fmt.Sprintf("%q", fmt.Sprint(v)) },
		"indent":     indent,
		"nindent":    func(n int, s string) string { return "\n" + indent(n, s) },
		"toYaml": func(v any) string {
			b, err := yaml.Marshal(v)
			if err != nil {
				return ""
			}
			return strings.TrimSuffix(string(b), "\n")
		},
	}
}

// installCrossplaneRBAC applies the chart's RBAC objects, as `helm install` does before Crossplane's
// Pods start, and writes a kubeconfig for each of its two ServiceAccounts.
func (s *Stack) installCrossplaneRBAC(ctx context.Context) (core, rbacManager string, err error) {
	objs, err := CrossplaneChartRBAC(s.modules["github.com/crossplane/crossplane/v2"])
	if err != nil {
		return "", "", err
	}
	for _, obj := range objs {
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			return "", "", fmt.Errorf("applying Crossplane's chart %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	if core, err = s.serviceAccountKubeconfig(ctx, CrossplaneNamespace, crossplaneAccount); err != nil {
		return "", "", err
	}
	rbacManager, err = s.serviceAccountKubeconfig(ctx, CrossplaneNamespace, rbacManagerAccount)
	return core, rbacManager, err
}

// startRBACManager runs Crossplane's RBAC manager as its chart does (`crossplane rbac start
// --provider-clusterrole=crossplane:allowed-provider-permissions`) under its own ServiceAccount: it
// makes the ClusterRoles that let Crossplane serve each XRD's kind.
func (s *Stack) startRBACManager(ctx context.Context, kubeconfig string) error {
	return s.launch(ctx, &restartable{name: "crossplane-rbac-manager", bin: s.binary("crossplane", CrossplaneVersion),
		args: []string{"rbac", "start", "--provider-clusterrole=crossplane:allowed-provider-permissions"},
		env:  []string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + CrossplaneNamespace},
		// It serves no health endpoint: it is up once it has not exited.
		ready: func() error { return nil }})
}

// CrossplaneMay reports whether Crossplane's ServiceAccount, with what the stack's RBAC grants it,
// may verb the resource (group, resource) in namespace ("" for cluster-wide).
func (s *Stack) CrossplaneMay(ctx context.Context, verb, group, resource, namespace string) (bool, string, error) {
	review := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: CrossplaneUser, Groups: CrossplaneGroups,
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource, Namespace: namespace},
	}}
	if err := s.Client.Create(ctx, review); err != nil {
		return false, "", err
	}
	return review.Status.Allowed, review.Status.Reason, nil
}

// crossplaneServesComposites passes once the RBAC manager has granted Crossplane mdplane's
// composite kinds, which Crossplane needs before it can reconcile them.
func (s *Stack) crossplaneServesComposites() error {
	for _, r := range [][2]string{{"worker.gpustack.ai", "modeldeployments"}, {"internal.mdplane.io", "modelroles"}} {
		ok, _, err := s.CrossplaneMay(context.Background(), "update", r[0], r[1], "")
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("the RBAC manager has not granted Crossplane %s.%s yet", r[1], r[0])
		}
	}
	return nil
}
