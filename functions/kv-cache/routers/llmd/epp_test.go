package llmd_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers/llmd"
)

func role(name string, kind workerv1.RoleKind, args ...string) workerv1.ModelDeploymentRole {
	return workerv1.ModelDeploymentRole{Name: name, Kind: kind, ExtraArgs: args}
}

func qwen(e workerv1.Engine, roles ...workerv1.ModelDeploymentRole) llmd.Deployment {
	return llmd.Deployment{Namespace: "team-a", Name: "qwen", Model: "Qwen/Qwen3-8B", Engine: e, Roles: roles, ServingPort: 8000}
}

// caseD is an SGLang prefill/decode deployment's, composed from the others: C's filters and
// profiles, B's producer and extractor, and the decider.
var caseD = section(caseB, "", "plugins:\n") + "plugins:\n" +
	section(caseC, "- name: decode-pods", "- parameters:\n    modelName") +
	section(caseB, "- type: approx-prefix-cache-producer", "schedulingProfiles:") +
	section(caseC, "- parameters:\n    nonCachedTokens", "")

// section is doc from the first from (the start when empty) up to the next to (the end when empty).
func section(doc, from, to string) string {
	_, rest, found := strings.Cut(doc, from)
	if !found {
		panic("example lacks " + from)
	}
	rest = from + rest
	if to != "" {
		rest, _, _ = strings.Cut(rest, to)
	}
	return rest
}

func TestEPP(t *testing.T) {
	cases := []struct {
		rule string
		in   llmd.Deployment
		want string
	}{
		{"server-only vLLM: the precise producer fed by KV events", qwen(workerv1.EngineVLLM, role("server", "")), caseA},
		{"server-only SGLang: the approximate producer and defaultEngine", qwen(workerv1.EngineSGLang, role("server", workerv1.RoleKindServer)), caseB},
		{"vLLM prefill/decode: tokenizer is the prefiller, decoders are not dialled for events", qwen(workerv1.EngineVLLM, role("prefill", workerv1.RoleKindPrefill), role("decode", workerv1.RoleKindDecode)), caseC},
		{"SGLang prefill/decode: approximate producer with the decider", qwen(workerv1.EngineSGLang, role("decode", workerv1.RoleKindDecode), role("prefill", workerv1.RoleKindPrefill)), caseD},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := llmd.EPP(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("epp.yaml (-want +got):\n%s", diff)
			}
		})
	}
}

func TestEPPRules(t *testing.T) {
	pd := func(threshold *int32) llmd.Deployment {
		d := qwen(workerv1.EngineVLLM, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode))
		d.DisaggregationThresholdTokens = threshold
		return d
	}
	cases := []struct {
		rule    string
		in      llmd.Deployment
		has     []string
		hasNot  []string
		wantErr string
	}{
		{rule: "an unset threshold is 8", in: pd(nil), has: []string{"nonCachedTokens: 8\n"}},
		{rule: "a threshold is kept verbatim", in: pd(ptr.To(int32(512))), has: []string{"nonCachedTokens: 512\n"}},
		{rule: "a zero threshold is kept and turns splitting off", in: pd(ptr.To(int32(0))), has: []string{"nonCachedTokens: 0\n"}},
		{rule: "no decider without both prefill and decode", in: qwen(workerv1.EngineVLLM, role("p", workerv1.RoleKindPrefill), role("s", "")),
			hasNot: []string{"prefix-based-pd-decider", "disagg-profile-handler", "role-kind!=decode"}},
		{rule: "the tokenizer is the first server by name without a prefiller", in: qwen(workerv1.EngineVLLM, role("b", ""), role("a", workerv1.RoleKindServer)),
			has: []string{"url: http://qwen-a.team-a.svc:8000\n"}},
		{rule: "the tokenizer is https when its role serves TLS", in: qwen(workerv1.EngineVLLM, role("s", "", "--ssl-certfile", "/tls.crt")),
			has: []string{"url: https://qwen-s.team-a.svc:8000\n"}},
		{rule: "the serving port is the metrics port", in: func() llmd.Deployment {
			d := qwen(workerv1.EngineSGLang, role("s", ""))
			d.ServingPort = 8100
			return d
		}(),
			has: []string{"port: 8100\n"}},
		{rule: "vLLM-Ascend publishes no KV events: the approximate producer", in: func() llmd.Deployment {
			d := qwen(workerv1.EngineVLLM, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode))
			d.NoKVEvents = true
			return d
		}(),
			has: []string{"type: approx-prefix-cache-producer\n"}, hasNot: []string{"precise-prefix-cache-producer", "kvEventsConfig"}},
		{rule: "near miss: native vLLM gets the precise producer", in: qwen(workerv1.EngineVLLM, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)),
			has: []string{"type: precise-prefix-cache-producer\n"}, hasNot: []string{"approx-prefix-cache-producer"}},
		{rule: "an engine without the metric table", in: qwen("TGI", role("s", "")),
			wantErr: `metric "QueuedRequests" required by router "llm-d-router" is unavailable on engine "tgi"`},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := llmd.EPP(tc.in)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.has {
				if !strings.Contains(string(got), s) {
					t.Errorf("epp.yaml lacks %q:\n%s", s, got)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(string(got), s) {
					t.Errorf("epp.yaml has %q:\n%s", s, got)
				}
			}
		})
	}
}

func TestEPPIsDeterministic(t *testing.T) {
	d := qwen(workerv1.EngineVLLM, role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode))
	first, _ := llmd.EPP(d)
	scaled := d
	scaled.Roles = []workerv1.ModelDeploymentRole{role("p", workerv1.RoleKindPrefill), role("d", workerv1.RoleKindDecode)}
	scaled.Roles[0].Replicas = 7
	for range 20 {
		again, _ := llmd.EPP(scaled)
		if !bytes.Equal(again, first) {
			t.Fatal("the EPP document changed with a replica count or between renders")
		}
	}
}

func TestEnvoyRouteTimeout(t *testing.T) {
	cases := []struct {
		rule    string
		timeout *int32
		want    string
	}{
		{"unset is one day", nil, "timeout: 86400s\n"},
		{"set is verbatim seconds", ptr.To(int32(300)), "timeout: 300s\n"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			got := llmd.Envoy(tc.timeout)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "<ROUTE-TIMEOUT>") {
				t.Errorf("envoy.yaml route timeout: want %q in\n%s", tc.want, got)
			}
			header, extProc := strings.Index(got, "envoy.filters.http.header_mutation"), strings.Index(got, "envoy.filters.http.ext_proc")
			if header < 0 || extProc < 0 || header > extProc || strings.Contains(got, "request_headers_to_remove") {
				t.Error("the client's x-gateway-destination-endpoint must be stripped by header_mutation before ext_proc")
			}
		})
	}
}

// TestEndpointSelectorSelectsServingMembers: the EPP discovers the deployment's leaders, or its
// serving members once a Server role serves through every rank (External DP).
func TestEndpointSelectorSelectsServingMembers(t *testing.T) {
	external := workerv1.ModelDeploymentRole{Name: "s", Kind: workerv1.RoleKindServer, ExtraArgs: []string{"--data-parallel-rank", "$(GPUSTACK_MEMBER_INDEX)"}}
	internal := workerv1.ModelDeploymentRole{Name: "d", Kind: workerv1.RoleKindDecode, ExtraArgs: external.ExtraArgs}
	assert.False(t, llmd.ServesEveryMember(workerv1.EngineVLLM, []workerv1.ModelDeploymentRole{internal}), "External DP in a Decode role stays leader-served")
	assert.True(t, llmd.ServesEveryMember(workerv1.EngineVLLM, []workerv1.ModelDeploymentRole{internal, external}))
	assert.Equal(t, "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=md,modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router",
		llmd.Deployment{Name: "md", Engine: workerv1.EngineVLLM, Roles: []workerv1.ModelDeploymentRole{internal}}.Selector())
	assert.Equal(t, "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=md,modeldeployment.gpustack.ai/serves=true,!modeldeployment.gpustack.ai/router",
		llmd.Deployment{Name: "md", Engine: workerv1.EngineVLLM, Roles: []workerv1.ModelDeploymentRole{internal, external}}.Selector())
	assert.Equal(t, "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=md,modeldeployment.gpustack.ai/member-index=0,!modeldeployment.gpustack.ai/router,modeldeployment.gpustack.ai/transfer-routed=true",
		llmd.Deployment{Name: "md", Engine: workerv1.EngineVLLM, Roles: []workerv1.ModelDeploymentRole{internal}, SharedTransfer: true}.Selector(),
		"a pair sharing one transfer document is selected one configuration at a time")
}
