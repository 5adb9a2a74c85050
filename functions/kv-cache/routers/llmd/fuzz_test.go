package llmd_test

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers/llmd"
)

var (
	fuzzEngines = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang, "TGI"}
	fuzzKinds   = []workerv1.RoleKind{"", workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode, workerv1.RoleKindEncode}
)

// FuzzEPP builds the EndpointPickerConfig document (llmd.EPP) and the Envoy bootstrap (llmd.Envoy)
// of a fuzzed deployment: its namespace, name, model, engine, serving port, disaggregation
// threshold, events and roles (one a line: name, then a kind index, then the role's arguments, all
// separated by spaces), and the route timeout. Inputs admission refuses are skipped: a namespace
// that is not a DNS label, a name that is not a DNS subdomain, a role name that is not a DNS label
// (that role is left out), a model name with a character that is not printable (validation's
// validateModelName, a rule this target found: such a name failed the render). Properties:
//
//   - EPP fails exactly for an engine whose metrics are unknown, and is deterministic;
//   - both documents are valid YAML, and EPP's reads back as an EndpointPickerConfig;
//   - the inputs that must appear do, exactly, after the YAML round trip: a label-selector filter and
//     a scheduling profile per distinct role kind, the metrics source on the serving port, the
//     disaggregation threshold when a prefill and a decode role are both present, and with the
//     precise producer the model name, the namespace and a pod selector naming the deployment;
//   - the Envoy bootstrap routes with the given timeout (the default when unset) and is otherwise
//     the template.
func FuzzEPP(f *testing.F) {
	f.Fuzz(func(t *testing.T, namespace, name, model string, e byte, port int32, threshold int32, thresholdSet, noEvents bool, roles string, timeout int32, timeoutSet bool) {
		if !admissible(namespace, name, model) {
			t.Skip("admission refuses these names")
		}
		d := llmd.Deployment{Namespace: namespace, Name: name, Model: model, Engine: fuzzEngines[int(e)%len(fuzzEngines)],
			Roles: parseRoles(roles), ServingPort: port, NoKVEvents: noEvents}
		if thresholdSet {
			d.DisaggregationThresholdTokens = &threshold
		}
		out, err := llmd.EPP(d)
		if _, known := llmd.EngineMetrics(d.Engine); (err == nil) != (known == nil) {
			t.Fatalf("EPP on %s: %v", d.Engine, err)
		}
		if err != nil {
			return
		}
		if again, _ := llmd.EPP(d); !bytes.Equal(out, again) {
			t.Fatalf("EPP is not deterministic:\n%s\n%s", out, again)
		}
		var doc struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Plugins    []struct {
				Name       string         `json:"name"`
				Type       string         `json:"type"`
				Parameters map[string]any `json:"parameters"`
			} `json:"plugins"`
			SchedulingProfiles []struct {
				Name    string `json:"name"`
				Plugins []any  `json:"plugins"`
			} `json:"schedulingProfiles"`
			DataLayer any `json:"dataLayer"`
		}
		if err := yaml.UnmarshalStrict(out, &doc); err != nil {
			t.Fatalf("EPP is not the YAML it should be: %v\n%s", err, out)
		}
		if doc.APIVersion != "llm-d.ai/v1alpha1" || doc.Kind != "EndpointPickerConfig" {
			t.Fatalf("EPP reads back as %s %s", doc.APIVersion, doc.Kind)
		}
		plugin := func(kind string) map[string]any {
			for _, p := range doc.Plugins {
				if p.Type == kind {
					return p.Parameters
				}
			}
			return nil
		}
		var want, profiles []string
		seen := map[string]bool{}
		for _, r := range d.Roles {
			if k := r.Kind.RouterSpelling(); !seen[k] {
				seen[k] = true
				want = append(want, k)
			}
		}
		sort.Strings(want)
		for _, p := range doc.SchedulingProfiles {
			profiles = append(profiles, p.Name)
		}
		if !slices.Equal(want, profiles) {
			t.Fatalf("the scheduling profiles are %q, the role kinds %q", profiles, want)
		}
		for _, k := range want {
			found := false
			for _, p := range doc.Plugins {
				found = found || p.Name == k+"-pods" && fmt.Sprint(p.Parameters["matchLabels"]) == fmt.Sprint(map[string]any{workerv1.LabelRoleKind: k})
			}
			if !found {
				t.Fatalf("no label-selector filter for role kind %q", k)
			}
		}
		if metrics := plugin("metrics-data-source"); (port > 0) != (metrics != nil) || port > 0 && fmt.Sprint(metrics["port"]) != strconv.Itoa(int(port)) {
			t.Fatalf("the metrics source is %v for serving port %d", metrics, port)
		}
		pd := seen[workerv1.RoleKindPrefill.RouterSpelling()] && seen[workerv1.RoleKindDecode.RouterSpelling()]
		wantThreshold := int32(llmd.DefaultNonCachedTokens)
		if thresholdSet {
			wantThreshold = threshold
		}
		if decider := plugin("prefix-based-pd-decider"); pd != (decider != nil) || pd && fmt.Sprint(decider["nonCachedTokens"]) != strconv.Itoa(int(wantThreshold)) {
			t.Fatalf("the decider is %v with prefill and decode %v, threshold %d", decider, pd, wantThreshold)
		}
		precise := d.Engine == workerv1.EngineVLLM && !noEvents
		if producer := plugin("token-producer"); precise != (producer != nil) || precise && producer["modelName"] != model {
			t.Fatalf("the token producer is %v for model %q", producer, model)
		}
		if precise {
			events, _ := plugin("precise-prefix-cache-producer")["kvEventsConfig"].(map[string]any)
			discovery, _ := events["podDiscoveryConfig"].(map[string]any)
			selector, _ := discovery["podLabelSelector"].(string)
			if discovery["podNamespace"] != namespace || !strings.Contains(selector, workerv1.LabelInstance+"="+name+",") {
				t.Fatalf("the producer discovers %v in %v, not deployment %q in %q", selector, discovery["podNamespace"], name, namespace)
			}
		}

		var tp *int32
		wantTimeout := llmd.DefaultRouteTimeoutSeconds
		if timeoutSet {
			tp, wantTimeout = &timeout, int(timeout)
		}
		envoy := llmd.Envoy(tp)
		var bootstrap map[string]any
		if err := yaml.Unmarshal([]byte(envoy), &bootstrap); err != nil {
			t.Fatalf("the Envoy bootstrap is not YAML: %v", err)
		}
		if !strings.Contains(envoy, fmt.Sprintf("timeout: %ds\n", wantTimeout)) || envoy != strings.Replace(llmd.Envoy(nil), fmt.Sprintf("timeout: %ds\n", llmd.DefaultRouteTimeoutSeconds), fmt.Sprintf("timeout: %ds\n", wantTimeout), 1) {
			t.Fatalf("the Envoy bootstrap does not route with timeout %d", wantTimeout)
		}
	})
}

// admissible reports whether admission admits a deployment's namespace, name and model name.
func admissible(namespace, name, model string) bool {
	if len(k8svalidation.IsDNS1123Label(namespace)) > 0 || len(k8svalidation.IsDNS1123Subdomain(name)) > 0 || !utf8.ValidString(model) {
		return false
	}
	for _, r := range model {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// parseRoles reads one role a line: its name, the index of its kind, then its arguments. A line
// whose name is not a DNS label, as the schema requires, is left out.
func parseRoles(s string) []workerv1.ModelDeploymentRole {
	var out []workerv1.ModelDeploymentRole
	for _, line := range strings.Split(s, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || len(k8svalidation.IsDNS1123Label(fields[0])) > 0 {
			continue
		}
		r := workerv1.ModelDeploymentRole{Name: fields[0]}
		if len(fields) > 1 {
			if k, err := strconv.Atoi(fields[1]); err == nil && k >= 0 {
				r.Kind = fuzzKinds[k%len(fuzzKinds)]
			}
			r.ExtraArgs = fields[2:]
		}
		out = append(out, r)
	}
	return out
}
