package settings

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/apis/validation/refusaltest"
)

func TestDefaultsWhenAbsent(t *testing.T) {
	for name, data := range map[string]map[string]any{"nil": nil, "empty": {}} {
		s, w, errs := Parse(data)
		if len(errs) > 0 || len(w) > 0 || s != Defaults() {
			t.Errorf("%s: got %+v %v %v, want the defaults", name, s, w, errs)
		}
	}
	d := Defaults()
	if !d.KVCacheDtypeOwned || d.TCPTWReuse || d.InstancePrivilegedAllowed || d.InstanceHostPathVolumeAllowed ||
		d.ArtifactDeliveryMode != DeliveryEngine || d.ArtifactRevalidateInterval != 24*time.Hour ||
		d.RouterImage != "gpustack/llm-router:v0.1.0" || d.RouterProxyImage != "gpustack/mirrored-envoy:distroless-v1.33.2" ||
		d.RoutingSidecarImage != "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0" ||
		d.ArtifactHuggingFaceEndpoint != "https://huggingface.co" || d.ArtifactModelScopeEndpoint != "https://www.modelscope.cn" ||
		d.KVCacheBackendImage != "gpustack/mirrored-mooncake:0.3.13.post1-cpu" || d.ContainerRegistry != "" || d.ContainerNamespace != "" {
		t.Errorf("defaults differ from the spec's table: %+v", d)
	}
}

// One row per rule: a valid value (and what it reads as) or a refusal and the text it carries.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		key   string
		value any
		check func(Settings) bool
		err   string
	}{
		{KVCacheDtypeOwned, "false", func(s Settings) bool { return !s.KVCacheDtypeOwned }, ""},
		{KVCacheDtypeOwned, false, func(s Settings) bool { return !s.KVCacheDtypeOwned }, ""},
		{KVCacheDtypeOwned, "yes", nil, `data[model-deployment-kv-cache-dtype-owned]: Invalid value: "yes": want true or false, or remove the key for the default true`},
		{KVCacheDtypeOwned, 1.0, nil, "want true or false, got a number"},
		{KVCacheDtypeOwned, nil, nil, "want true or false, got null"},
		{TCPTWReuse, "true", func(s Settings) bool { return s.TCPTWReuse }, ""},
		{TCPTWReuse, "", nil, "want true or false, or remove the key for the default false"},
		{InstancePrivilegedAllowed, true, func(s Settings) bool { return s.InstancePrivilegedAllowed }, ""},
		{InstancePrivilegedAllowed, "sure", nil, "want true or false"},
		{InstanceHostPathVolumeAllowed, "TRUE", func(s Settings) bool { return s.InstanceHostPathVolumeAllowed }, ""},
		{InstanceHostPathVolumeAllowed, []any{}, nil, "got a list"},
		{RouterImage, "registry.local/llm-router:v2", func(s Settings) bool { return s.RouterImage == "registry.local/llm-router:v2" }, ""},
		{RouterImage, "", nil, "must not be blank, or remove the key for the default gpustack/llm-router:v0.1.0"},
		{RouterImage, "Bad Image", nil, "not an image reference"},
		{RouterImage, " gpustack/llm-router:v1", nil, "leading or trailing white space"},
		{RouterProxyImage, "envoy@sha256:" + strings.Repeat("a", 64), func(s Settings) bool { return strings.HasPrefix(s.RouterProxyImage, "envoy@") }, ""},
		{RouterProxyImage, "envoy:", nil, "not an image reference"},
		{RoutingSidecarImage, "x/sidecar:v1", func(s Settings) bool { return s.RoutingSidecarImage == "x/sidecar:v1" }, ""},
		{RoutingSidecarImage, 3, nil, "want a string, got a number"},
		{KVCacheBackendImage, "", func(s Settings) bool { return s.KVCacheBackendImage == "" }, ""},
		{KVCacheBackendImage, "UPPER:case", nil, "not an image reference"},
		{ArtifactDeliveryMode, "Node", func(s Settings) bool { return s.ArtifactDeliveryMode == DeliveryNode }, ""},
		{ArtifactDeliveryMode, "node", nil, `want Engine or Node, got "node", or remove the key for the default Engine`},
		{ArtifactDeliveryMode, "", nil, "must not be blank"},
		{ArtifactHuggingFaceEndpoint, "http://hf-mirror.local:8080", func(s Settings) bool { return s.ArtifactHuggingFaceEndpoint == "http://hf-mirror.local:8080" }, ""},
		{ArtifactHuggingFaceEndpoint, "huggingface.co", nil, "not a URL with a scheme and a host"},
		{ArtifactHuggingFaceEndpoint, "ftp://hf", nil, `scheme "ftp" is not one of http, https`},
		{ArtifactHuggingFaceEndpoint, "", nil, "must not be blank"},
		{ArtifactModelScopeEndpoint, "https://modelscope.local", func(s Settings) bool { return s.ArtifactModelScopeEndpoint == "https://modelscope.local" }, ""},
		{ArtifactModelScopeEndpoint, "www.modelscope.cn", nil, "not a URL with a scheme and a host"},
		{ArtifactHTTPSProxy, "", func(s Settings) bool { return s.ArtifactHTTPSProxy == "" }, ""},
		{ArtifactHTTPSProxy, "http://proxy:3128", func(s Settings) bool { return s.ArtifactHTTPSProxy == "http://proxy:3128" }, ""},
		{ArtifactHTTPSProxy, "http://u:p@proxy:3128", nil, "holds credentials"},
		{ArtifactHTTPSProxy, "proxy:3128", nil, "not a URL with a scheme and a host"},
		{ArtifactNoProxy, ".cluster.local,10.0.0.0/8", func(s Settings) bool { return s.ArtifactNoProxy == ".cluster.local,10.0.0.0/8" }, ""},
		{ArtifactNoProxy, "a, b", nil, "space or control character"},
		{ArtifactCABundle, "corp-ca", func(s Settings) bool { return s.ArtifactCABundle == "corp-ca" }, ""},
		{ArtifactCABundle, "Corp_CA", nil, "not a ConfigMap name"},
		{ArtifactRevalidateInterval, "7d", func(s Settings) bool { return s.ArtifactRevalidateInterval == 7*24*time.Hour }, ""},
		{ArtifactRevalidateInterval, "1m", func(s Settings) bool { return s.ArtifactRevalidateInterval == time.Minute }, ""},
		{ArtifactRevalidateInterval, "365d", func(s Settings) bool { return s.ArtifactRevalidateInterval == MaxRevalidateInterval }, ""},
		{ArtifactRevalidateInterval, "59s", nil, "out of range; write a duration between 1m and 365d (e.g. 24h), or remove the key for the default 24h"},
		{ArtifactRevalidateInterval, "366d", nil, "out of range"},
		{ArtifactRevalidateInterval, "daily", nil, "not a duration"},
		{InstanceTypeTransientTaints, "example.com/draining,health.example.com/", func(s Settings) bool {
			return strings.Join(s.TransientTaints(), " ") == "example.com/draining health.example.com/"
		}, ""},
		{InstanceTypeTransientTaints, "Draining", func(s Settings) bool { return s.TransientTaints()[0] == "Draining" }, ""},
		{InstanceTypeTransientTaints, "", func(s Settings) bool { return s.TransientTaints() == nil }, ""},
		{InstanceTypeTransientTaints, "example.com/draining, b", nil, `" b" is not a taint key`},
		{InstanceTypeTransientTaints, "a/b/", nil, `"a/b/" is not a taint key prefix`},
		{InstanceTypeTransientTaints, "example.com/draining,", nil, `"" is not a taint key`},
		{InstanceTypeCohort, "gpus", func(s Settings) bool { return s.InstanceTypeCohort == "gpus" }, ""},
		{InstanceTypeCohort, "", func(s Settings) bool { return s.InstanceTypeCohort == "" }, ""},
		{InstanceTypeCohort, "GPUs", nil, "not a cohort name"},
		{InstanceTypeLendingLimit, "25%", func(s Settings) bool { p, ok := s.LendingLimit(); return ok && p == 25 }, ""},
		{InstanceTypeLendingLimit, "", func(s Settings) bool { _, ok := s.LendingLimit(); return !ok }, ""},
		{InstanceTypeLendingLimit, "101%", nil, "write a whole percentage from 0% to 100%"},
		{InstanceTypeLendingLimit, "25", nil, "not a share of the quota"},
		{InstanceTypeBorrowingLimit, "100%", func(s Settings) bool { p, ok := s.BorrowingLimit(); return ok && p == 100 }, ""},
		{InstanceTypeBorrowingLimit, "", func(s Settings) bool { _, ok := s.BorrowingLimit(); return !ok }, ""},
		{InstanceTypeBorrowingLimit, "05%", nil, "not a share of the quota"},
		{InstanceTypeBorrowingLimit, "-1%", nil, "or remove the key for the default 0%"},
		{InstanceTypePreemption, "LowerPriority", func(s Settings) bool { return s.InstanceTypePreemption == "LowerPriority" }, ""},
		{InstanceTypePreemption, "LowerOrNewerEqualPriority", func(s Settings) bool { return s.InstanceTypePreemption == "LowerOrNewerEqualPriority" }, ""},
		{InstanceTypePreemption, "lowerpriority", nil, `want one of Never, LowerPriority, LowerOrNewerEqualPriority (Kueue's preemption within a ClusterQueue), got "lowerpriority"`},
		{ContainerRegistry, "registry.local:5000", func(s Settings) bool { return s.ContainerRegistry == "registry.local:5000" }, ""},
		{ContainerRegistry, "https://registry.local", nil, "without scheme or path"},
		{ContainerRegistry, "reg istry", nil, "not a registry host"},
		{ContainerNamespace, "mirror/gpustack", func(s Settings) bool { return s.ContainerNamespace == "mirror/gpustack" }, ""},
		{ContainerNamespace, "Mirror", nil, "not a repository namespace"},
		{ContainerNamespace, "mirror/", nil, "not a repository namespace"},
	} {
		s, _, errs := Parse(map[string]any{c.key: c.value})
		refusaltest.Checked(t, errs)
		switch {
		case c.err == "" && len(errs) > 0:
			t.Errorf("%s=%v: refused: %v", c.key, c.value, errs)
		case c.err == "" && !c.check(s):
			t.Errorf("%s=%v: read as %+v", c.key, c.value, s)
		case c.err != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), c.err)):
			t.Errorf("%s=%v: got %v, want one refusal containing %q", c.key, c.value, errs, c.err)
		case c.err != "" && !strings.Contains(errs[0].Error(), "data["+c.key+"]"):
			t.Errorf("%s=%v: refusal does not name the key: %v", c.key, c.value, errs)
		}
	}
}

func TestUnknownKeysWarn(t *testing.T) {
	s, w, errs := Parse(map[string]any{"model-deployment-router-imag": "x", "workload-fit-affinity": "true"})
	if len(errs) > 0 || s != Defaults() || len(w) != 2 || !strings.Contains(w[0], `"model-deployment-router-imag" is not a Setting mdplane reads`) {
		t.Errorf("got %+v %q %v", s, w, errs)
	}
}

func TestEverySettingHasARule(t *testing.T) {
	if len(Names()) != 22 {
		t.Errorf("Names() = %d keys, want the 22 Settings mdplane reads", len(Names()))
	}
}

func TestRedirect(t *testing.T) {
	for _, c := range []struct{ reg, ns, in, want string }{
		{"", "", "gpustack/llm-router:v0.1.0", "gpustack/llm-router:v0.1.0"},
		{"registry.local:5000", "", "gpustack/llm-router:v0.1.0", "registry.local:5000/gpustack/llm-router:v0.1.0"},
		{"registry.local:5000", "mirror", "gpustack/llm-router:v0.1.0", "registry.local:5000/mirror/llm-router:v0.1.0"},
		{"", "mirror/a", "gpustack/llm-router:v0.1.0", "mirror/a/llm-router:v0.1.0"},
		{"reg.local", "", "quay.io/x/y/z@sha256:abc", "reg.local/x/y/z@sha256:abc"},
		{"", "m", "localhost/x/y:1", "localhost/m/y:1"},
		{"reg.local", "", "python:3.12", "reg.local/python:3.12"},
		{"reg.local", "m", "", ""},
	} {
		s := Defaults()
		s.ContainerRegistry, s.ContainerNamespace = c.reg, c.ns
		if got := s.Redirect(c.in); got != c.want {
			t.Errorf("Redirect(%q) with %q/%q = %q, want %q", c.in, c.reg, c.ns, got, c.want)
		}
	}
}

func TestFromObject(t *testing.T) {
	if s, _, errs := FromObject(nil); len(errs) > 0 || s != Defaults() {
		t.Errorf("no object: %+v %v", s, errs)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": APIVersion, "kind": Kind, "metadata": map[string]any{"name": EnvironmentConfigName},
		"data": map[string]any{TCPTWReuse: true},
	}}
	if !IsSettings(u) {
		t.Error("IsSettings: false for mdplane-settings")
	}
	if s, _, errs := FromObject(u); len(errs) > 0 || !s.TCPTWReuse {
		t.Errorf("got %+v %v", s, errs)
	}
	u.Object["data"] = "x"
	if _, _, errs := FromObject(u); len(errs) != 1 {
		t.Errorf("data not a map: %v", errs)
	}
}
