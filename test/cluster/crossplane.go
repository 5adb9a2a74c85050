package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

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

// CrossplaneValues are the chart values the stack installs Crossplane with, beyond the defaults:
// the CA of its registry (registryCaBundleConfig, as for any private mirror) and the extra flags
// Deviations lists.
func CrossplaneValues(opts Options) map[string]any {
	args := []any{}
	for _, f := range deviationFlags("crossplane", opts) {
		args = append(args, f)
	}
	return map[string]any{
		"registryCaBundleConfig": map[string]any{"name": registryCAConfigMap, "key": "ca.crt"},
		"args":                   args,
	}
}

// registryCAConfigMap holds the stack registry's CA in Crossplane's namespace.
const registryCAConfigMap = "registry-ca"

// CrossplaneChart renders Crossplane's Helm chart as published for the release of the module at
// moduleDir (the module's Chart.yaml says 0.0.1; the release pipeline packages it with the
// release's version and appVersion, which name the image), with values merged over the chart's
// defaults, as `helm template crossplane --namespace crossplane-system` renders it.
func CrossplaneChart(moduleDir string, values map[string]any) ([]*unstructured.Unstructured, error) {
	chart := filepath.Join(moduleDir, "cluster", "charts", "crossplane")
	var defaults map[string]any
	raw, err := os.ReadFile(filepath.Join(chart, "values.yaml"))
	if err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(raw, &defaults); err != nil {
		return nil, fmt.Errorf("reading Crossplane's chart values: %w", err)
	}
	release := strings.TrimPrefix(CrossplaneVersion, "v")
	data := map[string]any{
		"Chart":   map[string]any{"Name": "crossplane", "Version": release, "AppVersion": release},
		"Release": map[string]any{"Name": "crossplane", "Namespace": CrossplaneNamespace, "Service": "Helm"},
		"Values":  mergeValues(defaults, values),
	}
	templates, err := filepath.Glob(filepath.Join(chart, "templates", "*.yaml"))
	if err != nil {
		return nil, err
	}
	tpl := template.New("chart").Option("missingkey=zero")
	tpl.Funcs(helmFuncs(tpl))
	if _, err := tpl.ParseFiles(append([]string{filepath.Join(chart, "templates", "_helpers.tpl")}, templates...)...); err != nil {
		return nil, fmt.Errorf("parsing Crossplane's chart: %w", err)
	}
	var out []*unstructured.Unstructured
	for _, f := range templates {
		var b bytes.Buffer
		if err := tpl.ExecuteTemplate(&b, filepath.Base(f), data); err != nil {
			return nil, fmt.Errorf("rendering Crossplane's chart template %s: %w", filepath.Base(f), err)
		}
		// Helm prints a missing value as nothing.
		rendered := strings.ReplaceAll(b.String(), "<no value>", "")
		for _, doc := range strings.Split(rendered, "\n---") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return nil, fmt.Errorf("the template %s of Crossplane's chart rendered no YAML: %w\n%s", filepath.Base(f), err, doc)
			}
			if len(obj) > 0 {
				u := &unstructured.Unstructured{Object: obj}
				if u.GetNamespace() == "" && namespaced(u.GetKind()) {
					u.SetNamespace(CrossplaneNamespace)
				}
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// namespaced says whether a kind the chart renders is namespaced (helm puts such objects in the
// release's namespace when the template names none).
func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "Namespace", "CustomResourceDefinition":
		return false
	}
	return true
}

// mergeValues merges over into base as Helm merges --set values: maps key by key, anything else
// replaced.
func mergeValues(base, over map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if sub, ok := v.(map[string]any); ok {
			if b, ok := out[k].(map[string]any); ok {
				out[k] = mergeValues(b, sub)
				continue
			}
		}
		out[k] = v
	}
	return out
}

// helmFuncs are the template functions of Helm's (Sprig's) that the chart's templates call,
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
		"tpl": func(text string, data any) (string, error) {
			t, err := tpl.Clone()
			if err != nil {
				return "", err
			}
			if t, err = t.New("tpl").Parse(text); err != nil {
				return "", err
			}
			var b bytes.Buffer
			err = t.Execute(&b, data)
			return b.String(), err
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

// installCrossplane installs Crossplane as its Helm chart does, into its namespace, with the values
// CrossplaneValues gives: core and its RBAC manager run as the chart's Deployments on the real node,
// from the release's image (the stack builds it from the pinned module; the node pulls it from the
// stack's registry), and the package manager runs Functions with its default Deployment runtime.
func (s *Stack) installCrossplane(ctx context.Context) error {
	ca := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": registryCAConfigMap, "namespace": CrossplaneNamespace},
		"data":     map[string]any{"ca.crt": string(s.ca.pem)}}}
	objs, err := CrossplaneChart(s.modules["github.com/crossplane/crossplane/v2"], CrossplaneValues(s.opts))
	if err != nil {
		return err
	}
	for _, obj := range append([]*unstructured.Unstructured{ca}, objs...) {
		if err := s.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("helm"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying Crossplane's chart %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, d := range []string{"crossplane", "crossplane-rbac-manager"} {
		if err := waitFor(ctx, nil, 3*time.Minute, "Crossplane's "+d, func() error {
			return s.deploymentAvailable(ctx, CrossplaneNamespace, d)
		}); err != nil {
			return err
		}
	}
	return nil
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
