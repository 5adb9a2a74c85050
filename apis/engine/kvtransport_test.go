package engine_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// backend is a managed backend with a backend-wide protocol and one group per override ("" inherits).
func backend(wide string, groups ...string) *workerv1.KVCacheBackend {
	b := &workerv1.KVCacheBackend{Spec: workerv1.KVCacheBackendSpec{Transport: workerv1.KVCacheBackendTransport{Protocol: wide}}}
	if len(groups) == 0 {
		return b
	}
	b.Spec.Connection.Managed = &workerv1.KVCacheBackendManaged{}
	for _, g := range groups {
		m := workerv1.KVCacheBackendMember{}
		if g != "" {
			m.Transport = &workerv1.KVCacheBackendMemberTransport{Protocol: g}
		}
		b.Spec.Connection.Managed.Members = append(b.Spec.Connection.Managed.Members, m)
	}
	return b
}

func TestBackendOffers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backend *workerv1.KVCacheBackend
		offers  []string
	}{
		{"an unset protocol is Auto, which is tcp", backend(""), []string{"tcp"}},
		{"an external backend offers its backend-wide protocol", backend(workerv1.TransportRDMA), []string{"rdma"}},
		{"a group inherits the backend-wide protocol", backend(workerv1.TransportEFA, ""), []string{"efa"}},
		{"a group override wins, in declaration order", backend(workerv1.TransportTCP, "", workerv1.TransportCANN, workerv1.TransportROCM),
			[]string{"tcp", "ascend", "hip"}},
		{"MUSA and MACA keep their names", backend(workerv1.TransportMUSA, workerv1.TransportMACA), []string{"maca"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.offers, engine.BackendOffers(tc.backend))
		})
	}
}

func TestClientEngineOf(t *testing.T) {
	assert.Equal(t, engine.ClientVLLMAscend, engine.ClientEngineOf(workerv1.EngineVLLM, "ascend"))
	assert.Equal(t, engine.ClientVLLM, engine.ClientEngineOf(workerv1.EngineVLLM, "nvidia"))
	assert.Equal(t, engine.ClientSGLang, engine.ClientEngineOf(workerv1.EngineSGLang, "ascend"), "only vLLM has an Ascend build of its own")
}

func TestMatchTransport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  engine.ClientEngine
		offers  []string
		match   string
		refusal []string
	}{
		{"no offers is the no-store shape", engine.ClientVLLM, nil, "", nil},
		{"an unconstrained engine takes the first offer", engine.ClientVLLM, []string{"rdma", "tcp"}, "rdma", nil},
		{"empty offers are skipped", engine.ClientSGLang, []string{"", "efa"}, "efa", nil},
		{"vLLM-Ascend takes the ascend group wherever it is declared", engine.ClientVLLMAscend, []string{"tcp", "ascend"}, "ascend", nil},
		{"vLLM-Ascend without an ascend group is refused", engine.ClientVLLMAscend, []string{"tcp", "rdma"}, "",
			[]string{"TransportUnsupported", "vLLM-Ascend requires the ascend transport", "offer tcp, rdma", "vllm-ascend v0.19.1rc1", "transport.protocol) to CANN", "defaults to Auto"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			match, err := engine.MatchTransport(tc.engine, tc.offers)
			assert.Equal(t, tc.match, match)
			if tc.refusal == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, part := range tc.refusal {
				assert.Contains(t, err.Error(), part)
			}
		})
	}
}

func TestValidateBindingTransport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  engine.ClientEngine
		offers  []string
		refusal []string
	}{
		{"mixed group protocols are refused for an engine without a required transport", engine.ClientVLLM, []string{"tcp", "rdma", "tcp"},
			[]string{"TransportUnsupported", "vLLM's cache client", "offer tcp, rdma", "NotSupportedTransport", "spec.transport.protocol", "or bind a pool with one effective transport"}},
		{"mixed group protocols are refused for SGLang too", engine.ClientSGLang, []string{"efa", "tcp"}, []string{"SGLang's cache client", "offer efa, tcp"}},
		{"near miss: groups repeating one protocol are admitted", engine.ClientVLLM, []string{"rdma", "rdma"}, nil},
		{"near miss: an empty offer does not count as a second", engine.ClientVLLM, []string{"rdma", ""}, nil},
		{"near miss: vLLM-Ascend is judged at render, not here", engine.ClientVLLMAscend, []string{"tcp", "ascend"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := engine.ValidateBindingTransport(tc.engine, tc.offers)
			if tc.refusal == nil {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			for _, part := range tc.refusal {
				assert.Contains(t, err.Error(), part)
			}
		})
	}
}
