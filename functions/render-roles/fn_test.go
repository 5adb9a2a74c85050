package renderroles_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"

	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

// obj turns a YAML manifest into a function-protocol resource.
func obj(t *testing.T, manifest string) *fnv1.Resource {
	t.Helper()
	m := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &m))
	s, err := structpb.NewStruct(m)
	require.NoError(t, err)
	return &fnv1.Resource{Resource: s}
}

type request struct {
	composite string
	observed  map[string]string
	required  map[string][]string // requirement name -> manifests; present means resolved
}

func (r request) build(t *testing.T) *fnv1.RunFunctionRequest {
	req := &fnv1.RunFunctionRequest{Observed: &fnv1.State{Composite: obj(t, r.composite), Resources: map[string]*fnv1.Resource{}}}
	for name, m := range r.observed {
		req.Observed.Resources[name] = obj(t, m)
	}
	if r.required != nil {
		// No EnvironmentConfig unless the case names one: the default Settings.
		req.RequiredResources = map[string]*fnv1.Resources{"settings": {}}
		for name, items := range r.required {
			rs := &fnv1.Resources{}
			for _, m := range items {
				rs.Items = append(rs.Items, obj(t, m))
			}
			req.RequiredResources[name] = rs
		}
	}
	return req
}

func run(t *testing.T, r request) *fnv1.RunFunctionResponse {
	t.Helper()
	rsp, err := (&renderroles.Function{}).RunFunction(context.Background(), r.build(t))
	require.NoError(t, err)
	return rsp
}

func fatalMessage(rsp *fnv1.RunFunctionResponse) (string, string) {
	for _, r := range rsp.GetResults() {
		if r.GetSeverity() == fnv1.Severity_SEVERITY_FATAL {
			return r.GetMessage(), r.GetReason()
		}
	}
	return "", ""
}

// field reads a dotted path of a desired resource.
func field(t *testing.T, r *fnv1.Resource, path ...string) any {
	t.Helper()
	var cur any = r.GetResource().AsMap()
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

const deployment = `
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: chat, namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  kvCache: {poolRef: {name: team-dram}, connector: Mooncake}
  roles:
  - {name: server, kind: Server, replicas: 2, size: 1, instanceType: a10g, startupTimeoutSeconds: 1800}
`

const a10g = `
apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: a10g}
spec: {acceleratable: true, os: linux, arch: amd64, unitResources: {cpu: "8", ram: 32Gi}}
status: {entrance: gpustack-fnv64-aaaaaaaaaaaaaaaa, detail: {manufacturer: nvidia}}
`

const binding = `
apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: team-dram, namespace: team-a}
spec: {poolRef: {name: dram}, domain: {name: chat, blockSize: 16, dtype: bfloat16}, quota: {ceiling: 1Gi}}
`

func resolvedDeploymentInputs() map[string][]string {
	return map[string][]string{"instancetype/a10g": {a10g}, "binding": {binding}, "pool": {}, "runtimeclass/nvidia": {}}
}

const nvidiaRuntimeClass = `{apiVersion: node.k8s.io/v1, kind: RuntimeClass, metadata: {name: nvidia}, handler: nvidia}`

func TestDeploymentStep(t *testing.T) {
	t.Run("asks for the InstanceType and Binding before rendering anything", func(t *testing.T) {
		rsp := run(t, request{composite: deployment})
		msg, _ := fatalMessage(rsp)
		assert.Empty(t, msg)
		assert.Empty(t, rsp.GetDesired().GetResources())
		sel := rsp.GetRequirements().GetResources()
		assert.Equal(t, "a10g", sel["instancetype/a10g"].GetMatchName())
		assert.Nil(t, sel["instancetype/a10g"].Namespace, "InstanceTypes are cluster-scoped")
		assert.Equal(t, "team-dram", sel["binding"].GetMatchName())
		assert.Equal(t, "team-a", sel["binding"].GetNamespace())
	})
	t.Run("then asks for the Binding's pool", func(t *testing.T) {
		rsp := run(t, request{composite: deployment, required: map[string][]string{"instancetype/a10g": {a10g}, "binding": {binding}}})
		assert.Equal(t, "dram", rsp.GetRequirements().GetResources()["pool"].GetMatchName())
		assert.Empty(t, rsp.GetDesired().GetResources())
	})
	t.Run("renders one ModelRole per role, the role Service and the deployment Service", func(t *testing.T) {
		rsp := run(t, request{composite: deployment, required: resolvedDeploymentInputs()})
		desired := rsp.GetDesired().GetResources()
		require.Contains(t, desired, "role-server")
		assert.Equal(t, "ModelRole", field(t, desired["role-server"], "kind"))
		assert.Equal(t, "chat-server", field(t, desired["role-server"], "metadata", "name"))
		assert.EqualValues(t, 2, field(t, desired["role-server"], "spec", "replicas"))
		assert.Len(t, field(t, desired["role-server"], "spec", "revision"), 10)
		assert.Equal(t, "chat-server", field(t, desired["service-server"], "metadata", "name"))
		assert.Equal(t, "chat", field(t, desired["service"], "metadata", "name"))
		assert.Equal(t, "0", field(t, desired["service"], "spec", "selector", "modeldeployment.gpustack.ai/member-index"),
			"Services front leaders")
		assert.Equal(t, fnv1.Ready_READY_FALSE, rsp.GetDesired().GetComposite().GetReady(), "a Service is ready once it exists, the deployment once every resource is")
		assert.Equal(t, "http://chat.team-a.svc:8000", field(t, rsp.GetDesired().GetComposite(), "status", "endpoint"))
		assert.Equal(t, "0S", field(t, rsp.GetDesired().GetComposite(), "status", "roleSummary"))
		for key, r := range desired {
			assert.NotContains(t, []any{"ControllerRevision", "ModelReplica"}, field(t, r, "kind"),
				"%s: the rollout controller snapshots the revisions and creates the replicas", key)
		}
	})
	t.Run("a deployment's Kueue priority class labels every Pod of every role", func(t *testing.T) {
		labelled := strings.Replace(deployment, "metadata: {name: chat, namespace: team-a}",
			"metadata: {name: chat, namespace: team-a, labels: {kueue.x-k8s.io/priority-class: serving-high}}", 1)
		require.NotEqual(t, deployment, labelled)
		labelled = strings.Replace(labelled, "  roles:\n", "  roles:\n  - {name: decode, kind: Decode, replicas: 1, size: 2, instanceType: a10g}\n", 1)
		desired := run(t, request{composite: labelled, required: resolvedDeploymentInputs()}).GetDesired().GetResources()
		for _, key := range []string{"role-server", "role-decode"} {
			require.Contains(t, desired, key)
			assert.Equal(t, "serving-high", field(t, desired[key], "spec", "template", "metadata", "labels", "kueue.x-k8s.io/priority-class"), key)
		}
		plain := run(t, request{composite: deployment, required: resolvedDeploymentInputs()}).GetDesired().GetResources()
		assert.Nil(t, field(t, plain["role-server"], "spec", "template", "metadata", "labels", "kueue.x-k8s.io/priority-class"),
			"near miss: without the label the Pods carry none, and Kueue gives the default priority")
	})
	t.Run("a role is ready when its ModelRole is, and its ready replicas count in status", func(t *testing.T) {
		rsp := run(t, request{composite: deployment, required: resolvedDeploymentInputs(), observed: map[string]string{
			"role-server": `{apiVersion: internal.mdplane.io/v1alpha1, kind: ModelRole, metadata: {name: chat-server},
			  status: {ready: 2, upToDate: 2, conditions: [{type: Ready, status: "True"}]}}`,
			"service": `{apiVersion: v1, kind: Service, metadata: {name: chat}}`,
		}})
		desired := rsp.GetDesired().GetResources()
		assert.Equal(t, fnv1.Ready_READY_FALSE, rsp.GetDesired().GetComposite().GetReady(), "the role's Service is not observed yet")
		assert.Equal(t, fnv1.Ready_READY_TRUE, desired["role-server"].GetReady())
		assert.Equal(t, "2S", field(t, rsp.GetDesired().GetComposite(), "status", "roleSummary"))
		roles := field(t, rsp.GetDesired().GetComposite(), "status", "roles").([]any)
		assert.EqualValues(t, 2, roles[0].(map[string]any)["ready"])
	})
	t.Run("roleSummary's R counts the router Deployment's ready Pods", func(t *testing.T) {
		routed := strings.Replace(deployment, "  roles:\n", "  router: {name: llm-d-router}\n  roles:\n", 1)
		require.NotEqual(t, deployment, routed)
		for _, tc := range []struct{ observed, want string }{
			{"", "0R0S"},
			{`{apiVersion: apps/v1, kind: Deployment, metadata: {name: chat-router}, status: {replicas: 3, readyReplicas: 2}}`, "2R0S"},
		} {
			observed := map[string]string{}
			if tc.observed != "" {
				observed["router-deployment"] = tc.observed
			}
			rsp := run(t, request{composite: routed, required: resolvedDeploymentInputs(), observed: observed})
			assert.Equal(t, tc.want, field(t, rsp.GetDesired().GetComposite(), "status", "roleSummary"))
		}
	})
	t.Run("a missing InstanceType fails the render with RenderFailed", func(t *testing.T) {
		inputs := resolvedDeploymentInputs()
		inputs["instancetype/a10g"] = nil
		msg, reason := fatalMessage(run(t, request{composite: deployment, required: inputs}))
		assert.Equal(t, "RenderFailed", reason)
		assert.Contains(t, msg, `names InstanceType "a10g", which does not exist`)
	})
	t.Run("once the InstanceType is fetched, asks for its manufacturer's RuntimeClass by name before rendering", func(t *testing.T) {
		inputs := resolvedDeploymentInputs()
		delete(inputs, "runtimeclass/nvidia")
		rsp := run(t, request{composite: deployment, required: inputs})
		sel := rsp.GetRequirements().GetResources()["runtimeclass/nvidia"]
		require.NotNil(t, sel)
		assert.Equal(t, "nvidia", sel.GetMatchName())
		assert.Equal(t, "node.k8s.io/v1", sel.GetApiVersion())
		assert.Equal(t, "RuntimeClass", sel.GetKind())
		assert.Nil(t, sel.Namespace, "RuntimeClasses are cluster-scoped")
		assert.Empty(t, rsp.GetDesired().GetResources())
	})
	t.Run("an existing RuntimeClass is the Pods' runtimeClassName and part of the revision", func(t *testing.T) {
		without := run(t, request{composite: deployment, required: resolvedDeploymentInputs()}).GetDesired().GetResources()["role-server"]
		inputs := resolvedDeploymentInputs()
		inputs["runtimeclass/nvidia"] = []string{nvidiaRuntimeClass}
		with := run(t, request{composite: deployment, required: inputs}).GetDesired().GetResources()["role-server"]
		assert.Equal(t, "nvidia", field(t, with, "spec", "template", "spec", "runtimeClassName"))
		assert.NotEqual(t, field(t, without, "spec", "revision"), field(t, with, "spec", "revision"), "the class is a bound resource: it moves the revision")
	})
	t.Run("a missing RuntimeClass is no error: the Pods run without one", func(t *testing.T) {
		rsp := run(t, request{composite: deployment, required: resolvedDeploymentInputs()})
		msg, _ := fatalMessage(rsp)
		assert.Empty(t, msg)
		assert.Nil(t, field(t, rsp.GetDesired().GetResources()["role-server"], "spec", "template", "spec", "runtimeClassName"))
	})
	t.Run("a type without accelerators asks for no RuntimeClass", func(t *testing.T) {
		cpu := strings.Replace(a10g, "acceleratable: true", "acceleratable: false", 1)
		inputs := resolvedDeploymentInputs()
		inputs["instancetype/a10g"] = []string{cpu}
		delete(inputs, "runtimeclass/nvidia")
		rsp := run(t, request{composite: deployment, required: inputs})
		assert.NotContains(t, rsp.GetRequirements().GetResources(), "runtimeclass/nvidia")
		assert.Nil(t, field(t, rsp.GetDesired().GetResources()["role-server"], "spec", "template", "spec", "runtimeClassName"))
	})
	t.Run("a take-over role is reported unmanaged", func(t *testing.T) {
		takeover := deployment[:len(deployment)-2] + ", command: [sleep, infinity]}\n"
		rsp := run(t, request{composite: takeover, required: resolvedDeploymentInputs()})
		roles := field(t, rsp.GetDesired().GetComposite(), "status", "roles").([]any)
		assert.Equal(t, true, roles[0].(map[string]any)["unmanaged"])
	})
	t.Run("unmanaged is what the standing replicas run, not what the spec now says", func(t *testing.T) {
		observedRole := func(managed, unmanaged int) map[string]string {
			return map[string]string{"role-server": fmt.Sprintf(`{apiVersion: internal.mdplane.io/v1alpha1, kind: ModelRole, metadata: {name: chat-server, namespace: team-a}, status: {modes: {managed: %d, unmanaged: %d}}}`, managed, unmanaged)}
		}
		unmanaged := func(composite string, observed map[string]string) any {
			rsp := run(t, request{composite: composite, required: resolvedDeploymentInputs(), observed: observed})
			return field(t, rsp.GetDesired().GetComposite(), "status", "roles").([]any)[0].(map[string]any)["unmanaged"]
		}
		takeover := deployment[:len(deployment)-2] + ", command: [sleep, infinity]}\n"
		assert.Equal(t, true, unmanaged(deployment, observedRole(1, 1)), "a managed spec part-way back from a take-over")
		assert.Nil(t, unmanaged(takeover, observedRole(2, 0)), "a take-over spec whose replicas all still run managed")
		assert.Equal(t, true, unmanaged(takeover, observedRole(0, 0)), "nothing standing: the spec says what will run")
	})
}

func TestUnknownCompositeIsFatal(t *testing.T) {
	msg, _ := fatalMessage(run(t, request{composite: `{apiVersion: example.org/v1, kind: Other, metadata: {name: x}}`}))
	assert.Contains(t, msg, "not example.org/v1, Kind=Other")
	for _, kind := range []string{"ModelRole", "ModelReplica"} {
		msg, _ = fatalMessage(run(t, request{composite: `{apiVersion: internal.mdplane.io/v1alpha1, kind: ` + kind + `, metadata: {name: x}}`}))
		assert.Contains(t, msg, "composes ModelDeployments, not internal.mdplane.io/v1alpha1, Kind="+kind,
			"ModelRoles and ModelReplicas are no composites: mdplane's controllers reconcile them")
	}
}
