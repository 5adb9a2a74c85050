package webhooks_test

import (
	"bufio"
	"bytes"
	"io"
	"io/fs"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"

	manifests "github.com/mdplane/mdplane/package"
)

// sentTo returns whether the API server sends an object to the named mutating webhook of the
// package's manifests: its match conditions compiled and evaluated as the API server does (the
// object as a dynamic value in the base CEL environment), an evaluation error counting as sent, as
// failurePolicy Fail does not skip.
func sentTo(t *testing.T, webhook string) func(obj map[string]any) bool {
	t.Helper()
	raw, err := fs.ReadFile(manifests.FS, "webhooks/manifests.yaml")
	require.NoError(t, err)
	var found *admissionregistrationv1.MutatingWebhook
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	for {
		doc, err := docs.Read()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		require.NoError(t, yaml.Unmarshal(doc, cfg))
		if cfg.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		for i := range cfg.Webhooks {
			if cfg.Webhooks[i].Name == webhook {
				found = &cfg.Webhooks[i]
			}
		}
	}
	require.NotNil(t, found, "no mutating webhook %s in the package", webhook)
	envs, err := environment.MustBaseEnvSet(version.MajorMinor(1, 35)).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions:        []cel.EnvOption{cel.Variable("object", cel.DynType), cel.Variable("oldObject", cel.DynType)},
	})
	require.NoError(t, err)
	env, err := envs.Env(environment.StoredExpressions)
	require.NoError(t, err)
	var programs []cel.Program
	for _, c := range found.MatchConditions {
		ast, issues := env.Compile(c.Expression)
		require.NoError(t, issues.Err(), "match condition %s", c.Name)
		require.Equal(t, cel.BoolType, ast.OutputType(), "match condition %s", c.Name)
		program, err := env.Program(ast)
		require.NoError(t, err)
		programs = append(programs, program)
	}
	return func(obj map[string]any) bool {
		for _, p := range programs {
			out, _, err := p.Eval(map[string]any{"object": obj, "oldObject": nil})
			if err == nil && out.Value() == false {
				return false
			}
		}
		return true
	}
}

// TestTheDefaulterIsSentOnlyWhatItMayDefault: the ModelDeployment defaulter's match condition
// sends a deployment exactly when a role leaves its accelerator count unset and it is not being
// deleted; what the expression cannot read as roles is sent too, to be judged as before.
func TestTheDefaulterIsSentOnlyWhatItMayDefault(t *testing.T) {
	sent := sentTo(t, "mmodeldeployment.worker.gpustack.ai")
	role := func(resources any) map[string]any {
		r := map[string]any{"name": "server", "instanceType": "a10g"}
		if resources != nil {
			r["resources"] = resources
		}
		return r
	}
	deployment := func(roles ...any) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "md"}, "spec": map[string]any{"roles": roles}}
	}
	deleting := deployment(role(nil))
	deleting["metadata"].(map[string]any)["deletionTimestamp"] = "2026-12-03T00:00:00Z"
	for _, row := range []struct {
		name string
		obj  map[string]any
		sent bool
	}{
		{"a role without resources is sent", deployment(role(nil)), true},
		{"a role whose resources name no accelerator field is sent", deployment(role(map[string]any{"cpu": "4"})), true},
		{"every role declaring its count is not sent", deployment(role(map[string]any{"accelerator": "2"})), false},
		{"one role of two leaving its count unset is sent", deployment(role(map[string]any{"accelerator": "2"}), role(nil)), true},
		{"a slice of memory is a declared count", deployment(role(map[string]any{"acceleratorSlicedMemoryPercentage": int64(50)})), false},
		{"a slice of cores is a declared count", deployment(role(map[string]any{"acceleratorSlicedCoresPercentage": int64(50)})), false},
		{"a partition profile is a declared count", deployment(role(map[string]any{"acceleratorPartitionedProfile": "1g.10gb"})), false},
		{"an empty partition profile declares nothing", deployment(role(map[string]any{"acceleratorPartitionedProfile": ""})), true},
		{"a deployment being deleted is not sent", deleting, false},
		{"a spec without roles is sent", map[string]any{"metadata": map[string]any{"name": "md"}, "spec": map[string]any{}}, true},
		{"roles that are not a list are sent", map[string]any{"metadata": map[string]any{}, "spec": map[string]any{"roles": "server"}}, true},
		{"a role that is not a map is sent", deployment("server"), true},
		{"resources that are not a map are sent", deployment(role("2")), true},
	} {
		t.Run(row.name, func(t *testing.T) {
			assert.Equal(t, row.sent, sent(row.obj))
		})
	}
}
