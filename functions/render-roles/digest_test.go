package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// TestConfigDigestFollowsWhatTheKVCacheStepRenders: the kv-cache step amends the template from
// inputs beyond the role's own configuration; each one it renders from is in the role's digest,
// so a change to it rolls the role (and one it does not render from does not).
func TestConfigDigestFollowsWhatTheKVCacheStepRenders(t *testing.T) {
	ascend := h100()
	ascend.Status.Detail.Manufacturer = "ascend"
	halves := func(prefillArgs, decodeArgs []string) []workerv1.ModelDeploymentRole {
		return []workerv1.ModelDeploymentRole{
			{Name: "prefill", Kind: workerv1.RoleKindPrefill, InstanceType: "h100", ExtraArgs: prefillArgs},
			{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: "h100", ExtraArgs: decodeArgs},
		}
	}
	backend := func(protocol string) *workerv1.KVCacheBackend {
		return &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: "mooncake"},
			Spec: workerv1.KVCacheBackendSpec{Transport: workerv1.KVCacheBackendTransport{Protocol: protocol}}}
	}
	// digest renders the role named role of a deployment under llm-d-router.
	digest := func(t *testing.T, it *workerv1.InstanceType, roles []workerv1.ModelDeploymentRole, role int, b *workerv1.KVCacheBackend) string {
		t.Helper()
		s := spec(roles...)
		s.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
		in := renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: s, Role: roles[role], InstanceType: it}
		if b != nil {
			s.KVCache = &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team"}}
			in.Binding = &workerv1.KVCachePoolBinding{Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: "dram"}}}
			in.Pool = &workerv1.KVCachePool{Status: workerv1.KVCachePoolStatus{ClientEndpoint: "mooncake.kv:50051"}}
			in.Backend = b
		}
		r, err := renderroles.RenderRole(in)
		require.NoError(t, err)
		return r.ConfigDigest
	}
	tp := func(n string) []string { return []string{"--tensor-parallel-size", n} }
	cases := []struct {
		rule         string
		before, then string
		rolls        bool
	}{
		{rule: "a backend whose matched transport moves rolls a bound role",
			before: digest(t, h100(), halves(nil, nil), 0, backend(workerv1.TransportTCP)),
			then:   digest(t, h100(), halves(nil, nil), 0, backend(workerv1.TransportRDMA)), rolls: true},
		{rule: "an Auto backend is the TCP one the client speaks",
			before: digest(t, h100(), halves(nil, nil), 0, backend(workerv1.TransportTCP)),
			then:   digest(t, h100(), halves(nil, nil), 0, backend(workerv1.TransportAuto))},
		{rule: "a degree edit on the prefill half of a vLLM-Ascend pair rolls the decode half",
			before: digest(t, ascend, halves(tp("2"), tp("2")), 1, nil),
			then:   digest(t, ascend, halves(tp("4"), tp("2")), 1, nil), rolls: true},
		{rule: "a degree the vLLM-Ascend leg does not carry leaves the other half",
			before: digest(t, ascend, halves(tp("2"), tp("2")), 1, nil),
			then:   digest(t, ascend, halves(append(tp("2"), "--pipeline-parallel-size", "2"), tp("2")), 1, nil)},
		{rule: "native vLLM's leg carries no degrees: a prefill edit leaves the decode half",
			before: digest(t, h100(), halves(tp("2"), tp("2")), 1, nil),
			then:   digest(t, h100(), halves(tp("4"), tp("2")), 1, nil)},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if tc.rolls {
				assert.NotEqual(t, tc.before, tc.then)
			} else {
				assert.Equal(t, tc.before, tc.then)
			}
		})
	}
}
