package validation_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func deployment(edit func(md *workerv1.ModelDeployment), roles ...workerv1.ModelDeploymentRole) *workerv1.ModelDeployment {
	md := &workerv1.ModelDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "qwen", Namespace: "team-a"},
		Spec: workerv1.ModelDeploymentSpec{
			Model:  workerv1.ModelDeploymentModel{Name: "Qwen/Qwen3-8B"},
			Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM, Image: "vllm/vllm-openai:v0.25.1"},
			Roles:  roles,
		},
	}
	if edit != nil {
		edit(md)
	}
	return md
}

func role(name string, kind workerv1.RoleKind, edits ...func(*workerv1.ModelDeploymentRole)) workerv1.ModelDeploymentRole {
	r := workerv1.ModelDeploymentRole{Name: name, Kind: kind, InstanceType: "h100"}
	for _, e := range edits {
		e(&r)
	}
	return r
}

func args(a ...string) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) { r.ExtraArgs = a }
}

func env(name, value string) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		r.Env = append(r.Env, workerv1.ModelDeploymentEnvVar{Name: name, Value: value})
	}
}

func shape(replicas, size int32) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) { r.Replicas, r.Size = replicas, size }
}

func ports(p ...int32) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		for _, n := range p {
			r.Ports = append(r.Ports, workerv1.ModelDeploymentPort{Port: n})
		}
	}
}

var (
	kvCache = func(md *workerv1.ModelDeployment) {
		md.Spec.KVCache = &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team"}}
	}
	llmd = func(md *workerv1.ModelDeployment) {
		md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
	}
	sglang       = func(md *workerv1.ModelDeployment) { md.Spec.Engine.Name = workerv1.EngineSGLang }
	withArtifact = func(md *workerv1.ModelDeployment) {
		md.Spec.Model.ArtifactRef = &workerv1.LocalReference{Name: "qwen3-8b"}
	}
)

// both applies two edits in order.
func both(a, b func(*workerv1.ModelDeployment)) func(*workerv1.ModelDeployment) {
	return func(md *workerv1.ModelDeployment) { a(md); b(md) }
}

func fabric(n string) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		r.Resources = &workerv1.ModelDeploymentRoleResources{Interface: ptr.To(resource.MustParse(n))}
	}
}

func transfer(p workerv1.TransferProtocol) func(*workerv1.ModelDeployment) {
	return func(md *workerv1.ModelDeployment) {
		md.Spec.KVTransfer = &workerv1.ModelDeploymentKVTransfer{Protocol: p}
	}
}

// refused asserts an error at path whose message carries every part.
func refused(t *testing.T, errs field.ErrorList, path string, parts ...string) {
	t.Helper()
	for _, e := range refusaltest.Checked(t, errs) {
		if e.Field != path {
			continue
		}
		all := true
		for _, p := range parts {
			all = all && strings.Contains(e.Error(), p)
		}
		if all {
			return
		}
	}
	t.Errorf("no refusal at %s with %q; got %v", path, parts, errs)
}

// TestRefusals has one row per refusal row of the spec's table that the schema does not say, with
// the message parts the table names, and beside it the near-miss that is admitted.
func TestRefusals(t *testing.T) {
	long := strings.Repeat("a", 50)
	cases := []struct {
		rule     string
		refused  *workerv1.ModelDeployment
		path     string
		parts    []string
		admitted *workerv1.ModelDeployment
	}{
		{
			rule:     "members that could not be named: the longest name, its length and the three ways out",
			refused:  deployment(nil, role("server-"+strings.Repeat("x", 45), "", shape(12, 4))),
			path:     "spec.roles[0].name",
			parts:    []string{`"qwen-server-` + strings.Repeat("x", 45) + `-r11-m3"`, "(64 characters)", "not a hostname", "shorten the role name, shorten the deployment name, or declare fewer replicas"},
			admitted: deployment(nil, role("server-"+strings.Repeat("x", 45), "", shape(9, 4))),
		},
		{
			rule:     "a role Service name that is not a DNS-1035 label",
			refused:  deployment(nil, role(long+"-"+strings.Repeat("b", 12), "")),
			path:     "spec.roles[0].name",
			parts:    []string{"the role's Service would be named", "(68 characters)", "not a DNS-1035 label", "shorten the role name or the deployment name"},
			admitted: deployment(nil, role(long, "")),
		},
		{
			rule:     "two roles whose Services would be named the same",
			refused:  deployment(nil, role("x", "", shape(2, 2)), role("x-r0", "")),
			path:     "spec.roles",
			parts:    []string{`roles "x" (the Service of its instance 0) and "x-r0" (its Service) would both own the Service "qwen-x-r0"`},
			admitted: deployment(nil, role("x", "", shape(2, 1)), role("x-r0", "")),
		},
		{
			rule: "a rollout cadence annotation naming no cadence",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Annotations = map[string]string{workerv1.AnnotationRolloutCadence: "capacity"}
			}, role("server", "")),
			path:  "metadata.annotations[modeldeployment.gpustack.ai/rollout-cadence]",
			parts: []string{`"capacity"`, "admission (the default", "capacity-preserving (once the replacement is Ready)"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Annotations = map[string]string{workerv1.AnnotationRolloutCadence: "capacity-preserving"}
			}, role("server", "")),
		},
		{
			rule:     "Server beside another kind",
			refused:  deployment(nil, role("server", ""), role("prefill", workerv1.RoleKindPrefill)),
			path:     "spec.roles",
			parts:    []string{"a server serves whole requests by itself, so the combination describes no arrangement"},
			admitted: deployment(nil, role("a", ""), role("b", workerv1.RoleKindServer)),
		},
		{
			rule:     "a kind the engine has no rendering term for: a managed Encode role",
			refused:  deployment(nil, role("e", workerv1.RoleKindEncode), role("d", workerv1.RoleKindDecode)),
			path:     "spec.roles[0].kind",
			parts:    []string{"engine vLLM has no rendering term for kind Encode", "Server, Prefill, Decode", "spec.roles[0].command"},
			admitted: deployment(nil, role("e", workerv1.RoleKindEncode, func(r *workerv1.ModelDeploymentRole) { r.Command = []string{"encode"} }), role("d", workerv1.RoleKindDecode)),
		},
		{
			rule:     "two roles of one non-Server kind",
			refused:  deployment(nil, role("p1", workerv1.RoleKindPrefill), role("p2", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)),
			path:     "spec.roles[1].kind",
			parts:    []string{`roles "p1" and "p2" are both Prefill`, "only Server roles may share a kind"},
			admitted: deployment(nil, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)),
		},
		{
			rule:     "an owned key in extraArgs, in another spelling",
			refused:  deployment(nil, role("s", "", args("--kv_transfer_config", "{}"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"--kv-transfer-config is owned by mdplane on vLLM", "spec.roles[0].command"},
			admitted: deployment(sglang, role("s", "", args("--kv_transfer_config", "{}"))),
		},
		{
			rule:     "an owned name in env",
			refused:  deployment(sglang, role("s", "", env("MOONCAKE_TENANT_ID", "other-team"))),
			path:     "spec.roles[0].env[0].name",
			parts:    []string{"MOONCAKE_TENANT_ID is owned by mdplane on SGLang", "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", env("MOONCAKE_TENANT_ID", "other-team"))),
		},
		{
			rule:     "the GPUSTACK_* names at size 1 too",
			refused:  deployment(nil, role("s", "", env("GPUSTACK_MEMBER_INDEX", "0"))),
			path:     "spec.roles[0].env[0].name",
			parts:    []string{"GPUSTACK_MEMBER_INDEX is owned by mdplane"},
			admitted: deployment(nil, role("s", "", env("GPUSTACK_MEMBER", "0"))),
		},
		{
			rule: "a bare endpoint in spec.kvCache.poolRef.name",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				kvCache(md)
				md.Spec.KVCache.PoolRef.Name = "mooncake-master.team-b:50051"
			}, role("s", "")),
			path:     "spec.kvCache.poolRef.name",
			parts:    []string{`"mooncake-master.team-b:50051"`, "not the name of a KVCachePoolBinding", "never a pool's endpoint or URL", "name the Binding an administrator created"},
			admitted: deployment(kvCache, role("s", "")),
		},
		{
			rule:     "--kv-cache-dtype while spec.kvCache is set",
			refused:  deployment(kvCache, role("s", "", args("--kv-cache-dtype=fp8"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"carries the KVCachePoolBinding's dtype", "declare a Binding with the dtype you need", "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", args("--kv-cache-dtype=fp8"))),
		},
		{
			rule:     "--port disagreeing with the first declared port",
			refused:  deployment(nil, role("s", "", ports(8080), args("--port", "9000"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"--port 9000", "spec.roles[0].ports[0].port", "8080"},
			admitted: deployment(llmd, role("p", workerv1.RoleKindPrefill, ports(8080)), role("d", workerv1.RoleKindDecode, ports(8080), args("--port", "9000"))),
		},
		{
			rule:     "--port disagreeing with the first declared port, in any spelling the engine accepts: --por",
			refused:  deployment(nil, role("s", "", ports(8080), args("--por=9000"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"--port 9000", "spec.roles[0].ports[0].port", "8080"},
			admitted: deployment(nil, role("s", "", ports(8080), args("--p=9000"))), // ambiguous on vLLM: no --port
		},
		{
			rule:     "--port disagreeing with the first declared port, in any spelling the engine accepts: SGLang's --po",
			refused:  deployment(sglang, role("s", "", ports(8080), args("--po", "9000"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"--port 9000", "8080"},
			admitted: deployment(sglang, role("s", "", ports(8080), args("--por", "8080"))),
		},
		{
			rule:     "user arguments are appended, never merged: a direct decoder's own --port may not be the routing proxy's",
			refused:  deployment(llmd, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode, args("--port=8000"))),
			path:     "spec.roles[1].extraArgs",
			parts:    []string{`decoder "d"'s engine --port 8000 would share a port llm-d-router's routing proxy (on 8000)`, "--port 8000", "pass another --port, or none and mdplane puts the engine on 8200"},
			admitted: deployment(llmd, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode, args("--port=9000"))),
		},
		{
			rule:     "user arguments are appended, never merged: nor a declared port, in an abbreviation",
			refused:  deployment(llmd, role("p", workerv1.RoleKindPrefill, ports(8080)), role("d", workerv1.RoleKindDecode, ports(8080, 9000), args("--por", "9000"))),
			path:     "spec.roles[1].extraArgs",
			parts:    []string{"routing proxy (on 8080)", "--port 9000", "[8080 9000]"},
			admitted: deployment(llmd, role("p", workerv1.RoleKindPrefill, ports(8080)), role("d", workerv1.RoleKindDecode, ports(8080, 9000), args("--por", "9100"))),
		},
		{
			rule:     "a declared port mdplane reserves: KV events under llm-d-router",
			refused:  deployment(llmd, role("s", "", ports(8000, 5557))),
			path:     "spec.roles[0].ports[1].port",
			parts:    []string{"port 5557 is reserved", "spec.router names llm-d-router", "[5557 5558]"},
			admitted: deployment(llmd, role("s", "", ports(8000, 5557), func(r *workerv1.ModelDeploymentRole) { r.Command = []string{"serve"} })),
		},
		{
			rule:     "a --port mdplane reserves: the bootstrap port of a prefiller in a cached pair",
			refused:  deployment(kvCache, role("p", workerv1.RoleKindPrefill, args("--port", "8998")), role("d", workerv1.RoleKindDecode)),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"port 8998 is reserved", "[8998]"},
			admitted: deployment(nil, role("p", workerv1.RoleKindPrefill, args("--port", "8998")), role("d", workerv1.RoleKindDecode)),
		},
		{
			rule:     "a model name with a control character, which the router's YAML documents cannot carry (found by FuzzEPP)",
			refused:  deployment(func(md *workerv1.ModelDeployment) { md.Spec.Model.Name = "Qwen/Qwen3-8B\x7f" }, role("s", "")),
			path:     "spec.model.name",
			parts:    []string{"U+007F at byte 13", "not a printable character"},
			admitted: deployment(func(md *workerv1.ModelDeployment) { md.Spec.Model.Name = "Qwen/Qwen3 8B · Instruct" }, role("s", "")),
		},
		{
			rule:     "a parallel degree that cannot be read",
			refused:  deployment(nil, role("s", "", args("-tp", "four"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{`role "s" passes -tp "four"`, "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", args("-tp", "4"))),
		},
		{
			rule:     "a parallel degree past the 32 bits status reports it in (found by FuzzParallelDegrees)",
			refused:  deployment(nil, role("s", "", args("-tp", "3000000000"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{`role "s" passes -tp "3000000000"`, "which is over 2147483647", "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", args("-tp", "2147483647"))),
		},
		{
			rule:     "a VLLM_DP_SIZE past the 32 bits status reports it in (found by FuzzParallelDegrees)",
			refused:  deployment(nil, role("s", "", env("VLLM_DP_SIZE", "2147483648"))),
			path:     "spec.roles[0].env[0].value",
			parts:    []string{`role "s" sets VLLM_DP_SIZE to "2147483648"`, "which is over 2147483647"},
			admitted: deployment(nil, role("s", "", env("VLLM_DP_SIZE", "2147483647"))),
		},
		{
			rule:     "a managed role refuses the multi-port external balance",
			refused:  deployment(nil, role("s", "", args("--data-parallel-multi-port-external-lb", "-dp", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{`role "s" balances its data-parallel ranks over several ports`, "--data-parallel-rank", "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", args("--data-parallel-rank", "$(GPUSTACK_MEMBER_INDEX)", "-dp", "2"))),
		},
		{
			rule:     "a malformed VLLM_DP_SIZE",
			refused:  deployment(nil, role("s", "", env("VLLM_DP_SIZE", "two"))),
			path:     "spec.roles[0].env[0].value",
			parts:    []string{`role "s" sets VLLM_DP_SIZE`, `"two"`, "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", env("VLLM_DP_SIZE", "2"))),
		},
		{
			rule: "a take-over role's unreadable degree is fixed in its command, which it already owns",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Command = []string{"vllm", "serve", "/model", "--tensor-parallel-size", "two"}
			})),
			path:  "spec.roles[0].command",
			parts: []string{`role "s" passes --tensor-parallel-size "two"`, "mdplane reads the parallel degrees, so fix the value"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Command = []string{"vllm", "serve", "/model", "--tensor-parallel-size", "1"}
			})),
		},
		{
			rule:     "a malformed VLLM_DP_SIZE is read where no flag shadows it; a --data-parallel-size that does leaves it unread",
			refused:  deployment(nil, role("s", "", env("VLLM_DP_SIZE", "two"), args("--data-parallel-size", "1"))),
			path:     "spec.roles[0].env[0].value",
			parts:    []string{`role "s" sets VLLM_DP_SIZE`, `"two"`},
			admitted: deployment(nil, role("s", "", env("VLLM_DP_SIZE", "two"), args("--data-parallel-size", "2"))),
		},
		{
			rule: "a fractional interface count",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{Interface: ptr.To(resource.MustParse("1500m"))}
			})),
			path:     "spec.roles[0].resources.interface",
			parts:    []string{"whole, non-negative number"},
			admitted: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferRDMA)(md) }, role("s", "", fabric("2"))),
		},
		{
			rule:     "an interface count with no RDMA or EFA path names the protocol that prevents allocation",
			refused:  deployment(func(md *workerv1.ModelDeployment) { llmd(md); transfer(workerv1.TransferTCP)(md) }, role("p", workerv1.RoleKindPrefill, fabric("1")), role("d", workerv1.RoleKindDecode)),
			path:     "spec.roles[0].resources.interface",
			parts:    []string{`role "p"`, "no effective RDMA or EFA transfer leg uses the requested interfaces", "protocol TCP (spec.kvTransfer.protocol)", "set spec.kvTransfer.protocol to RDMA or EFA"},
			admitted: deployment(func(md *workerv1.ModelDeployment) { llmd(md); transfer(workerv1.TransferRDMA)(md) }, role("p", workerv1.RoleKindPrefill, fabric("1")), role("d", workerv1.RoleKindDecode)),
		},
		{
			rule:    "an interface count on a role given no transfer and no pool",
			refused: deployment(nil, role("s", "", fabric("2"))),
			path:    "spec.roles[0].resources.interface",
			parts:   []string{"given no direct prefill/decode transfer and binds no cache pool; remove the interface request, or bind a cache pool with spec.kvCache and set spec.kvTransfer.protocol to RDMA or EFA"},
			// The second way out, followed.
			admitted: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferRDMA)(md) }, role("s", "", fabric("2"))),
		},
		{
			rule:     "a declared parallel width over the card request names the cards, the degrees and that size does not rescue it",
			refused:  deployment(nil, role("s", "", shape(1, 2), cards("8"), args("--tensor-parallel-size", "8", "-pp", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 16 (tensor-parallel 8 × pipeline-parallel 2)", "per member, over its 8 accelerator(s) per Pod", "size does not rescue it"},
			admitted: deployment(nil, role("s", "", shape(1, 2), cards("16"), args("--tensor-parallel-size", "8", "-pp", "2"))),
		},
		{
			rule:     "a slice is one card's share of the width",
			refused:  deployment(sglang, role("s", "", sliced, args("--tp", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"over its 1 accelerator(s) per Pod"},
			admitted: deployment(sglang, role("s", "", sliced, args("--tp", "1"))),
		},
		{
			rule:     "the width counts the data-parallel ranks a member runs",
			refused:  deployment(nil, role("s", "", cards("4"), args("-tp", "4", "-dp", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 8 (tensor-parallel 4 × pipeline-parallel 1 × data-parallel 2 (-dp))", "over its 4 accelerator(s) per Pod"},
			admitted: deployment(nil, role("s", "", cards("4"), args("-tp", "4", "-dp", "2", "--data-parallel-size-local", "1"))),
		},
		{
			rule:     "the width counts VLLM_DP_SIZE where the flag does not drive data parallelism",
			refused:  deployment(nil, role("s", "", cards("4"), args("-tp", "4"), env("VLLM_DP_SIZE", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 8", "data-parallel 2 (VLLM_DP_SIZE)"},
			admitted: deployment(nil, role("s", "", cards("4"), args("-tp", "4", "--data-parallel-rank", "$(GPUSTACK_MEMBER_INDEX)"), env("VLLM_DP_SIZE", "2"))),
		},
		{
			rule:     "a width from VLLM_DP_SIZE alone names the variable: the role has no command line (a refusal naming no field of the input, the property FuzzDeploymentFromYAML checks)",
			refused:  deployment(nil, role("s", "", cards("2"), env("VLLM_DP_SIZE", "4"))),
			path:     "spec.roles[0].env[0].value",
			parts:    []string{"parallel width of 4", "data-parallel 4 (VLLM_DP_SIZE)", "over its 2 accelerator(s) per Pod"},
			admitted: deployment(nil, role("s", "", cards("4"), env("VLLM_DP_SIZE", "4"))),
		},
		{
			rule:     "the width counts prefill context parallelism; decode context parallelism reuses the tensor ranks",
			refused:  deployment(nil, role("s", "", cards("2"), args("-tp", "2", "-pcp", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 4", "prefill-context-parallel 2 (-pcp)"},
			admitted: deployment(nil, role("s", "", cards("2"), args("-tp", "2", "-dcp", "2"))),
		},
		{
			rule:     "the width counts SGLang --dp unless data-parallel attention splits the tensor ranks",
			refused:  deployment(sglang, role("s", "", cards("4"), args("--tp", "4", "--dp", "2"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 8", "data-parallel 2 (--dp)"},
			admitted: deployment(sglang, role("s", "", cards("4"), args("--tp", "4", "--dp", "2", "--enable-dp-attention"))),
		},
		{
			rule:     "a local data-parallel count of 0 does not reduce the width: it counts as undeclared",
			refused:  deployment(nil, role("s", "", cards("2"), args("-tp", "2", "-dp", "2", "--data-parallel-size-local", "0"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 4 (tensor-parallel 2 × pipeline-parallel 1 × data-parallel 2 (-dp, --data-parallel-size-local 0 placing none of it))", "over its 2 accelerator(s) per Pod", "request at least 4 in spec.roles[0].resources.accelerator"},
			admitted: deployment(nil, role("s", "", cards("2"), args("-tp", "2", "-dp", "2", "--data-parallel-size-local", "1"))),
		},
		{
			rule:     "a local data-parallel count of 0 keeps the tensor ranks in the width",
			refused:  deployment(nil, role("s", "", cards("2"), args("-tp", "4", "-dpl", "0"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 4 (tensor-parallel 4 × pipeline-parallel 1)", "over its 2 accelerator(s) per Pod"},
			admitted: deployment(nil, role("s", "", cards("4"), args("-tp", "4", "-dpl", "0"))),
		},
		{
			rule:     "an SGLang MoE data-parallel degree narrows the tensor ranks instead of adding any",
			refused:  deployment(sglang, role("s", "", cards("4"), args("--tp", "4", "--dp", "2", "--moe-dp-size", "1"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 8", "data-parallel 2 (--dp)"},
			admitted: deployment(sglang, role("s", "", cards("4"), args("--tp", "4", "--dp", "2", "--moe-dp-size", "2"))),
		},
		{
			rule:     "a width overflowing a machine integer is over any card count",
			refused:  deployment(nil, role("s", "", cards("8"), args("-tp", "4294967296", "-pp", "4294967296"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 18446744073709551616"},
			admitted: deployment(nil, role("s", "", cards("8"), args("-tp", "4", "-pp", "2"))),
		},
		{
			rule:     "--nnodes spreads one engine over hosts, one member each; size alone does not",
			refused:  deployment(sglang, role("s", "", shape(1, 2), cards("8"), args("--tp", "16"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{"parallel width of 16", "size does not rescue it", "--nnodes"},
			admitted: deployment(sglang, role("s", "", shape(1, 2), cards("8"), args("--tp", "16", "--nnodes", "2"))),
		},
		{
			rule:     "a --nnodes that cannot be read",
			refused:  deployment(nil, role("s", "", args("--nnodes", "0"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{`role "s" passes --nnodes "0"`, "at least 1", "spec.roles[0].command"},
			admitted: deployment(nil, role("s", "", shape(1, 2), args("--nnodes", "2"))),
		},
		{
			rule: "a slice or a partition for two or more cards",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb", Accelerator: ptr.To(resource.MustParse("2"))}
			})),
			path:  "spec.roles[0].resources.accelerator",
			parts: []string{"a share of one accelerator, not of 2", "request accelerator: 1 with the slice or partition"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorSlicedMemoryPercentage: ptr.To(int32(50)), Accelerator: ptr.To(resource.MustParse("1"))}
			})),
		},
		{
			rule: "a memory slice for two or more cards",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorSlicedMemoryPercentage: ptr.To(int32(50)), Accelerator: ptr.To(resource.MustParse("2"))}
			})),
			path:  "spec.roles[0].resources.accelerator",
			parts: []string{"a share of one accelerator, not of 2", "request accelerator: 1 with the slice or partition"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb", Accelerator: ptr.To(resource.MustParse("1"))}
			})),
		},
		{
			rule:     "an interface count whose only path is a TCP cache client",
			refused:  deployment(kvCache, role("s", "", fabric("1"))),
			path:     "spec.roles[0].resources.interface",
			parts:    []string{`role "s"`, "its only transfer path is its cache pool client, which uses protocol TCP", "set spec.kvTransfer.protocol to RDMA or EFA"},
			admitted: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferEFA)(md) }, role("s", "", fabric("1"))),
		},
		{
			rule: "an interface count on a replaced command beside a pool: it is given no cache client",
			refused: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferRDMA)(md) },
				role("s", "", fabric("1"), func(r *workerv1.ModelDeploymentRole) { r.Command = []string{"serve"} })),
			path:     "spec.roles[0].resources.interface",
			parts:    []string{"its replaced command is given no transfer and no cache client; remove the interface request"},
			admitted: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferRDMA)(md) }, role("s", "", fabric("1"))),
		},
		{
			rule:     "--served-model-name other than spec.model.name, on any managed role",
			refused:  deployment(nil, role("s", "", args("--served-model-name", "qwen"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{`"qwen"`, `must be spec.model.name ("Qwen/Qwen3-8B")`},
			admitted: deployment(nil, role("s", "", args("--served-model-name", "Qwen/Qwen3-8B"))),
		},
		{
			rule:     "with an artifact, a served model name beside spec.model.name (an alias) is refused",
			refused:  deployment(withArtifact, role("s", "", args("--served-model-name", "Qwen/Qwen3-8B", "qwen", "--max-model-len", "4096"))),
			path:     "spec.roles[0].extraArgs[2]",
			parts:    []string{`served as spec.model.name ("Qwen/Qwen3-8B") alone`, `also serves "qwen"`, "remove the alias"},
			admitted: deployment(nil, role("s", "", args("--served-model-name", "Qwen/Qwen3-8B", "qwen", "--max-model-len", "4096"))),
		},
		{
			rule:     "with an artifact, the = spelling names one model: what follows is no alias",
			refused:  deployment(withArtifact, role("s", "", args("--served-model-name", "Qwen/Qwen3-8B", "qwen"))),
			path:     "spec.roles[0].extraArgs[2]",
			parts:    []string{`also serves "qwen"`},
			admitted: deployment(withArtifact, role("s", "", args("--served-model-name=Qwen/Qwen3-8B", "--max-model-len", "4096"))),
		},
		{
			rule:     "--served-model-name in an abbreviation is read as it",
			refused:  deployment(nil, role("s", "", args("--served-model=qwen"))),
			path:     "spec.roles[0].extraArgs",
			parts:    []string{`"qwen"`, "must be spec.model.name"},
			admitted: deployment(nil, role("s", "", args("--served-model=Qwen/Qwen3-8B"))),
		},
		{
			rule:     "with an artifact, vLLM's --model is refused",
			refused:  deployment(withArtifact, role("s", "", args("--model", "Qwen/Qwen3-8B"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"--model names or fetches the weights", "spec.model.artifactRef delivers"},
			admitted: deployment(nil, role("s", "", args("--model", "Qwen/Qwen3-8B"))),
		},
		{
			rule:     "with an artifact, vLLM's --revision in underscores and as a prefix",
			refused:  deployment(withArtifact, role("s", "", args("--max-model-len", "8192", "--revis=main"))),
			path:     "spec.roles[0].extraArgs[2]",
			parts:    []string{"--revision names or fetches the weights"},
			admitted: deployment(withArtifact, role("s", "", args("--max-model-len", "8192"))),
		},
		{
			rule:     "with an artifact, vLLM's --download_dir (underscores) is --download-dir",
			refused:  deployment(withArtifact, role("s", "", args("--download_dir=/data"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"--download-dir names or fetches the weights"},
			admitted: deployment(withArtifact, role("s", "", args("--tokenizer-mode", "auto"))),
		},
		{
			rule:     "with an artifact, vLLM's --tokenizer-revision is refused, its sibling --tokenizer is not",
			refused:  deployment(withArtifact, role("s", "", args("--tokenizer-revision", "main"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"--tokenizer-revision names or fetches the weights"},
			admitted: deployment(withArtifact, role("s", "", args("--tokenizer", "/var/lib/gpustack/model"))),
		},
		{
			rule:     "with an artifact, SGLang's --model-path in an abbreviation",
			refused:  deployment(both(withArtifact, sglang), role("s", "", args("--model-pa", "/x"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"--model-path names or fetches the weights"},
			admitted: deployment(both(withArtifact, sglang), role("s", "", args("--model-impl", "sglang"))),
		},
		{
			rule:     "with an artifact, SGLang's --download-dir; SGLang reads no underscores, so --download_dir names nothing",
			refused:  deployment(both(withArtifact, sglang), role("s", "", args("--download-dir", "/x"))),
			path:     "spec.roles[0].extraArgs[0]",
			parts:    []string{"--download-dir names or fetches the weights"},
			admitted: deployment(both(withArtifact, sglang), role("s", "", args("--download_dir", "/x"))),
		},
		{
			rule:     "with an artifact, the delivery's env names, whatever the source",
			refused:  deployment(both(withArtifact, sglang), role("s", "", env("SGLANG_USE_MODELSCOPE", "true"))),
			path:     "spec.roles[0].env[0].name",
			parts:    []string{"SGLANG_USE_MODELSCOPE is owned by the delivery of spec.model.artifactRef"},
			admitted: deployment(sglang, role("s", "", env("SGLANG_USE_MODELSCOPE", "true"))),
		},
		{
			rule:     "SGLANG_USE_MODELSCOPE is owned only on SGLang: on vLLM it is an ordinary variable",
			refused:  deployment(both(withArtifact, sglang), role("s", "", env("SGLANG_USE_MODELSCOPE", "false"))),
			path:     "spec.roles[0].env[0].name",
			parts:    []string{"SGLANG_USE_MODELSCOPE is owned by the delivery of spec.model.artifactRef", "remove it"},
			admitted: deployment(withArtifact, role("s", "", env("SGLANG_USE_MODELSCOPE", "false"))),
		},
		{
			rule:     "VLLM_USE_MODELSCOPE is owned on every engine",
			refused:  deployment(both(withArtifact, sglang), role("s", "", env("VLLM_USE_MODELSCOPE", "true"))),
			path:     "spec.roles[0].env[0].name",
			parts:    []string{"VLLM_USE_MODELSCOPE is owned by the delivery of spec.model.artifactRef"},
			admitted: deployment(sglang, role("s", "", env("VLLM_USE_MODELSCOPE", "true"))),
		},
		{
			rule:     "with an artifact, HF_TOKEN is refused; HTTPS_PROXY is the role's to set",
			refused:  deployment(withArtifact, role("s", "", env("HF_TOKEN", "x"))),
			path:     "spec.roles[0].env[0].name",
			parts:    []string{"HF_TOKEN is owned"},
			admitted: deployment(withArtifact, role("s", "", env("HTTPS_PROXY", "http://proxy:3128"))),
		},
		{
			rule:     "with an artifact, a volume at the weights' path",
			refused:  deployment(withArtifact, role("s", "", volumes("/var/lib/gpustack/model/"))),
			path:     "spec.roles[0].additionalVolumes[0].mountPath",
			parts:    []string{"/var/lib/gpustack/model is where spec.model.artifactRef's delivery mounts"},
			admitted: deployment(withArtifact, role("s", "", volumes("/var/lib/gpustack/models"))),
		},
		{
			rule:     "with an artifact, a volume inside the download cache's path",
			refused:  deployment(withArtifact, role("s", "", volumes("/var/lib/gpustack/model-cache/hub"))),
			path:     "spec.roles[0].additionalVolumes[0].mountPath",
			parts:    []string{"/var/lib/gpustack/model-cache is where"},
			admitted: deployment(nil, role("s", "", volumes("/var/lib/gpustack/model-cache/hub"))),
		},
		{
			rule: "with an artifact, a volume around both paths, on a take-over role too",
			refused: deployment(withArtifact, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Command = []string{"vllm", "serve", "/var/lib/gpustack/model"}
			}, volumes("/var/lib"))),
			path:  "spec.roles[0].additionalVolumes[0].mountPath",
			parts: []string{"/var/lib/gpustack/model is where"},
			admitted: deployment(withArtifact, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Command = []string{"vllm", "serve", "/var/lib/gpustack/model"}
			}, volumes("/var/lib/gpustack/cache"))),
		},
		{
			rule:     "two additional volumes at one mount path",
			refused:  deployment(nil, role("s", "", volumes("/models", "/models"))),
			path:     "spec.roles[0].additionalVolumes[1].mountPath",
			parts:    []string{`"/models"`, "already mounted by spec.roles[0].additionalVolumes[0]", "mount this one elsewhere"},
			admitted: deployment(nil, role("s", "", volumes("/models", "/models-2"))),
		},
		{
			rule:     "a role named router beside a router: both claim <md>-router",
			refused:  deployment(llmd, role("router", "")),
			path:     "spec.roles",
			parts:    []string{`role "router" (its Service) and spec.router`, `"qwen-router"`, "rename the role"},
			admitted: deployment(nil, role("router", "")),
		},
		{
			rule:     "routed roles on different serving ports",
			refused:  deployment(llmd, role("a", ""), role("b", "", ports(9000))),
			path:     "spec.roles[1].ports[0].port",
			parts:    []string{`role "b" serves on port 9000 and role "a" on port 8000`, "spec.router (llm-d-router)", "serve all roles on one port"},
			admitted: deployment(llmd, role("a", "", ports(9000)), role("b", "", ports(9000))),
		},
		{
			rule:     "routed roles on different serving ports, one moved by --port",
			refused:  deployment(llmd, role("a", ""), role("b", "", args("--port", "9000"))),
			path:     "spec.roles[1].extraArgs",
			parts:    []string{`role "b" serves on port 9000`},
			admitted: deployment(nil, role("a", ""), role("b", "", args("--port", "9000"))),
		},
		{
			rule:     "routed roles on different serving ports, the one on the default port named by itself: it has no port field (found by FuzzUpdateRules)",
			refused:  deployment(llmd, role("a", "", args("--port", "9000")), role("b", "")),
			path:     "spec.roles[1]",
			parts:    []string{`role "b" serves on port 8000 and role "a" on port 9000`},
			admitted: deployment(llmd, role("a", "", args("--port", "8000")), role("b", "")),
		},
		{
			rule: "a routed role serving on UDP",
			refused: deployment(llmd, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Ports = []workerv1.ModelDeploymentPort{{Port: 8000, Protocol: corev1.ProtocolUDP}}
			})),
			path:  "spec.roles[0].ports[0].protocol",
			parts: []string{`role "s" serves on UDP port 8000`, "over HTTP on TCP", "declare a TCP serving port first"},
			admitted: deployment(llmd, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Ports = []workerv1.ModelDeploymentPort{{Port: 8000, Protocol: corev1.ProtocolTCP}, {Port: 8000, Protocol: corev1.ProtocolUDP}}
			})),
		},
		{
			rule: "a partition profile together with a slice percentage",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb", AcceleratorSlicedMemoryPercentage: ptr.To(int32(10))}
			})),
			path:  "spec.roles[0].resources.acceleratorPartitionedProfile",
			parts: []string{"acceleratorSlicedMemoryPercentage", "acceleratorSlicedCoresPercentage", "one accelerator cannot serve both"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb"}
			})),
		},
		{
			rule: "kubernetes.io/hostname as the required level",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Topology = &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "kubernetes.io/hostname"}
			})),
			path:  "spec.roles[0].topology.requiredLevel",
			parts: []string{"implicit"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Topology = &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "topology.gpustack.ai/rack"}
			})),
		},
		{
			rule: "a required level that is not a label key",
			refused: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Topology = &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "rack level"}
			})),
			path:  "spec.roles[0].topology.requiredLevel",
			parts: []string{"node label key"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Topology = &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "zone"}
			})),
		},
		{
			rule: "a router that does not front the engine",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterSGLangGateway}
			}, role("s", "")),
			path:     "spec.router.name",
			parts:    []string{"sglang-gateway fronts [SGLang], not vLLM"},
			admitted: deployment(llmd, role("s", "")),
		},
		{
			rule: "a flag mdplane renders on the router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterVLLM, ExtraArgs: []string{"--port=9000"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[0]",
			parts: []string{"--port is rendered by mdplane on vllm-router"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterVLLM, ExtraArgs: []string{"--policy", "round_robin"}}
			}, role("s", "")),
		},
		{
			rule: "--endpoint-selector, which mdplane renders on llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--endpoint-selector=app=x"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[1]",
			parts: []string{"--endpoint-selector is rendered by mdplane on llm-d-router", "--endpoint-selector=app=x", "remove it from spec.router.extraArgs"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--endpoint-selector-v2=app=x"}}
			}, role("s", "")),
		},
		{
			rule: "--endpoint-target-ports, which mdplane renders on llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--endpoint-target-ports=9000"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[1]",
			parts: []string{"--endpoint-target-ports is rendered by mdplane on llm-d-router", "--endpoint-target-ports=9000", "remove it from spec.router.extraArgs"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--endpoint-target-port-names=http"}}
			}, role("s", "")),
		},
		{
			rule: "--config-file, which mdplane renders on llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--config-file=/etc/epp.yaml"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[1]",
			parts: []string{"--config-file is rendered by mdplane on llm-d-router", "--config-file=/etc/epp.yaml", "remove it from spec.router.extraArgs"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--config-text=plugins: []"}}
			}, role("s", "")),
		},
		{
			rule: "--secure-serving, which mdplane renders on llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--secure-serving=true"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[1]",
			parts: []string{"--secure-serving is rendered by mdplane on llm-d-router", "--secure-serving=true", "remove it from spec.router.extraArgs"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--secure-serving-cert=/tls.crt"}}
			}, role("s", "")),
		},
		{
			rule: "--grpc-health-port, which mdplane renders on llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--grpc-health-port=9100"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[1]",
			parts: []string{"--grpc-health-port is rendered by mdplane on llm-d-router", "--grpc-health-port=9100", "remove it from spec.router.extraArgs"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--grpc-port=9102"}}
			}, role("s", "")),
		},
		{
			rule: "--metrics-endpoint-auth, which mdplane renders on llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--metrics-endpoint-auth=true"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[1]",
			parts: []string{"--metrics-endpoint-auth is rendered by mdplane on llm-d-router", "--metrics-endpoint-auth=true", "remove it from spec.router.extraArgs"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"--v=4", "--metrics-endpoint=/metrics"}}
			}, role("s", "")),
		},
		{
			rule: "a single-dash owned flag on llm-d-router, which Go's flag parsing reads as the same flag",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"-config-file", "/etc/epp.yaml"}}
			}, role("s", "")),
			path:  "spec.router.extraArgs[0]",
			parts: []string{"--config-file is rendered by mdplane on llm-d-router"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, ExtraArgs: []string{"-v", "4"}}
			}, role("s", "")),
		},
		{
			rule: "a disaggregation threshold on a router other than llm-d-router",
			refused: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterVLLM, DisaggregationThresholdTokens: ptr.To(int32(8))}
			}, role("s", "")),
			path:  "spec.router.disaggregationThresholdTokens",
			parts: []string{"only llm-d-router"},
			admitted: deployment(func(md *workerv1.ModelDeployment) {
				md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD, DisaggregationThresholdTokens: ptr.To(int32(8))}
			}, role("s", "")),
		},
		{
			rule:     "a non-positive shmSize",
			refused:  deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) { r.ShmSize = ptr.To(resource.MustParse("0")) })),
			path:     "spec.roles[0].shmSize",
			parts:    []string{"positive quantity"},
			admitted: deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) { r.ShmSize = ptr.To(resource.MustParse("1Gi")) })),
		},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			refused(t, validation.ValidateCreate(tc.refused, validation.Cluster{}), tc.path, tc.parts...)
			assert.Empty(t, validation.ValidateCreate(tc.admitted, validation.Cluster{}), "the near-miss is admitted")
		})
	}
}

func h100(edit func(*workerv1.InstanceType)) map[string]*workerv1.InstanceType {
	it := &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec: workerv1.InstanceTypeSpec{Acceleratable: true, AcceleratorGroup: "nvidia-h100"},
		Status: workerv1.InstanceTypeStatus{Detail: &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"},
			Accelerator: &workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("16"))}}}
	if edit != nil {
		edit(it)
	}
	return map[string]*workerv1.InstanceType{"h100": it}
}

func volumes(paths ...string) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		for _, p := range paths {
			r.AdditionalVolumes = append(r.AdditionalVolumes, workerv1.ModelDeploymentAdditionalVolume{MountPath: p,
				EmptyDir: &corev1.EmptyDirVolumeSource{}})
		}
	}
}

func cards(n string) func(*workerv1.ModelDeploymentRole) {
	return func(r *workerv1.ModelDeploymentRole) {
		r.Resources = &workerv1.ModelDeploymentRoleResources{Accelerator: ptr.To(resource.MustParse(n))}
	}
}

func sliced(r *workerv1.ModelDeploymentRole) {
	r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorSlicedMemoryPercentage: ptr.To(int32(25))}
}

func TestInstanceTypeRefusals(t *testing.T) {
	slicing := func(it *workerv1.InstanceType) {
		it.Status.Detail.SlicedDetail = &workerv1.SlicedDetail{Logical: &workerv1.LogicalSlicing{Count: 4},
			Physical: &workerv1.PhysicalPartitioning{Count: 7, Profiles: []workerv1.ProfileCount{{Name: "1g.10gb", Count: 7}}}}
	}
	cases := []struct {
		rule    string
		md      *workerv1.ModelDeployment
		types   map[string]*workerv1.InstanceType
		path    string
		parts   []string
		allowed map[string]*workerv1.InstanceType
	}{
		{"a whole-card count over the type's capacity names the capacity",
			deployment(nil, role("s", "", cards("32"))), h100(nil), "spec.roles[0].resources.accelerator",
			[]string{"16 whole accelerators in all"}, h100(func(it *workerv1.InstanceType) { it.Status.Accelerator.Capacity = ptr.To(resource.MustParse("32")) })},
		{"a whole-card count over what an autoscaled type grows to names the annotation",
			deployment(nil, role("s", "", cards("64"))), h100(func(it *workerv1.InstanceType) {
				it.Annotations = map[string]string{workerv1.AnnotationAutoscaledCapacity: "32"}
			}), "spec.roles[0].resources.accelerator",
			[]string{"grows to 32 whole accelerators in all (annotation worker.gpustack.ai/autoscaled-capacity)"}, h100(func(it *workerv1.InstanceType) {
				it.Annotations = map[string]string{workerv1.AnnotationAutoscaledCapacity: "64"}
			})},
		{"a slice on a type that offers no slicing",
			deployment(nil, role("s", "", sliced)), h100(nil), "spec.roles[0].resources",
			[]string{"offers no logical slicing"}, h100(slicing)},
		{"a partition profile outside the type's inventory lists the offered ones",
			deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "3g.40gb"}
			})), h100(slicing), "spec.roles[0].resources.acceleratorPartitionedProfile",
			[]string{`InstanceType "h100" offers no partition profile "3g.40gb"`, `(1g.10gb)`}, h100(func(it *workerv1.InstanceType) {
				slicing(it)
				it.Status.Detail.SlicedDetail.Physical.Profiles = append(it.Status.Detail.SlicedDetail.Physical.Profiles, workerv1.ProfileCount{Name: "3g.40gb", Count: 2})
			})},
		{"a partition profile on a manufacturer without a partition kind names the ones that partition; the same request on nvidia is admitted",
			deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
				r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb"}
			})), h100(func(it *workerv1.InstanceType) {
				slicing(it)
				it.Status.Detail.Manufacturer = workerv1.ManufacturerAscend
			}), "spec.roles[0].resources.acceleratorPartitionedProfile",
			[]string{`manufacturer "ascend", which has no partition kind`, "request whole accelerators or a slice", "(hygon, nvidia, thead)"}, h100(slicing)},
		{"accelerator: 0 on an acceleratable type another role shares",
			deployment(nil, role("a", "", cards("0")), role("b", "")), h100(nil), "spec.roles[0].resources.accelerator",
			[]string{"acceleratable InstanceType \"h100\"", "request at least one accelerator, or move the CPU-only role"},
			h100(func(it *workerv1.InstanceType) { it.Spec.Acceleratable = false })},
		{"Prefill and Decode both slicing one accelerator group names both roles and the slice field",
			deployment(nil, role("p", workerv1.RoleKindPrefill, sliced), role("d", workerv1.RoleKindDecode, sliced)), h100(slicing), "spec.roles[1].resources.acceleratorSlicedMemoryPercentage",
			[]string{`the Prefill role "p" (spec.roles[0].resources.acceleratorSlicedMemoryPercentage)`, `the Decode role "d"`, "both request a logical slice", "nvidia-h100"}, nil},
		{"a type that does not exist",
			deployment(nil, role("s", "")), map[string]*workerv1.InstanceType{}, "spec.roles[0].instanceType",
			[]string{`InstanceType "h100" does not exist`}, h100(nil)},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			refused(t, validation.ValidateCreate(tc.md, validation.Cluster{InstanceTypes: tc.types}), tc.path, tc.parts...)
			if tc.allowed != nil {
				assert.Empty(t, validation.ValidateCreate(tc.md, validation.Cluster{InstanceTypes: tc.allowed}))
			}
		})
	}
}

func TestExemptions(t *testing.T) {
	t.Run("a rule that reads an InstanceType declines while the deployment is being deleted", func(t *testing.T) {
		md := deployment(func(md *workerv1.ModelDeployment) { md.DeletionTimestamp = &metav1.Time{} }, role("s", ""))
		assert.Empty(t, validation.ValidateUpdate(md, md, validation.Cluster{InstanceTypes: map[string]*workerv1.InstanceType{}}))
	})
	t.Run("a role the stored object already had keeps its Service name", func(t *testing.T) {
		stored := deployment(nil, role(strings.Repeat("a", 50)+"-"+strings.Repeat("b", 12), ""))
		edited := stored.DeepCopy()
		edited.Spec.Roles[0].Replicas = 3
		assert.Empty(t, validation.ValidateUpdate(edited, stored, validation.Cluster{}))
	})
	t.Run("a stored managed Encode role stays editable; dropping a take-over Encode role's command is judged", func(t *testing.T) {
		stored := deployment(nil, role("e", workerv1.RoleKindEncode), role("d", workerv1.RoleKindDecode))
		scaled := stored.DeepCopy()
		scaled.Spec.Roles[0].Replicas = 2
		assert.Empty(t, validation.ValidateUpdate(scaled, stored, validation.Cluster{}))
		takeOver := stored.DeepCopy()
		takeOver.Spec.Roles[0].Command = []string{"encode"}
		managed := takeOver.DeepCopy()
		managed.Spec.Roles[0].Command = nil
		refused(t, validation.ValidateUpdate(managed, takeOver, validation.Cluster{}), "spec.roles[0].kind", "no rendering term for kind Encode")
	})
	t.Run("a stored model name is judged again only when an edit changes it", func(t *testing.T) {
		stored := deployment(func(md *workerv1.ModelDeployment) { md.Spec.Model.Name = "m\u0085" }, role("s", ""))
		scaled := stored.DeepCopy()
		scaled.Spec.Roles[0].Replicas = 4
		assert.Empty(t, validation.ValidateUpdate(scaled, stored, validation.Cluster{}))
		renamed := stored.DeepCopy()
		renamed.Spec.Model.Name = "m\u0086"
		refused(t, validation.ValidateUpdate(renamed, stored, validation.Cluster{}), "spec.model.name", "U+0086")
	})
	t.Run("a stored Binding name is judged again only when an edit changes it", func(t *testing.T) {
		stored := deployment(func(md *workerv1.ModelDeployment) {
			kvCache(md)
			md.Spec.KVCache.PoolRef.Name = "Team_DRAM"
		}, role("s", ""))
		scaled := stored.DeepCopy()
		scaled.Spec.Roles[0].Replicas = 4
		assert.Empty(t, validation.ValidateUpdate(scaled, stored, validation.Cluster{}))
		renamed := stored.DeepCopy()
		renamed.Spec.KVCache.PoolRef.Name = "http://mooncake:50051"
		refused(t, validation.ValidateUpdate(renamed, stored, validation.Cluster{}), "spec.kvCache.poolRef.name", "not the name of a KVCachePoolBinding")
	})
	t.Run("a stored --port is judged only when an edit changes the ports or arguments", func(t *testing.T) {
		stored := deployment(nil, role("s", "", ports(8080), args("--port", "9000")))
		scaled := stored.DeepCopy()
		scaled.Spec.Roles[0].Replicas = 4
		assert.Empty(t, validation.ValidateUpdate(scaled, stored, validation.Cluster{}))
		edited := stored.DeepCopy()
		edited.Spec.Roles[0].ExtraArgs = []string{"--port", "9001"}
		refused(t, validation.ValidateUpdate(edited, stored, validation.Cluster{}), "spec.roles[0].extraArgs", "--port 9001")
	})
	t.Run("a stored interface request is judged again only when its own inputs move", func(t *testing.T) {
		stored := deployment(nil, role("s", "", fabric("2")))
		scaled := stored.DeepCopy()
		scaled.Spec.Roles[0].Replicas = 4
		assert.Empty(t, validation.ValidateUpdate(scaled, stored, validation.Cluster{}))
		raised := stored.DeepCopy()
		raised.Spec.Roles[0].Resources.Interface = ptr.To(resource.MustParse("4"))
		refused(t, validation.ValidateUpdate(raised, stored, validation.Cluster{}), "spec.roles[0].resources.interface", "no effective RDMA or EFA transfer leg uses the requested interfaces")
	})
	t.Run("a stored width is judged again only when its arguments or cards move", func(t *testing.T) {
		stored := deployment(nil, role("s", "", cards("4"), args("-tp", "8")))
		scaled := stored.DeepCopy()
		scaled.Spec.Roles[0].Replicas = 4
		assert.Empty(t, validation.ValidateUpdate(scaled, stored, validation.Cluster{}))
		edited := stored.DeepCopy()
		edited.Spec.Roles[0].ExtraArgs = []string{"-tp", "8", "--max-model-len", "8192"}
		refused(t, validation.ValidateUpdate(edited, stored, validation.Cluster{}), "spec.roles[0].extraArgs", "parallel width of 8")
	})
	t.Run("an unset card count is the mutating default: one card on an acceleratable type, none judged elsewhere", func(t *testing.T) {
		md := deployment(nil, role("s", "", args("-tp", "2")))
		refused(t, validation.ValidateCreate(md, validation.Cluster{InstanceTypes: h100(nil)}), "spec.roles[0].extraArgs", "over its 1 accelerator(s)")
		assert.Empty(t, validation.ValidateCreate(md, validation.Cluster{InstanceTypes: h100(func(it *workerv1.InstanceType) { it.Spec.Acceleratable = false })}))
	})
	t.Run("the update that clears the finalizer of a deployment being deleted is admitted whatever its stored spec holds", func(t *testing.T) {
		stored := deployment(func(md *workerv1.ModelDeployment) {
			kvCache(md)
			md.DeletionTimestamp = &metav1.Time{}
			md.Finalizers = []string{"finalizer.apiextensions.crossplane.io"}
		}, role("s", "", args("--kv-cache-dtype=fp8")))
		released := stored.DeepCopy()
		released.Finalizers = nil
		assert.Empty(t, validation.ValidateUpdate(released, stored, validation.Cluster{}))
		// Near-misses: an edit of the spec in the deletion window, or a finalizer change on a live
		// object, is judged as any update.
		edited := released.DeepCopy()
		edited.Spec.Roles[0].Replicas = 2
		refused(t, validation.ValidateUpdate(edited, stored, validation.Cluster{}), "spec.roles[0].extraArgs[0]", "carries the KVCachePoolBinding's dtype")
		live, liveStored := released.DeepCopy(), stored.DeepCopy()
		live.DeletionTimestamp, liveStored.DeletionTimestamp = nil, nil
		refused(t, validation.ValidateUpdate(live, liveStored, validation.Cluster{}), "spec.roles[0].extraArgs[0]", "carries the KVCachePoolBinding's dtype")
	})
	t.Run("adding a router that makes a passed --port a reserved one is refused", func(t *testing.T) {
		stored := deployment(nil, role("s", "", args("--port=5557")))
		routed := stored.DeepCopy()
		llmd(routed)
		refused(t, validation.ValidateUpdate(routed, stored, validation.Cluster{}), "spec.roles[0].extraArgs", "port 5557 is reserved", "spec.router names llm-d-router", "[5557 5558]")
		clear := deployment(nil, role("s", "", args("--port=5559")))
		clearRouted := clear.DeepCopy()
		llmd(clearRouted)
		assert.Empty(t, validation.ValidateUpdate(clearRouted, clear, validation.Cluster{}))
	})
	t.Run("adding a router that puts a decoder's own --port on its routing proxy's port is refused", func(t *testing.T) {
		stored := deployment(nil, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode, args("--port=8000")))
		routed := stored.DeepCopy()
		llmd(routed)
		refused(t, validation.ValidateUpdate(routed, stored, validation.Cluster{}), "spec.roles[1].extraArgs", "routing proxy", "--port 8000")
		clear := deployment(nil, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode, args("--port=9000")))
		clearRouted := clear.DeepCopy()
		llmd(clearRouted)
		assert.Empty(t, validation.ValidateUpdate(clearRouted, clear, validation.Cluster{}))
	})
	t.Run("a stored --port collision is left alone until an edit changes it", func(t *testing.T) {
		stored := deployment(llmd, role("s", "", args("--port=5557")))
		untouched := stored.DeepCopy()
		untouched.Spec.Roles[0].ExtraArgs = []string{"--port", "5557", "--max-model-len", "8192"}
		assert.Empty(t, validation.ValidateUpdate(untouched, stored, validation.Cluster{}))
		moved := stored.DeepCopy()
		moved.Spec.Roles[0].ExtraArgs = []string{"--port=5558"}
		refused(t, validation.ValidateUpdate(moved, stored, validation.Cluster{}), "spec.roles[0].extraArgs", "port 5558 is reserved")
	})
	t.Run("a stored width is judged again when VLLM_DP_SIZE moves", func(t *testing.T) {
		stored := deployment(nil, role("s", "", cards("4"), args("-tp", "4")))
		edited := stored.DeepCopy()
		edited.Spec.Roles[0].Env = []workerv1.ModelDeploymentEnvVar{{Name: "VLLM_DP_SIZE", Value: "2"}}
		refused(t, validation.ValidateUpdate(edited, stored, validation.Cluster{}), "spec.roles[0].extraArgs", "parallel width of 8")
	})
	t.Run("one partitioned card on a type with no whole cards is admitted; a whole card there is not", func(t *testing.T) {
		partitionsOnly := h100(func(it *workerv1.InstanceType) {
			it.Status.Accelerator.Capacity = ptr.To(resource.MustParse("0"))
			it.Status.Detail.SlicedDetail = &workerv1.SlicedDetail{
				Physical: &workerv1.PhysicalPartitioning{Count: 7, Profiles: []workerv1.ProfileCount{{Name: "1g.10gb", Count: 7}}}}
			it.Status.AcceleratorPartitioned = &workerv1.PartitionedCapacityView{CapacityView: workerv1.CapacityView{Capacity: ptr.To(resource.MustParse("7"))}}
		})
		partition := deployment(nil, role("s", "", func(r *workerv1.ModelDeploymentRole) {
			r.Resources = &workerv1.ModelDeploymentRoleResources{AcceleratorPartitionedProfile: "1g.10gb", Accelerator: ptr.To(resource.MustParse("1"))}
		}))
		assert.Empty(t, validation.ValidateCreate(partition, validation.Cluster{InstanceTypes: partitionsOnly}))
		whole := deployment(nil, role("s", "", cards("1")))
		refused(t, validation.ValidateCreate(whole, validation.Cluster{InstanceTypes: partitionsOnly}), "spec.roles[0].resources.accelerator", "0 whole accelerators in all")
	})
	t.Run("a type with no capacity in any view (no nodes yet) is no limit: the deployment waits for them", func(t *testing.T) {
		empty := h100(func(it *workerv1.InstanceType) { it.Status.Accelerator.Capacity = ptr.To(resource.MustParse("0")) })
		assert.Empty(t, validation.ValidateCreate(deployment(nil, role("s", "", cards("8"))), validation.Cluster{InstanceTypes: empty}))
	})
	t.Run("extraArgs beside a take-over command is inert", func(t *testing.T) {
		md := deployment(nil, role("s", "", args("--kv-transfer-config", "{}"), func(r *workerv1.ModelDeploymentRole) { r.Command = []string{"vllm", "serve", "x"} }))
		assert.Empty(t, validation.ValidateCreate(md, validation.Cluster{}))
	})
}

func BenchmarkValidateTenRoles(b *testing.B) {
	var roles []workerv1.ModelDeploymentRole
	for i := range 10 {
		roles = append(roles, role("server-"+string(rune('a'+i)), "", shape(1024, 8), cards("8"), args("-tp", "8", "--max-model-len", "32768"),
			env("NCCL_DEBUG", "WARN"), ports(8000)))
	}
	md := deployment(kvCache, roles...)
	c := validation.Cluster{InstanceTypes: h100(nil)}
	b.ReportAllocs()
	for b.Loop() {
		_ = validation.ValidateCreate(md, c)
	}
}

// TestAWayOutIsOneTheRoleCanTake: a refusal never offers a role what it already has: a take-over
// role is not told to take its command line over, nor a role with no transfer to set the
// protocol alone.
func TestAWayOutIsOneTheRoleCanTake(t *testing.T) {
	takeOver := func(r *workerv1.ModelDeploymentRole) {
		r.Command = []string{"vllm", "serve", "/model", "--tensor-parallel-size", "two"}
	}
	for _, e := range validation.ValidateCreate(deployment(nil, role("s", "", takeOver, env("VLLM_DP_SIZE", "x"))), validation.Cluster{}) {
		assert.NotContains(t, e.Error(), "take the whole command line over", "a take-over role")
	}
	for _, e := range validation.ValidateCreate(deployment(nil, role("s", "", fabric("2"))), validation.Cluster{}) {
		assert.NotContains(t, e.Error(), "RDMA or EFA for its transfer or cache client", "a lone role has neither")
	}
}
