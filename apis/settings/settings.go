package settings

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/google/go-containerregistry/pkg/name"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The EnvironmentConfig that holds the Settings.
const (
	// EnvironmentConfigName is the one cluster-scoped EnvironmentConfig mdplane reads.
	EnvironmentConfigName = "mdplane-settings"
	// APIVersion is the EnvironmentConfig version Crossplane v2.4.0 serves (v1beta1, also storage).
	APIVersion = "apiextensions.crossplane.io/v1beta1"
	// Kind is the EnvironmentConfig kind.
	Kind = "EnvironmentConfig"
	// Group and Resource name the kind for RBAC and webhook rules.
	Group    = "apiextensions.crossplane.io"
	Version  = "v1beta1"
	Resource = "environmentconfigs"
)

// The Setting names, spelled as GPUStack's worker Settings spell them.
const (
	KVCacheDtypeOwned             = "model-deployment-kv-cache-dtype-owned"
	RouterImage                   = "model-deployment-router-image"
	RouterProxyImage              = "model-deployment-router-proxy-image"
	RoutingSidecarImage           = "model-deployment-routing-sidecar-image"
	TCPTWReuse                    = "model-deployment-tcp-tw-reuse"
	ArtifactDeliveryMode          = "model-artifact-delivery-mode"
	ArtifactHuggingFaceEndpoint   = "model-artifact-huggingface-endpoint"
	ArtifactModelScopeEndpoint    = "model-artifact-modelscope-endpoint"
	ArtifactHTTPSProxy            = "model-artifact-https-proxy"
	ArtifactNoProxy               = "model-artifact-no-proxy"
	ArtifactCABundle              = "model-artifact-ca-bundle"
	ArtifactRevalidateInterval    = "model-artifact-revalidate-interval"
	KVCacheBackendImage           = "kv-cache-backend-image"
	InstancePrivilegedAllowed     = "instance-privileged-allowed"
	InstanceHostPathVolumeAllowed = "instance-host-path-volume-allowed"
	InstanceTypeTransientTaints   = "instance-type-transient-taints"
	InstanceTypeCohort            = "instance-type-cohort"
	InstanceTypeLendingLimit      = "instance-type-cohort-lending-limit"
	InstanceTypeBorrowingLimit    = "instance-type-cohort-borrowing-limit"
	InstanceTypePreemption        = "instance-type-preemption"
	ContainerRegistry             = "container-registry"
	ContainerNamespace            = "container-namespace"
)

// DeliveryMode is model-artifact-delivery-mode: how hub weights reach the engines.
type DeliveryMode string

// The delivery modes.
const (
	DeliveryEngine DeliveryMode = "Engine"
	DeliveryNode   DeliveryMode = "Node"
)

// The values of instance-type-preemption, as Kueue spells its withinClusterQueue policies: a
// deployment preempts no one (the default), or Workloads of a lower priority, or also those of its
// own priority admitted after it.
const (
	PreemptionNever                     = "Never"
	PreemptionLowerPriority             = "LowerPriority"
	PreemptionLowerOrNewerEqualPriority = "LowerOrNewerEqualPriority"
)

// PreemptionPolicies are the values instance-type-preemption takes.
var PreemptionPolicies = []string{PreemptionNever, PreemptionLowerPriority, PreemptionLowerOrNewerEqualPriority}

// CSIDriverName is the driver Node delivery needs; NodeDeliveryRefusal is the spec's refusal when it
// is missing (format with CSIDriverName). Parse cannot see the cluster; the webhook checks it.
const (
	CSIDriverName       = "model.csi.gpustack.ai"
	NodeDeliveryRefusal = "the CSIDriver %s does not exist: install the model-manager plugin (chart value modelManager.enabled) before choosing Node delivery"
)

// The revalidate interval's bounds.
const (
	MinRevalidateInterval = time.Minute
	MaxRevalidateInterval = 365 * 24 * time.Hour
)

// Settings is one typed field per Setting; the zero value is not the defaults, Defaults is.
type Settings struct {
	// KVCacheDtypeOwned renders the Binding's dtype as --kv-cache-dtype and refuses a user's own.
	KVCacheDtypeOwned bool
	// RouterImage is the router image when spec.router.image is unset (before Redirect).
	RouterImage string
	// RouterProxyImage is the Envoy in front of the llm-d endpoint picker (before Redirect).
	RouterProxyImage string
	// RoutingSidecarImage is the decode routing-proxy sidecar (before Redirect).
	RoutingSidecarImage string
	// TCPTWReuse adds net.ipv4.tcp_tw_reuse=1 to the prefill half of SGLang P/D pairs.
	TCPTWReuse bool
	// ArtifactDeliveryMode is how hub weights reach the engines.
	ArtifactDeliveryMode DeliveryMode
	// ArtifactHuggingFaceEndpoint is HF_ENDPOINT and the resolution endpoint.
	ArtifactHuggingFaceEndpoint string
	// ArtifactModelScopeEndpoint's host is MODELSCOPE_DOMAIN.
	ArtifactModelScopeEndpoint string
	// ArtifactHTTPSProxy is the engines' defaulted HTTPS_PROXY; blank renders nothing.
	ArtifactHTTPSProxy string
	// ArtifactNoProxy is the engines' defaulted NO_PROXY; blank renders nothing.
	ArtifactNoProxy string
	// ArtifactCABundle names a ConfigMap for the artifact controller; never given to engine Pods.
	ArtifactCABundle string
	// ArtifactRevalidateInterval is how often a resolved artifact is revalidated.
	ArtifactRevalidateInterval time.Duration
	// KVCacheBackendImage is the managed backend's image fallback; blank restores the refusal of
	// image-less managed backends.
	KVCacheBackendImage string
	// InstancePrivilegedAllowed admits roles[].privileged: true.
	InstancePrivilegedAllowed bool
	// InstanceHostPathVolumeAllowed admits hostPath roles[].additionalVolumes.
	InstanceHostPathVolumeAllowed bool
	// InstanceTypeTransientTaints are taint keys (or key prefixes ending in /), comma-separated, that
	// the InstanceTypes' flavors never tolerate, beside the built-in ones; read with TransientTaints.
	// Only the queues controller reads it, so it stays out of the JSON a revision is keyed by.
	InstanceTypeTransientTaints string `json:"-"`
	// InstanceTypeCohort is the Kueue cohort every InstanceType's ClusterQueue joins; blank for none.
	InstanceTypeCohort string `json:"-"`
	// InstanceTypeLendingLimit and InstanceTypeBorrowingLimit are the share of each quota a type's
	// ClusterQueue may lend to, and borrow from, the rest of its cohort, as a percentage ("25%");
	// blank is no limit. Read with LendingLimit and BorrowingLimit.
	InstanceTypeLendingLimit   string `json:"-"`
	InstanceTypeBorrowingLimit string `json:"-"`
	// InstanceTypePreemption is Kueue's preemption policy within each type's ClusterQueue: Never,
	// LowerPriority or LowerOrNewerEqualPriority (Kueue's withinClusterQueue).
	InstanceTypePreemption string `json:"-"`
	// ContainerRegistry and ContainerNamespace redirect the images mdplane picks itself.
	ContainerRegistry  string
	ContainerNamespace string
}

// Defaults are the Settings when no key is written.
func Defaults() Settings {
	return Settings{
		KVCacheDtypeOwned:           true,
		RouterImage:                 "gpustack/llm-router:v0.1.0",
		RouterProxyImage:            "gpustack/mirrored-envoy:distroless-v1.33.2",
		RoutingSidecarImage:         "gpustack/mirrored-llm-d-router-disagg-sidecar:v0.10.0",
		ArtifactDeliveryMode:        DeliveryEngine,
		ArtifactHuggingFaceEndpoint: "https://huggingface.co",
		ArtifactModelScopeEndpoint:  "https://www.modelscope.cn",
		ArtifactRevalidateInterval:  24 * time.Hour,
		KVCacheBackendImage:         "gpustack/mirrored-mooncake:0.3.13.post1-cpu",
		InstanceTypeBorrowingLimit:  "0%",
		InstanceTypePreemption:      PreemptionNever,
	}
}

// OrDefaults is *s, or the defaults when no Settings were read (nil).
func OrDefaults(s *Settings) Settings {
	if s == nil {
		return Defaults()
	}
	return *s
}

// rule reads one key into s; it returns the refusal's message (the way out included), or "".
type rule struct {
	name  string
	parse func(s *Settings, v any) string
}

var rules = []rule{
	{KVCacheDtypeOwned, boolean(func(s *Settings) *bool { return &s.KVCacheDtypeOwned })},
	{RouterImage, image(false, func(s *Settings) *string { return &s.RouterImage })},
	{RouterProxyImage, image(false, func(s *Settings) *string { return &s.RouterProxyImage })},
	{RoutingSidecarImage, image(false, func(s *Settings) *string { return &s.RoutingSidecarImage })},
	{TCPTWReuse, boolean(func(s *Settings) *bool { return &s.TCPTWReuse })},
	{ArtifactDeliveryMode, text(false, func(s *Settings, v string) string {
		if v != string(DeliveryEngine) && v != string(DeliveryNode) {
			return fmt.Sprintf("want Engine or Node, got %q", v)
		}
		s.ArtifactDeliveryMode = DeliveryMode(v)
		return ""
	})},
	{ArtifactHuggingFaceEndpoint, text(false, urlRule(false, func(s *Settings) *string { return &s.ArtifactHuggingFaceEndpoint }))},
	{ArtifactModelScopeEndpoint, text(false, urlRule(false, func(s *Settings) *string { return &s.ArtifactModelScopeEndpoint }))},
	{ArtifactHTTPSProxy, text(true, urlRule(true, func(s *Settings) *string { return &s.ArtifactHTTPSProxy }))},
	{ArtifactNoProxy, text(true, func(s *Settings, v string) string {
		if i := strings.IndexFunc(v, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }); i >= 0 {
			return "holds a space or control character; write comma-separated hosts, domains or CIDRs (e.g. .cluster.local,10.0.0.0/8)"
		}
		s.ArtifactNoProxy = v
		return ""
	})},
	{ArtifactCABundle, text(true, func(s *Settings, v string) string {
		if v != "" {
			if msgs := k8svalidation.IsDNS1123Subdomain(v); len(msgs) > 0 {
				return "not a ConfigMap name (not a lowercase RFC 1123 subdomain); write the name of a ConfigMap in mdplane's namespace, or blank for none"
			}
		}
		s.ArtifactCABundle = v
		return ""
	})},
	{ArtifactRevalidateInterval, text(false, func(s *Settings, v string) string {
		d, err := parseDuration(v)
		if err != nil {
			return fmt.Sprintf("not a duration (%v); write e.g. 30m, 24h or 7d, between 1m and 365d", err)
		}
		if d < MinRevalidateInterval || d > MaxRevalidateInterval {
			return "out of range; write a duration between 1m and 365d (e.g. 24h)"
		}
		s.ArtifactRevalidateInterval = d
		return ""
	})},
	{KVCacheBackendImage, image(true, func(s *Settings) *string { return &s.KVCacheBackendImage })},
	{InstancePrivilegedAllowed, boolean(func(s *Settings) *bool { return &s.InstancePrivilegedAllowed })},
	{InstanceHostPathVolumeAllowed, boolean(func(s *Settings) *bool { return &s.InstanceHostPathVolumeAllowed })},
	{InstanceTypeTransientTaints, text(true, func(s *Settings, v string) string {
		if _, msg := parseTaintKeys(v); msg != "" {
			return msg
		}
		s.InstanceTypeTransientTaints = v
		return ""
	})},
	{InstanceTypeCohort, text(true, func(s *Settings, v string) string {
		if v != "" {
			if msgs := k8svalidation.IsDNS1123Subdomain(v); len(msgs) > 0 {
				return "not a cohort name (not a lowercase RFC 1123 subdomain); write a Kueue cohort name (e.g. gpus), or blank for none"
			}
		}
		s.InstanceTypeCohort = v
		return ""
	})},
	{InstanceTypeLendingLimit, text(true, percentRule(func(s *Settings) *string { return &s.InstanceTypeLendingLimit }))},
	{InstanceTypeBorrowingLimit, text(true, percentRule(func(s *Settings) *string { return &s.InstanceTypeBorrowingLimit }))},
	{InstanceTypePreemption, text(false, func(s *Settings, v string) string {
		if !slices.Contains(PreemptionPolicies, v) {
			return fmt.Sprintf("want one of %s (Kueue's preemption within a ClusterQueue), got %q", strings.Join(PreemptionPolicies, ", "), v)
		}
		s.InstanceTypePreemption = v
		return ""
	})},
	{ContainerRegistry, text(true, func(s *Settings, v string) string {
		if v != "" {
			if strings.Contains(v, "/") {
				return "a registry is a host with an optional port, without scheme or path (e.g. registry.example.com:5000); put the path in " + ContainerNamespace
			}
			if _, err := name.NewRegistry(v, name.StrictValidation); err != nil {
				return fmt.Sprintf("not a registry host (%v); write a host with an optional port (e.g. registry.example.com:5000), or blank for none", err)
			}
		}
		s.ContainerRegistry = v
		return ""
	})},
	{ContainerNamespace, text(true, func(s *Settings, v string) string {
		if v != "" {
			if _, err := name.NewRepository("registry.invalid/"+v+"/image", name.StrictValidation); err != nil || strings.HasPrefix(v, "/") || strings.HasSuffix(v, "/") {
				return "not a repository namespace; write lowercase path components separated by / (e.g. mirror/gpustack), or blank to keep each image's own"
			}
		}
		s.ContainerNamespace = v
		return ""
	})},
}

// Names are the Settings mdplane reads, in the spec's table order.
func Names() []string {
	out := make([]string, 0, len(rules))
	for _, r := range rules {
		out = append(out, r.name)
	}
	return out
}

// Parse reads an EnvironmentConfig's data: every absent key takes its default, every present one is
// validated. It returns the Settings, warnings (one per key that is not a Setting mdplane reads, which
// is ignored), and the refusals, one per bad key under data[<key>]; with refusals, the Settings are
// not to be used.
func Parse(data map[string]any) (Settings, []string, field.ErrorList) {
	s := Defaults()
	var errs field.ErrorList
	p := field.NewPath("data")
	for _, r := range rules {
		v, ok := data[r.name]
		if !ok {
			continue
		}
		if msg := r.parse(&s, v); msg != "" {
			errs = append(errs, field.Invalid(p.Key(r.name), v, msg+", or remove the key for the default "+defaultText(r.name)))
		}
	}
	var warnings []string
	known := Names()
	keys := make([]string, 0, len(data))
	for k := range data {
		if !slices.Contains(known, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		warnings = append(warnings, fmt.Sprintf("%s: %q is not a Setting mdplane reads, and is ignored; check its spelling against: %s",
			p.Key(k), k, strings.Join(known, ", ")))
	}
	return s, warnings, errs
}

// ParseStrings is Parse for string data (a ConfigMap-like source).
func ParseStrings(data map[string]string) (Settings, []string, field.ErrorList) {
	m := make(map[string]any, len(data))
	for k, v := range data {
		m[k] = v
	}
	return Parse(m)
}

// InvalidError is a bad value in the EnvironmentConfig (as opposed to a failure to read it).
type InvalidError struct {
	Errs field.ErrorList
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("EnvironmentConfig %s: %v", EnvironmentConfigName, e.Errs.ToAggregate())
}

// Error joins refusals into one *InvalidError that names the EnvironmentConfig, for a render or a
// reader; nil without refusals.
func Error(errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Errs: errs}
}

// defaultText is a Setting's default as written in the object, quoted, or "(blank)".
func defaultText(key string) string {
	d := Defaults()
	var v string
	switch key {
	case KVCacheDtypeOwned:
		v = strconv.FormatBool(d.KVCacheDtypeOwned)
	case TCPTWReuse:
		v = strconv.FormatBool(d.TCPTWReuse)
	case InstancePrivilegedAllowed:
		v = strconv.FormatBool(d.InstancePrivilegedAllowed)
	case InstanceHostPathVolumeAllowed:
		v = strconv.FormatBool(d.InstanceHostPathVolumeAllowed)
	case ArtifactRevalidateInterval:
		v = "24h"
	default:
		v = d.String(key)
	}
	if v == "" {
		return "(blank)"
	}
	return v
}

// String is a string Setting's value by name ("" for booleans, durations and unknown names).
func (s Settings) String(key string) string {
	switch key {
	case RouterImage:
		return s.RouterImage
	case RouterProxyImage:
		return s.RouterProxyImage
	case RoutingSidecarImage:
		return s.RoutingSidecarImage
	case ArtifactDeliveryMode:
		return string(s.ArtifactDeliveryMode)
	case ArtifactHuggingFaceEndpoint:
		return s.ArtifactHuggingFaceEndpoint
	case ArtifactModelScopeEndpoint:
		return s.ArtifactModelScopeEndpoint
	case ArtifactHTTPSProxy:
		return s.ArtifactHTTPSProxy
	case ArtifactNoProxy:
		return s.ArtifactNoProxy
	case ArtifactCABundle:
		return s.ArtifactCABundle
	case KVCacheBackendImage:
		return s.KVCacheBackendImage
	case InstanceTypeTransientTaints:
		return s.InstanceTypeTransientTaints
	case InstanceTypeCohort:
		return s.InstanceTypeCohort
	case InstanceTypeLendingLimit:
		return s.InstanceTypeLendingLimit
	case InstanceTypeBorrowingLimit:
		return s.InstanceTypeBorrowingLimit
	case InstanceTypePreemption:
		return s.InstanceTypePreemption
	case ContainerRegistry:
		return s.ContainerRegistry
	case ContainerNamespace:
		return s.ContainerNamespace
	}
	return ""
}

func boolean(field func(*Settings) *bool) func(*Settings, any) string {
	return func(s *Settings, v any) string {
		switch t := v.(type) {
		case bool:
			*field(s) = t
			return ""
		case string:
			b, err := strconv.ParseBool(t)
			if err != nil {
				return "want true or false"
			}
			*field(s) = b
			return ""
		}
		return fmt.Sprintf("want true or false, got %s", typeName(v))
	}
}

// text reads a string Setting; blank is refused unless blankOK.
func text(blankOK bool, set func(*Settings, string) string) func(*Settings, any) string {
	return func(s *Settings, v any) string {
		t, ok := v.(string)
		if !ok {
			return fmt.Sprintf("want a string, got %s", typeName(v))
		}
		if strings.TrimSpace(t) == "" && !blankOK {
			return "must not be blank"
		}
		if t != strings.TrimSpace(t) {
			return "has leading or trailing white space; write the value alone"
		}
		return set(s, t)
	}
}

func image(blankOK bool, field func(*Settings) *string) func(*Settings, any) string {
	return text(blankOK, func(s *Settings, v string) string {
		if v != "" {
			if _, err := name.ParseReference(v); err != nil {
				return fmt.Sprintf("not an image reference (%v); write registry/repository:tag or @sha256:digest", err)
			}
		}
		*field(s) = v
		return ""
	})
}

// urlRule: an http or https URL with a host; proxy adds socks5 and refuses credentials.
func urlRule(proxy bool, field func(*Settings) *string) func(*Settings, string) string {
	return func(s *Settings, v string) string {
		if v != "" {
			u, err := url.Parse(v)
			schemes := []string{"http", "https"}
			if proxy {
				schemes = append(schemes, "socks5")
			}
			switch {
			case err != nil || u.Host == "" || u.Opaque != "":
				return fmt.Sprintf("not a URL with a scheme and a host; write e.g. %s", example(proxy))
			case !slices.Contains(schemes, u.Scheme):
				return fmt.Sprintf("scheme %q is not one of %s; write e.g. %s", u.Scheme, strings.Join(schemes, ", "), example(proxy))
			case proxy && u.User != nil:
				return "holds credentials, which every Pod's environment would show; write the proxy without user:password@"
			}
		}
		*field(s) = v
		return ""
	}
}

func example(proxy bool) string {
	if proxy {
		return "http://proxy.example.com:3128"
	}
	return "https://hub.example.com"
}

// parseDuration is time.ParseDuration plus a whole number of days ("7d").
func parseDuration(v string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 1<<20 {
			return 0, fmt.Errorf("invalid duration %q", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(v)
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case float64, float32, int, int32, int64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	}
	return fmt.Sprintf("%T", v)
}

// percentRule reads a share of a quota, a whole percentage from 0% to 100%, or blank for no limit.
func percentRule(field func(*Settings) *string) func(*Settings, string) string {
	return func(s *Settings, v string) string {
		if v != "" {
			if _, ok := parsePercent(v); !ok {
				return "not a share of the quota; write a whole percentage from 0% to 100% (e.g. 50%), or blank for no limit"
			}
		}
		*field(s) = v
		return ""
	}
}

// parsePercent reads "0%" to "100%".
func parsePercent(v string) (int64, bool) {
	digits, ok := strings.CutSuffix(v, "%")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || n > 100 || digits != strconv.FormatInt(n, 10) {
		return 0, false
	}
	return n, true
}

// LendingLimit is the percentage of each quota a type's ClusterQueue may lend to its cohort; ok is
// false when there is no limit.
func (s Settings) LendingLimit() (percent int64, ok bool) {
	return parsePercent(s.InstanceTypeLendingLimit)
}

// BorrowingLimit is the percentage of each quota a type's ClusterQueue may borrow from its cohort
// beyond it; ok is false when there is no limit.
func (s Settings) BorrowingLimit() (percent int64, ok bool) {
	return parsePercent(s.InstanceTypeBorrowingLimit)
}

// TransientTaints are the taint keys and key prefixes (ending in /) instance-type-transient-taints
// names, in its order; none when blank.
func (s Settings) TransientTaints() []string {
	keys, _ := parseTaintKeys(s.InstanceTypeTransientTaints)
	return keys
}

// parseTaintKeys reads comma-separated taint keys, each a Kubernetes qualified name (example.com/draining)
// or a prefix that is a DNS subdomain followed by / (example.com/); the message says what is wrong with
// the first bad entry.
func parseTaintKeys(v string) ([]string, string) {
	if v == "" {
		return nil, ""
	}
	var keys []string
	for _, entry := range strings.Split(v, ",") {
		if prefix, ok := strings.CutSuffix(entry, "/"); ok {
			if msgs := k8svalidation.IsDNS1123Subdomain(prefix); len(msgs) > 0 || strings.Contains(prefix, "/") {
				return nil, fmt.Sprintf("%q is not a taint key prefix (a DNS subdomain followed by /); write e.g. example.com/ or example.com/draining, comma-separated without spaces", entry)
			}
		} else if msgs := k8svalidation.IsQualifiedName(entry); len(msgs) > 0 {
			return nil, fmt.Sprintf("%q is not a taint key (not a qualified name); write e.g. example.com/draining or example.com/, comma-separated without spaces", entry)
		}
		keys = append(keys, entry)
	}
	return keys, ""
}
