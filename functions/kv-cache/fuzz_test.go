package kvcache_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

// Fuzz tables: an input byte picks among them.
var (
	fuzzEngines       = []workerv1.Engine{workerv1.EngineVLLM, workerv1.EngineSGLang}
	fuzzKinds         = []workerv1.RoleKind{workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode, workerv1.RoleKindEncode, ""}
	fuzzProtocols     = []workerv1.TransferProtocol{"", workerv1.TransferAuto, workerv1.TransferTCP, workerv1.TransferRDMA, workerv1.TransferEFA, workerv1.TransferCANN, workerv1.TransferROCM}
	fuzzManufacturers = []string{"", "nvidia", "ascend", "amd"}
)

// documentFlags are the arguments whose value is a JSON document the cache step writes.
var documentFlags = []string{"--kv-transfer-config", "--kv-events-config"}

// FuzzConnector renders one role's cache client (kvcache.RenderRole: the --kv-transfer-config
// document, the Mooncake client JSON, SGLang's store and pair flags, the transfer environment) from
// fuzzed inputs: the engine, the role's kind beside a prefill/decode partner, the router, the
// transfer protocol, the InstanceType's manufacturer, and when bound the pool's endpoint, the
// domain's tenant and dtype, the store protocol and the weights' cache prefix, with the role's own
// arguments and variables (one a line). Strings are Kubernetes strings: inputs that are not UTF-8
// are skipped. Properties:
//
//   - the render is deterministic;
//   - every document it writes (the flags' JSON values, the client-config annotation) is valid JSON;
//   - the inputs that must appear do, exactly: the endpoint as master_server_address (vLLM) or
//     MOONCAKE_MASTER (SGLang), the tenant, the store protocol, the dtype as --kv-cache-dtype's value,
//     the cache prefix as cache_prefix (native vLLM);
//   - SGLang's store is configured by the environment alone: neither the extra-config argument nor
//     the config-path variable is rendered, since either replaces that configuration with defaults;
//   - the user wins: no variable the step only defaults, and no flag it does not own, is rendered
//     when the role sets it itself;
//   - a take-over role and an encoder get nothing.
func FuzzConnector(f *testing.F) {
	f.Fuzz(func(t *testing.T, e, kind, protocol, manufacturer byte, routed, bound bool,
		endpoint, tenant, dtype, storeProtocol, cachePrefix, args, userEnv string, takeOver bool) {
		for _, s := range []string{endpoint, tenant, dtype, storeProtocol, cachePrefix, args, userEnv} {
			if !utf8.ValidString(s) {
				t.Skip("not a Kubernetes string")
			}
		}
		eng := fuzzEngines[int(e)%len(fuzzEngines)]
		role := workerv1.ModelDeploymentRole{Name: "r", Kind: fuzzKinds[int(kind)%len(fuzzKinds)], InstanceType: "it", ExtraArgs: lines(args)}
		if takeOver {
			role.Command = []string{"python3", "-m", "serve"}
		}
		for _, name := range lines(userEnv) {
			role.Env = append(role.Env, workerv1.ModelDeploymentEnvVar{Name: name, Value: "user"})
		}
		partner := workerv1.ModelDeploymentRole{Name: "partner", Kind: workerv1.RoleKindDecode, InstanceType: "it"}
		if role.Kind == workerv1.RoleKindDecode {
			partner.Kind = workerv1.RoleKindPrefill
		}
		d := kvcache.Deployment{Engine: eng, Roles: []workerv1.ModelDeploymentRole{role, partner},
			Manufacturers: map[string]string{"it": fuzzManufacturers[int(manufacturer)%len(fuzzManufacturers)]}}
		if p := fuzzProtocols[int(protocol)%len(fuzzProtocols)]; p != "" {
			d.KVTransfer = &workerv1.ModelDeploymentKVTransfer{Protocol: p}
		}
		if routed {
			d.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
		}
		if bound {
			d.Binding = &kvcache.Binding{Endpoint: endpoint, Domain: workerv1.KVCacheDomain{Name: tenant, Dtype: dtype}}
			d.StoreProtocols = map[string]string{"r": storeProtocol}
			d.CachePrefix = cachePrefix
		}

		a := kvcache.RenderRole(d, role)
		if again := kvcache.RenderRole(d, role); !reflect.DeepEqual(a, again) {
			t.Fatalf("the render is not deterministic:\n%+v\n%+v", a, again)
		}
		if role.TakesOver() || role.Kind == workerv1.RoleKindEncode {
			if !reflect.DeepEqual(a, kvcache.Amendment{}) {
				t.Fatalf("a take-over role or an encoder gets %+v", a)
			}
			return
		}
		docs := map[string]map[string]any{}
		for i, arg := range a.Args {
			if slices.Contains(documentFlags, arg) {
				if i+1 >= len(a.Args) {
					t.Fatalf("%s is rendered without its document: %q", arg, a.Args)
				}
				docs[arg] = jsonObject(t, arg, a.Args[i+1])
			}
		}
		client := a.Annotations[kvcache.AnnotationClientConfig]
		if client != "" {
			docs[kvcache.AnnotationClientConfig] = jsonObject(t, kvcache.AnnotationClientConfig, client)
		}
		userWins(t, eng, role, a, bound)
		if !bound {
			if client != "" || hasEnv(a, "MOONCAKE_MASTER") {
				t.Fatalf("an unbound role gets a store client: %+v", a)
			}
			return
		}
		want := storeProtocol
		if want == "" {
			want = "tcp"
		}
		if v, ok := flagValue(a.Args, engine.KVCacheDtypeFlag); !ok || v != dtype {
			t.Fatalf("the dtype %q is rendered as %q (%v)", dtype, v, ok)
		}
		switch eng {
		case workerv1.EngineVLLM:
			c := docs[kvcache.AnnotationClientConfig]
			tenantAt, hasTenant := c["tenant_id"]
			if c["master_server_address"] != endpoint || c["protocol"] != want || hasTenant != (tenant != "") || hasTenant && tenantAt != tenant {
				t.Fatalf("the client JSON %s does not carry endpoint %q, protocol %q and tenant %q", client, endpoint, want, tenant)
			}
			if cachePrefix != "" && d.Manufacturers["it"] != "ascend" && !strings.Contains(mustJSON(t, docs["--kv-transfer-config"]), mustJSON(t, map[string]string{"cache_prefix": cachePrefix})) {
				t.Fatalf("the transfer document %v does not carry cache_prefix %q", docs["--kv-transfer-config"], cachePrefix)
			}
		case workerv1.EngineSGLang:
			if env(a, "MOONCAKE_MASTER") != endpoint || env(a, "MOONCAKE_PROTOCOL") != want || hasEnv(a, "MOONCAKE_TENANT_ID") != (tenant != "") || env(a, "MOONCAKE_TENANT_ID") != tenant {
				t.Fatalf("the store environment %v does not carry endpoint %q, protocol %q and tenant %q", a.Env, endpoint, want, tenant)
			}
			if _, extra := flagValue(a.Args, "--hicache-storage-backend-extra-config"); extra || hasEnv(a, "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH") {
				t.Fatalf("SGLang's store is given a configuration source other than the environment: %v %v", a.Args, a.Env)
			}
		}
	})
}

// userWins: a variable the cache step only defaults (one it does not own) is rendered only when the
// role does not set it, and a flag the step does not own only when the role does not pass it; the
// owned ones admission refuses on the role.
func userWins(t *testing.T, e workerv1.Engine, role workerv1.ModelDeploymentRole, a kvcache.Amendment, bound bool) {
	t.Helper()
	for _, v := range a.Env {
		if engine.OwnedEnvName(e, v.Name) {
			continue
		}
		for _, u := range role.Env {
			if u.Name == v.Name {
				t.Fatalf("%s is rendered though the role sets it", v.Name)
			}
		}
	}
	for _, arg := range a.Args {
		if !strings.HasPrefix(arg, "--") {
			continue
		}
		if _, owned := engine.OwnedArg(e, bound, arg); !owned && engine.HasFlag(e, role.EngineArgs(), arg) {
			t.Fatalf("%s is rendered though the role passes it: %q", arg, role.EngineArgs())
		}
	}
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func jsonObject(t *testing.T, what, doc string) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%s is not a JSON object: %v\n%s", what, err, doc)
	}
	return m
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Trim(string(b), "{}")
}

func flagValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func env(a kvcache.Amendment, name string) string {
	for _, v := range a.Env {
		if v.Name == name {
			return v.Value
		}
	}
	return ""
}

func hasEnv(a kvcache.Amendment, name string) bool {
	for _, v := range a.Env {
		if v.Name == name {
			return true
		}
	}
	return false
}
