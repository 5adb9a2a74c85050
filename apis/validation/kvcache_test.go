package validation_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/validation"
	"github.com/mdplane/mdplane/apis/validation/refusaltest"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// chain is a resolved cache chain whose backend has a backend-wide protocol and one group per
// override ("" inherits).
func chain(wide string, groups ...string) *validation.KVCacheChain {
	b := &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: "mooncake"},
		Spec: workerv1.KVCacheBackendSpec{Transport: workerv1.KVCacheBackendTransport{Protocol: wide}}}
	if len(groups) > 0 {
		b.Spec.Connection.Managed = &workerv1.KVCacheBackendManaged{}
		for _, g := range groups {
			m := workerv1.KVCacheBackendMember{}
			if g != "" {
				m.Transport = &workerv1.KVCacheBackendMemberTransport{Protocol: g}
			}
			b.Spec.Connection.Managed.Members = append(b.Spec.Connection.Managed.Members, m)
		}
	}
	return &validation.KVCacheChain{
		Binding: &workerv1.KVCachePoolBinding{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "team-a"}},
		Pool:    &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: "dram"}},
		Backend: b,
	}
}

func onAscend(c validation.Cluster) validation.Cluster {
	c.InstanceTypes = h100(func(it *workerv1.InstanceType) { it.Status.Detail.Manufacturer = "ascend" })
	return c
}

func TestCacheChainRefusals(t *testing.T) {
	mixed := chain(workerv1.TransportTCP, "", workerv1.TransportRDMA)
	noPool := chain(workerv1.TransportRDMA)
	noPool.Pool, noPool.Backend = nil, nil
	noBackend := chain(workerv1.TransportRDMA)
	noBackend.Backend = nil
	cases := []struct {
		rule       string
		md         *workerv1.ModelDeployment
		refusedIn  validation.Cluster
		path       string
		parts      []string
		admittedIn validation.Cluster
		admittedMD *workerv1.ModelDeployment // defaults to md
	}{
		{rule: "mixed group protocols are refused for an engine without a required transport",
			md: deployment(kvCache, role("s", "")), refusedIn: validation.Cluster{KVCache: mixed},
			path:       "spec.kvCache.poolRef.name",
			parts:      []string{"Forbidden", `KVCachePoolBinding "team"`, `KVCachePool "dram"`, `KVCacheBackend "mooncake"`, "TransportUnsupported", "vLLM's cache client", "tcp, rdma", "NotSupportedTransport", "one common protocol", "or bind a pool with one effective transport"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportRDMA, "", workerv1.TransportRDMA)}},
		{rule: "mixed group protocols: vLLM-Ascend is judged at render, not admission",
			md: deployment(kvCache, role("s", "")), refusedIn: validation.Cluster{KVCache: mixed},
			path: "spec.kvCache.poolRef.name", parts: []string{"TransportUnsupported"},
			admittedIn: onAscend(validation.Cluster{KVCache: chain(workerv1.TransportTCP, "", workerv1.TransportCANN)})},
		{rule: "mixed group protocols: an unread chain runs no check",
			md: deployment(kvCache, role("s", "")), refusedIn: validation.Cluster{KVCache: mixed},
			path: "spec.kvCache.poolRef.name", parts: []string{"TransportUnsupported"},
			admittedIn: validation.Cluster{KVCache: noBackend}},
		{rule: "interfaces need the cache binding to resolve",
			md: deployment(kvCache, role("s", "", fabric("1"))), refusedIn: validation.Cluster{KVCache: &validation.KVCacheChain{}},
			path:       "spec.roles[0].resources.interface",
			parts:      []string{"cache binding must resolve before requesting interfaces", `KVCachePoolBinding "team"`, "remove the interface request"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportRDMA)}},
		{rule: "interfaces need the cache pool to resolve",
			md: deployment(kvCache, role("s", "", fabric("1"))), refusedIn: validation.Cluster{KVCache: noPool},
			path: "spec.roles[0].resources.interface", parts: []string{"cache pool must resolve before requesting interfaces"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportEFA)}},
		{rule: "interfaces need the cache backend to resolve",
			md: deployment(kvCache, role("s", "", fabric("1"))), refusedIn: validation.Cluster{KVCache: noBackend},
			path: "spec.roles[0].resources.interface", parts: []string{"cache backend must resolve before requesting interfaces"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportRDMA)}},
		{rule: "interfaces are judged by the backend's transport, not spec.kvTransfer",
			md:        deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferRDMA)(md) }, role("s", "", fabric("1"))),
			refusedIn: validation.Cluster{KVCache: chain(workerv1.TransportTCP)},
			path:      "spec.roles[0].resources.interface",
			parts: []string{`role "s"`, "no effective RDMA or EFA transfer leg uses the requested interfaces",
				`its only transfer path is its cache pool client, which uses protocol TCP (KVCacheBackend "mooncake")`, `KVCacheBackend "mooncake"'s spec.transport.protocol`},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportRDMA)}},
		{rule: "interfaces on a backend whose groups use conflicting protocols",
			md: deployment(kvCache, role("s", "", fabric("1"))), refusedIn: validation.Cluster{KVCache: chain(workerv1.TransportRDMA, "", workerv1.TransportEFA)},
			path:       "spec.roles[0].resources.interface",
			parts:      []string{"cache member groups use conflicting protocols: rdma, efa", `role "s"`, "remove the interface request"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportEFA, "", workerv1.TransportEFA)}},
		{rule: "interfaces where the cache and direct-transfer legs use different fabrics",
			md: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); llmd(md); transfer(workerv1.TransferEFA)(md) },
				role("p", workerv1.RoleKindPrefill, fabric("1")), role("d", workerv1.RoleKindDecode)),
			refusedIn:  validation.Cluster{KVCache: chain(workerv1.TransportRDMA)},
			path:       "spec.roles[0].resources.interface",
			parts:      []string{"cache and direct-transfer legs use RDMA and EFA", `role "p"`, "set spec.kvTransfer.protocol to RDMA"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportEFA)}},
		{rule: "interfaces: a TCP store beside an RDMA direct leg leave the leg to allocate for",
			md: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); llmd(md); transfer(workerv1.TransferTCP)(md) },
				role("p", workerv1.RoleKindPrefill, fabric("1")), role("d", workerv1.RoleKindDecode)),
			refusedIn:  validation.Cluster{KVCache: chain(workerv1.TransportTCP)},
			path:       "spec.roles[0].resources.interface",
			parts:      []string{"its prefill/decode transfer uses protocol TCP (spec.kvTransfer.protocol) and its cache client uses protocol TCP"},
			admittedIn: validation.Cluster{KVCache: chain(workerv1.TransportTCP)},
			admittedMD: deployment(func(md *workerv1.ModelDeployment) { kvCache(md); llmd(md); transfer(workerv1.TransferRDMA)(md) },
				role("p", workerv1.RoleKindPrefill, fabric("1")), role("d", workerv1.RoleKindDecode))},
		{rule: "interfaces on vLLM-Ascend: its direct leg has no protocol of ours, so an RDMA spec.kvTransfer allocates nothing",
			md: deployment(func(md *workerv1.ModelDeployment) { llmd(md); transfer(workerv1.TransferRDMA)(md) },
				role("p", workerv1.RoleKindPrefill, fabric("1")), role("d", workerv1.RoleKindDecode)),
			refusedIn: onAscend(validation.Cluster{}),
			path:      "spec.roles[0].resources.interface",
			parts: []string{`Invalid value: "1"`, `role "p"`, "no effective RDMA or EFA transfer leg uses the requested interfaces",
				`vLLM-Ascend (InstanceType "h100") picks its own transfer transport`, "speaks only CANN", "remove the interface request"},
			admittedIn: validation.Cluster{InstanceTypes: h100(nil)}},
		{rule: "interfaces on vLLM-Ascend: its cache client speaks CANN, never RDMA or EFA",
			md:         deployment(func(md *workerv1.ModelDeployment) { kvCache(md); transfer(workerv1.TransferRDMA)(md) }, role("s", "", fabric("1"))),
			refusedIn:  onAscend(validation.Cluster{KVCache: chain(workerv1.TransportRDMA, "", workerv1.TransportCANN)}),
			path:       "spec.roles[0].resources.interface",
			parts:      []string{`role "s"`, "vLLM-Ascend", "remove the interface request"},
			admittedIn: validation.Cluster{InstanceTypes: h100(nil), KVCache: chain(workerv1.TransportRDMA)}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			refused(t, validation.ValidateCreate(tc.md, tc.refusedIn), tc.path, tc.parts...)
			admitted := tc.admittedMD
			if admitted == nil {
				admitted = tc.md
			}
			assert.Empty(t, validation.ValidateCreate(admitted, tc.admittedIn))
		})
	}
}

func TestBindingTransportExemptions(t *testing.T) {
	mixed := validation.Cluster{KVCache: chain(workerv1.TransportTCP, "", workerv1.TransportRDMA)}
	t.Run("an unchanged binding stays editable after its backend became mixed", func(t *testing.T) {
		stored := deployment(kvCache, role("s", ""))
		edited := deployment(kvCache, role("s", "", args("--max-model-len", "4096")))
		assert.Empty(t, validation.ValidateUpdate(edited, stored, mixed))
	})
	t.Run("the binding check waits for every other rule", func(t *testing.T) {
		errs := refusaltest.Checked(t, validation.ValidateCreate(deployment(kvCache, role("s", "", fabric("0.5"))), mixed))
		for _, e := range errs {
			assert.NotEqual(t, "spec.kvCache.poolRef.name", e.Field)
		}
	})
}

// ascendPair is a prefill/decode pair under llm-d-router with the given tensor degrees.
func ascendPair(edit func(*workerv1.ModelDeployment), prefillTP, decodeTP string) *workerv1.ModelDeployment {
	return deployment(func(md *workerv1.ModelDeployment) {
		llmd(md)
		if edit != nil {
			edit(md)
		}
	}, role("prefill", workerv1.RoleKindPrefill, args("-tp", prefillTP), cards("8")), role("decode", workerv1.RoleKindDecode, args("--tensor-parallel-size", decodeTP), cards("8")))
}

func TestAscendLegRefusals(t *testing.T) {
	const text = "RoleUnsupported: the vLLM-Ascend transfer leg requires the prefill tp_size to be at least the decode one, but the pair declares prefill 2 and decode 4; narrow the decode role's tensor parallelism or widen the prefill role's"
	ascend := onAscend(validation.Cluster{})
	cases := []struct {
		rule string
		md   *workerv1.ModelDeployment
		in   validation.Cluster
		path string // "" when admitted
	}{
		{"prefill tp below decode tp is refused on vLLM-Ascend", ascendPair(nil, "2", "4"), ascend, "spec.roles[1].extraArgs"},
		{"near miss: prefill tp equal to decode tp is admitted", ascendPair(nil, "4", "4"), ascend, ""},
		{"near miss: native vLLM has no such rule", ascendPair(nil, "2", "4"), validation.Cluster{InstanceTypes: h100(nil)}, ""},
		{"near miss: under vllm-router no leg renders, so nothing is refused", ascendPair(func(md *workerv1.ModelDeployment) {
			md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterVLLM}
		}, "2", "4"), ascend, ""},
		{"near miss: an unread InstanceType leaves the render as the backstop", ascendPair(nil, "2", "4"), validation.Cluster{}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			errs := refusaltest.Checked(t, validation.ValidateCreate(tc.md, tc.in))
			if tc.path == "" {
				assert.Empty(t, errs)
				return
			}
			refused(t, errs, tc.path, "Forbidden", text)
		})
	}
	t.Run("a take-over decoder's command is read, and named", func(t *testing.T) {
		md := ascendPair(nil, "2", "1")
		md.Spec.Roles[1].ExtraArgs, md.Spec.Roles[1].Command = nil, []string{"vllm", "serve", "m", "-tp", "4"}
		refused(t, validation.ValidateCreate(md, ascend), "spec.roles[1].command", text)
	})
	t.Run("a stored pair keeps its verdict until an edit moves its degrees", func(t *testing.T) {
		stored := ascendPair(nil, "2", "4")
		edited := ascendPair(nil, "2", "4")
		edited.Spec.Roles[0].Replicas = 3
		assert.Empty(t, validation.ValidateUpdate(edited, stored, ascend))
		widened := ascendPair(nil, "2", "8")
		refused(t, validation.ValidateUpdate(widened, stored, ascend), "spec.roles[1].extraArgs", "prefill 2 and decode 8")
	})
}
