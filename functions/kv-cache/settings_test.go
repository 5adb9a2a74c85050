package kvcache_test

import (
	"context"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
)

func withSettings(t *testing.T, req *fnv1.RunFunctionRequest, data string) {
	req.RequiredResources["settings"] = &fnv1.Resources{Items: []*fnv1.Resource{res(t,
		`{apiVersion: apiextensions.crossplane.io/v1beta1, kind: EnvironmentConfig, metadata: {name: mdplane-settings}, data: `+data+`}`)}}
}

// routerImage is the image of the router Deployment's first container in a response.
func routerImage(t *testing.T, rsp *fnv1.RunFunctionResponse) string {
	d := rsp.GetDesired().GetResources()["router-deployment"]
	require.NotNil(t, d, "no router Deployment")
	containers := d.GetResource().GetFields()["spec"].GetStructValue().GetFields()["template"].GetStructValue().
		GetFields()["spec"].GetStructValue().GetFields()["containers"].GetListValue().GetValues()
	require.NotEmpty(t, containers)
	return containers[0].GetStructValue().GetFields()["image"].GetStringValue()
}

func TestRouterImageFollowsTheSettings(t *testing.T) {
	run := func(req *fnv1.RunFunctionRequest) *fnv1.RunFunctionResponse {
		rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
		require.NoError(t, err)
		return rsp
	}
	assert.Equal(t, "gpustack/llm-router:v0.1.0", routerImage(t, run(routerRequest(t, ""))), "no EnvironmentConfig: the default")

	req := routerRequest(t, "")
	withSettings(t, req, `{model-deployment-router-image: "gpustack/llm-router:v0.2.0", container-registry: "registry.local:5000"}`)
	assert.Equal(t, "registry.local:5000/gpustack/llm-router:v0.2.0", routerImage(t, run(req)), "the Setting, redirected")

	// Near miss: an image named on the object is used verbatim, never redirected.
	req = routerRequest(t, "")
	withSettings(t, req, `{container-registry: "registry.local:5000", container-namespace: mirror}`)
	router := req.GetObserved().GetComposite().GetResource().GetFields()["spec"].GetStructValue().GetFields()["router"].GetStructValue()
	router.Fields["image"] = structpb.NewStringValue("example.com/own/router:v9")
	assert.Equal(t, "example.com/own/router:v9", routerImage(t, run(req)))
}

func TestABadSettingFailsTheRender(t *testing.T) {
	req := routerRequest(t, "")
	withSettings(t, req, `{model-deployment-router-image: ""}`)
	rsp, err := (&kvcache.Function{}).RunFunction(context.Background(), req)
	require.NoError(t, err)
	require.Len(t, rsp.GetResults(), 1)
	assert.Equal(t, fnv1.Severity_SEVERITY_FATAL, rsp.GetResults()[0].GetSeverity())
	assert.Contains(t, rsp.GetResults()[0].GetMessage(),
		"EnvironmentConfig mdplane-settings: data[model-deployment-router-image]: Invalid value: \"\": must not be blank, or remove the key for the default gpustack/llm-router:v0.1.0")
}
