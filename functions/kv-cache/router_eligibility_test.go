package kvcache_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

// TestRouterSelectsAsTheRoleServices: the router's discovery selector carries the eligibility term
// when the role Service render-roles composed selects on it, and keeps the term the observed router
// already carries.
func TestRouterSelectsAsTheRoleServices(t *testing.T) {
	const term = workerv1.LabelEndpointEligible + "=true"
	eligibleService := `{apiVersion: v1, kind: Service, metadata: {name: chat-server},
	  spec: {selector: {modeldeployment.gpustack.ai/endpoint-eligible: "true"}, ports: [{name: http, port: 8000}]}}`
	keptRouter := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: chat-router},
	  spec: {template: {spec: {containers: [{name: router, args: [--selector, "` + term + `"]}]}}}}`
	cases := []struct {
		rule     string
		service  string
		observed string
		want     bool
	}{
		{rule: "the role Service selects on the eligibility label: so does the router", service: eligibleService, want: true},
		{rule: "the role Service does not: nor does the router"},
		{rule: "the observed router carries the term: it keeps it", observed: keptRouter, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			req := routerRequest(t, tc.observed)
			if tc.service != "" {
				req.Desired.Resources["service-server"] = res(t, tc.service)
			}
			rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
			require.NoError(t, err)
			require.Empty(t, rsp.GetResults())
			router := rsp.GetDesired().GetResources()["router-deployment"].GetResource().AsMap()
			container := router["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
			assert.Equal(t, tc.want, containsArg(container["args"].([]any), term), "%v", container["args"])
		})
	}
}

func containsArg(args []any, arg string) bool {
	for _, a := range args {
		if a == arg {
			return true
		}
	}
	return false
}
