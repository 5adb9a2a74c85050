package routers_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers"
)

const eligible = workerv1.LabelEndpointEligible + "=true"

var (
	server  = workerv1.ModelDeploymentRole{Name: "server", Kind: workerv1.RoleKindServer}
	other   = workerv1.ModelDeploymentRole{Name: "other", Kind: workerv1.RoleKindServer}
	prefill = workerv1.ModelDeploymentRole{Name: "prefill", Kind: workerv1.RoleKindPrefill}
	decode  = workerv1.ModelDeploymentRole{Name: "decode", Kind: workerv1.RoleKindDecode}
)

// active is an Eligibility whose named roles' Services select on the eligibility label.
func active(roles ...string) routers.Eligibility {
	e := routers.Eligibility{Roles: map[string]bool{}}
	for _, r := range roles {
		e.Roles[r] = true
	}
	return e
}

// kept is e with the observed router already carrying the term on the named selectors.
func kept(e routers.Eligibility, selectors ...string) routers.Eligibility {
	e.Kept = map[string]bool{}
	for _, s := range selectors {
		e.Kept[s] = true
	}
	return e
}

// argvRouter renders an argv router over roles and returns its Deployment.
func argvRouter(t *testing.T, name workerv1.RouterName, roles []workerv1.ModelDeploymentRole, e routers.Eligibility) *appsv1.Deployment {
	t.Helper()
	r, err := routers.Render("team-a", "qwen", workerv1.EngineVLLM, &workerv1.ModelDeploymentRouter{Name: name}, roles, 8000, e, routers.Images{Router: "router:v1"})
	require.NoError(t, err)
	return r.Objects[naming.RouterDeploymentResource].(*appsv1.Deployment)
}

// selectorOf is the labels an argv router's flag spells, one per argument after it.
func selectorOf(args []string, flag string) []string {
	var out []string
	for i, a := range args {
		if a != flag {
			continue
		}
		for _, l := range args[i+1:] {
			if strings.HasPrefix(l, "-") {
				break
			}
			out = append(out, l)
		}
	}
	return out
}

// TestArgvRouterSelectorsFollowEligibility: vllm-router's and sglang-gateway's discovery selectors
// gain the eligibility term as the role Services do: once every role a selector covers selects on
// it, and for good once the router carries it.
func TestArgvRouterSelectorsFollowEligibility(t *testing.T) {
	cases := []struct {
		rule   string
		router workerv1.RouterName
		roles  []workerv1.ModelDeploymentRole
		in     routers.Eligibility
		flag   string
		want   bool
	}{
		{"vllm-router: --selector gains the term once the role's Service selects on it",
			workerv1.RouterVLLM, []workerv1.ModelDeploymentRole{server}, active("server"), "--selector", true},
		{"vllm-router: no term while the role's qualification is not active",
			workerv1.RouterVLLM, []workerv1.ModelDeploymentRole{server}, active(), "--selector", false},
		{"vllm-router: no term while another role it covers has no labelled Pods",
			workerv1.RouterVLLM, []workerv1.ModelDeploymentRole{server, other}, active("server"), "--selector", false},
		{"vllm-router: a selector that carried the term keeps it",
			workerv1.RouterVLLM, []workerv1.ModelDeploymentRole{server, other}, kept(active("server"), "--selector"), "--selector", true},
		{"sglang-gateway: --selector gains the term once every role's Service selects on it",
			workerv1.RouterSGLangGateway, []workerv1.ModelDeploymentRole{server, other}, active("server", "other"), "--selector", true},
		{"sglang-gateway: no term while the role's qualification is not active",
			workerv1.RouterSGLangGateway, []workerv1.ModelDeploymentRole{server}, active(), "--selector", false},
		{"vllm-router pair: --prefill-selector gains the term once the prefill roles select on it",
			workerv1.RouterVLLM, []workerv1.ModelDeploymentRole{prefill, decode}, active("prefill"), "--prefill-selector", true},
		{"vllm-router pair: --decode-selector waits for its own roles",
			workerv1.RouterVLLM, []workerv1.ModelDeploymentRole{prefill, decode}, active("prefill"), "--decode-selector", false},
		{"sglang-gateway pair: --decode-selector gains the term once the decode roles select on it",
			workerv1.RouterSGLangGateway, []workerv1.ModelDeploymentRole{prefill, decode}, active("decode"), "--decode-selector", true},
		{"sglang-gateway pair: --prefill-selector keeps the term it carried",
			workerv1.RouterSGLangGateway, []workerv1.ModelDeploymentRole{prefill, decode}, kept(active(), "--prefill-selector"), "--prefill-selector", true},
		{"sglang-gateway pair: a term kept on another flag is not this one's",
			workerv1.RouterSGLangGateway, []workerv1.ModelDeploymentRole{prefill, decode}, kept(active(), "--selector"), "--prefill-selector", false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			args := argvRouter(t, tc.router, tc.roles, tc.in).Spec.Template.Spec.Containers[0].Args
			selector := selectorOf(args, tc.flag)
			require.NotEmpty(t, selector, "%s in %v", tc.flag, args)
			assert.Equal(t, tc.want, contains(selector, eligible), "%s %v", tc.flag, selector)
			assert.Contains(t, selector, workerv1.LabelMemberIndex+"=0", "the term narrows the leaders, it does not replace them")
		})
	}
}

// TestLLMDEndpointSelectorFollowsEligibility: llm-d-router's endpoint selector, and the KV-event
// pod discovery that repeats it, gain the eligibility term as the role Services do.
func TestLLMDEndpointSelectorFollowsEligibility(t *testing.T) {
	const base = "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,modeldeployment.gpustack.ai/member-index=0"
	cases := []struct {
		rule  string
		roles []workerv1.ModelDeploymentRole
		in    routers.Eligibility
		want  string
	}{
		{"llm-d-router: the endpoint selector gains the term once every role's Service selects on it",
			[]workerv1.ModelDeploymentRole{prefill, decode}, active("prefill", "decode"), base + "," + eligible + ",!modeldeployment.gpustack.ai/router"},
		{"llm-d-router: no term while a role it covers has no labelled Pods",
			[]workerv1.ModelDeploymentRole{prefill, decode}, active("prefill"), base + ",!modeldeployment.gpustack.ai/router"},
		{"llm-d-router: an endpoint selector that carried the term keeps it",
			[]workerv1.ModelDeploymentRole{prefill, decode}, kept(active(), routers.ConfigMapKeyEndpointSelector), base + "," + eligible + ",!modeldeployment.gpustack.ai/router"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			md := &workerv1.ModelDeployment{}
			md.Name, md.Namespace = "qwen", "team-a"
			md.Spec.Model.Name, md.Spec.Engine.Name = "Qwen/Qwen3-8B", workerv1.EngineVLLM
			md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
			md.Spec.Roles = tc.roles
			r, err := routers.RenderLLMD(md, 8000, false, false, tc.in, routers.Images{Router: "epp:v1", Proxy: "envoy:v1"})
			require.NoError(t, err)
			data := r.Objects[routers.ConfigMapResource].(*corev1.ConfigMap).Data
			assert.Equal(t, tc.want, data[routers.ConfigMapKeyEndpointSelector])
			assert.Contains(t, data["epp.yaml"], "podLabelSelector: "+tc.want+",modeldeployment.gpustack.ai/role-kind!=decode")
		})
	}
}

// TestKeptTermsReadTheObservedRouter: the terms a router keeps are read back from what it was
// rendered with, per selector.
func TestKeptTermsReadTheObservedRouter(t *testing.T) {
	pair := []workerv1.ModelDeploymentRole{prefill, decode}
	cases := []struct {
		rule string
		in   routers.Eligibility
		want map[string]bool
	}{
		{"an argv router's flag carrying the term is kept", active("decode"), map[string]bool{"--decode-selector": true}},
		{"a flag without the term keeps none", active(), map[string]bool{}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			assert.Equal(t, tc.want, routers.KeptTerms(toUnstructured(t, argvRouter(t, workerv1.RouterVLLM, pair, tc.in)), nil))
		})
	}
	t.Run("llm-d-router's endpoint selector carrying the term is kept", func(t *testing.T) {
		cm := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{
			routers.ConfigMapKeyEndpointSelector: "app.kubernetes.io/instance=qwen," + eligible + ",!modeldeployment.gpustack.ai/router"}}}
		assert.Equal(t, map[string]bool{routers.ConfigMapKeyEndpointSelector: true}, routers.KeptTerms(nil, cm))
	})
	t.Run("a term in another label's value is not the term", func(t *testing.T) {
		cm := &unstructured.Unstructured{Object: map[string]any{"data": map[string]any{
			routers.ConfigMapKeyEndpointSelector: "app.kubernetes.io/instance=qwen,!" + workerv1.LabelEndpointEligible}}}
		assert.Equal(t, map[string]bool{}, routers.KeptTerms(nil, cm))
	})
}

func toUnstructured(t *testing.T, obj any) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	require.NoError(t, err)
	return &unstructured.Unstructured{Object: m}
}

func contains(labels []string, label string) bool {
	for _, l := range labels {
		if l == label {
			return true
		}
	}
	return false
}
