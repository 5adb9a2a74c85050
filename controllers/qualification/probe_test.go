package qualification_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/qualification"
)

// probed is a member whose engine listens at addr, running image.
func probed(t *testing.T, uid, addr, image string) *corev1.Pod {
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid), Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": port}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}},
		Status:     corev1.PodStatus{PodIP: host},
	}
}

// TestGroupForwardProbe: the group-forward probe, one completion per member.
func TestGroupForwardProbe(t *testing.T) {
	cases := []struct {
		rule   string
		engine workerv1.Engine
		answer func(w http.ResponseWriter, r *http.Request)
		state  string
	}{
		{"vLLM: an answer bound to the request verifies", workerv1.EngineVLLM, func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				RequestID string `json:"request_id"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			if r.URL.Path != "/v1/completions" {
				w.WriteHeader(http.StatusNotFound)
				return
			}
			_, _ = w.Write([]byte(`{"id":"cmpl-` + req.RequestID + `","choices":[{"finish_reason":"length"}]}`))
		}, v1alpha1.LegVerified},
		{"SGLang: meta_info binding the rid verifies", workerv1.EngineSGLang, func(w http.ResponseWriter, r *http.Request) {
			var req struct {
				RID string `json:"rid"`
			}
			_ = json.NewDecoder(r.Body).Decode(&req)
			_, _ = w.Write([]byte(`{"meta_info":{"id":"` + req.RID + `","finish_reason":{"type":"length"}}}`))
		}, v1alpha1.LegVerified},
		{"an answer for another request is unbound: held", workerv1.EngineVLLM, func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"id":"cmpl-other","choices":[{"finish_reason":"length"}]}`))
		}, v1alpha1.LegUnknown},
		{"an error status fails", workerv1.EngineVLLM, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		}, v1alpha1.LegFailed},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(tc.answer))
			defer srv.Close()
			addr := srv.Listener.Addr().String()
			members := []*corev1.Pod{probed(t, "a", addr, "vllm/vllm-openai:v0.25.1"), probed(t, "b", addr, "vllm/vllm-openai:v0.25.1")}
			leg := qualification.Probe(context.Background(), srv.Client(), tc.engine, members)
			assert.Equal(t, tc.state, leg.State, leg.Reason)
		})
	}
	t.Run("the reason names the first member not verified by name, in whatever order they are listed", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"id":"cmpl-other","choices":[{"finish_reason":"length"}]}`))
		}))
		defer srv.Close()
		addr := srv.Listener.Addr().String()
		a, b := probed(t, "a", addr, "vllm/vllm-openai:v0.25.1"), probed(t, "b", addr, "vllm/vllm-openai:v0.25.1")
		first := qualification.Probe(context.Background(), srv.Client(), workerv1.EngineVLLM, []*corev1.Pod{b, a})
		again := qualification.Probe(context.Background(), srv.Client(), workerv1.EngineVLLM, []*corev1.Pod{a, b})
		assert.Contains(t, first.Reason, "member a:")
		assert.Equal(t, first, again, "a retry writes no status")
	})
	t.Run("an unanswered probe is held", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		addr := srv.Listener.Addr().String()
		srv.Close()
		leg := qualification.Probe(context.Background(), http.DefaultClient, workerv1.EngineVLLM, []*corev1.Pod{probed(t, "a", addr, "x:0.25.1")})
		assert.Equal(t, v1alpha1.LegUnknown, leg.State, leg.Reason)
	})
}

func TestProbeSupport(t *testing.T) {
	leader := func(image string) *corev1.Pod { return probed(t, "a", "10.0.0.1:8000", image) }
	assert.Empty(t, qualification.ProbeSupport(workerv1.EngineVLLM, workerv1.RoleKindServer, leader("vllm/vllm-openai:v0.25.1")), "a listed vLLM version is probed")
	assert.Empty(t, qualification.ProbeSupport(workerv1.EngineSGLang, workerv1.RoleKindServer, leader("lmsysorg/sglang:0.5.21")), "a listed SGLang version is probed")
	assert.Contains(t, qualification.ProbeSupport(workerv1.EngineVLLM, workerv1.RoleKindServer, leader("vllm/vllm-openai:v0.26.0")), `version "0.26.0"`)
	assert.Contains(t, qualification.ProbeSupport(workerv1.EngineVLLM, workerv1.RoleKindDecode, leader("vllm/vllm-openai:v0.25.1")), "Decode role")
	takeOver := leader("vllm/vllm-openai:v0.25.1")
	delete(takeOver.Annotations, "prometheus.io/scrape")
	assert.Contains(t, qualification.ProbeSupport(workerv1.EngineVLLM, workerv1.RoleKindServer, takeOver), "take-over")
}
