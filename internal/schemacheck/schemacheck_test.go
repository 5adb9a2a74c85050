package schemacheck_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
)

func checker(t *testing.T) *schemacheck.Checker {
	t.Helper()
	c, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	return c
}

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	docs, err := schemacheck.SplitDocuments("test.yaml", []byte(manifest))
	require.NoError(t, err)
	require.Len(t, docs, 1)
	return docs[0].Object
}

// deployment is a valid ModelDeployment with the given spec.roles (and optional extra spec lines),
// indented as a list under roles.
func deployment(spec string) string {
	return `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata:
  name: qwen-chat
  namespace: team-a
spec:
  model:
    name: Qwen/Qwen2.5-72B-Instruct
  engine:
    name: vLLM
    image: vllm/vllm-openai:v0.25.1
` + spec
}

func role(name string, extra ...string) string {
	s := "    - name: " + name + "\n      instanceType: gpustack-nvidia-a10g-linux-amd64\n"
	for _, e := range extra {
		s += "      " + e + "\n"
	}
	return s
}

func TestDefinitionsAreAcceptedByTheAPIServer(t *testing.T) {
	crds, err := schemacheck.Definitions(manifests.FS)
	require.NoError(t, err)
	names := map[string]bool{}
	for _, crd := range crds {
		names[crd.Name] = true
		errs, err := schemacheck.ValidateDefinition(crd)
		require.NoError(t, err)
		assert.Empty(t, errs, crd.Name)
	}
	assert.Equal(t, map[string]bool{
		"modeldeployments.worker.gpustack.ai":    true,
		"kvcachebackends.worker.gpustack.ai":     true,
		"kvcachepools.worker.gpustack.ai":        true,
		"kvcachepoolbindings.worker.gpustack.ai": true,
		"instancetypes.worker.gpustack.ai":       true,
		"modelartifacts.worker.gpustack.ai":      true,
		"modelroles.internal.mdplane.io":         true,
		"modelreplicas.internal.mdplane.io":      true,
	}, names)
}

func TestModelDeploymentIsANamespacedCompositeNamedMD(t *testing.T) {
	crds, err := schemacheck.Definitions(manifests.FS)
	require.NoError(t, err)
	var md *extv1.CustomResourceDefinition
	for _, crd := range crds {
		if crd.Name == "modeldeployments.worker.gpustack.ai" {
			md = crd
		}
	}
	require.NotNil(t, md)
	assert.Equal(t, extv1.NamespaceScoped, md.Spec.Scope)
	assert.Equal(t, []string{"md"}, md.Spec.Names.ShortNames)
	assert.Contains(t, md.Spec.Names.Categories, "composite")
	var columns []string
	for _, c := range md.Spec.Versions[0].AdditionalPrinterColumns {
		if c.Priority == 0 {
			columns = append(columns, strings.ToUpper(c.Name))
		}
	}
	// Engine, Roles and Endpoint are the XRD's; Crossplane appends SYNCED, READY, COMPOSITION and AGE.
	assert.Equal(t, []string{"ENGINE", "ROLES", "ENDPOINT", "SYNCED", "READY", "COMPOSITION", "AGE"}, columns)
	assert.Contains(t, md.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties, "crossplane",
		"Crossplane adds spec.crossplane to every v2 XR")
}

func TestEveryExampleIsValid(t *testing.T) {
	c := checker(t)
	files, err := filepath.Glob("../../examples/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		docs, err := schemacheck.SplitDocuments(f, data)
		require.NoError(t, err)
		for _, d := range docs {
			if !c.Knows(d.Object.GroupVersionKind()) {
				continue
			}
			_, violations, err := c.Check(d.Object, nil)
			require.NoError(t, err)
			assert.Empty(t, violations, d.Source)
			checked++
		}
	}
	assert.GreaterOrEqual(t, checked, 7, "three deployments and the four cluster objects")
}

func TestSchemaRefusals(t *testing.T) {
	eleven := ""
	for i := range 11 {
		eleven += role(fmt.Sprintf("r%d", i))
	}
	cases := []struct {
		rule, manifest, path, reason string
	}{
		{
			rule:     "at most 10 roles, named as mdplane's own limit",
			manifest: deployment("  roles:\n" + eleven),
			path:     "spec.roles",
			reason:   "a ModelDeployment declares at most 10 roles: this is mdplane's own role-count limit",
		},
		{
			rule:     "at least one role",
			manifest: deployment("  roles: []\n"),
			path:     "spec.roles",
			reason:   "should have at least 1 items",
		},
		{
			rule:     "replicas at most 1024",
			manifest: deployment("  roles:\n" + role("server", "replicas: 1025")),
			path:     "spec.roles[0].replicas",
			reason:   "Invalid value: 1025: spec.roles[0].replicas in body should be less than or equal to 1024",
		},
		{
			rule:     "size at most 64",
			manifest: deployment("  roles:\n" + role("server", "size: 65")),
			path:     "spec.roles[0].size",
			reason:   "Invalid value: 65: spec.roles[0].size in body should be less than or equal to 64",
		},
		{
			rule:     "role names are unique: roles is a list keyed on name",
			manifest: deployment("  roles:\n" + role("server") + role("server", "replicas: 2")),
			path:     "spec.roles[1]",
			reason:   `Duplicate value: {"name":"server"}`,
		},
		{
			rule:     "a template field on a role is an unknown field",
			manifest: deployment("  roles:\n" + role("server", "template: {spec: {}}")),
			path:     "spec.roles[0].template",
			reason:   `unknown field "spec.roles[0].template"`,
		},
		{
			rule: "engine.image is required and not empty",
			manifest: strings.Replace(deployment("  roles:\n"+role("server")),
				"image: vllm/vllm-openai:v0.25.1", `image: ""`, 1),
			path:   "spec.engine.image",
			reason: `Invalid value: "": spec.engine.image in body should be at least 1 chars long`,
		},
		{
			rule:     "engine.name is vLLM or SGLang",
			manifest: strings.Replace(deployment("  roles:\n"+role("server")), "name: vLLM", "name: vllm", 1),
			path:     "spec.engine.name",
			reason:   `Unsupported value: "vllm": supported values: "vLLM", "SGLang"`,
		},
		{
			rule:     "kind is closed",
			manifest: deployment("  roles:\n" + role("server", "kind: Router")),
			path:     "spec.roles[0].kind",
			reason:   `Unsupported value: "Router"`,
		},
		{
			rule:     "role names are DNS labels",
			manifest: deployment("  roles:\n" + role("Server_1")),
			path:     "spec.roles[0].name",
			reason:   "should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'",
		},
		{
			rule:     "instanceType is required",
			manifest: deployment("  roles:\n    - name: server\n"),
			path:     "spec.roles[0].instanceType",
			reason:   "Required value",
		},
		{
			rule:     "startupTimeoutSeconds at least 10",
			manifest: deployment("  roles:\n" + role("server", "startupTimeoutSeconds: 5")),
			path:     "spec.roles[0].startupTimeoutSeconds",
			reason:   "should be greater than or equal to 10",
		},
		{
			rule:     "startupTimeoutSeconds at most 86400",
			manifest: deployment("  roles:\n" + role("server", "startupTimeoutSeconds: 86401")),
			path:     "spec.roles[0].startupTimeoutSeconds",
			reason:   "should be less than or equal to 86400",
		},
		{
			rule:     "terminationGracePeriodSeconds at least 15: the drain hook's settle and two reads fit before its deadline",
			manifest: deployment("  roles:\n" + role("server", "terminationGracePeriodSeconds: 14")),
			path:     "spec.roles[0].terminationGracePeriodSeconds",
			reason:   "should be greater than or equal to 15",
		},
		{
			rule:     "terminationGracePeriodSeconds at most 3600",
			manifest: deployment("  roles:\n" + role("server", "terminationGracePeriodSeconds: 3601")),
			path:     "spec.roles[0].terminationGracePeriodSeconds",
			reason:   "should be less than or equal to 3600",
		},
		{
			rule:     "connector is Mooncake",
			manifest: deployment("  kvCache: {poolRef: {name: team-a-dram}, connector: NIXL}\n  roles:\n" + role("server")),
			path:     "spec.kvCache.connector",
			reason:   `Unsupported value: "NIXL": supported values: "Mooncake"`,
		},
		{
			rule:     "an empty poolRef.name names no Binding",
			manifest: deployment("  kvCache: {poolRef: {name: \"\"}}\n  roles:\n" + role("server")),
			path:     "spec.kvCache.poolRef.name",
			reason:   "the KVCachePoolBinding is the authorization point and an empty reference names none",
		},
		{
			rule:     "a poolRef outside this namespace is unrepresentable",
			manifest: deployment("  kvCache: {poolRef: {name: team-a-dram, namespace: team-b}}\n  roles:\n" + role("server")),
			path:     "spec.kvCache.poolRef.namespace",
			reason:   `unknown field "spec.kvCache.poolRef.namespace"`,
		},
		{
			rule:     "a self-declared reuse domain is unrepresentable",
			manifest: deployment("  kvCache: {poolRef: {name: team-a-dram}, domain: {name: mine}}\n  roles:\n" + role("server")),
			path:     "spec.kvCache.domain",
			reason:   `unknown field "spec.kvCache.domain"`,
		},
		{
			rule:     "an env entry names a variable once",
			manifest: deployment("  roles:\n" + role("server", "env: [{name: A, value: x}, {name: A, value: y}]")),
			path:     "spec.roles[0].env[1]",
			reason:   "Duplicate value",
		},
	}
	c := checker(t)
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			_, violations, err := c.Check(object(t, tc.manifest), nil)
			require.NoError(t, err)
			assertViolation(t, violations, tc.path, tc.reason)
		})
	}
}

func assertViolation(t *testing.T, violations []schemacheck.Violation, path, reason string) {
	t.Helper()
	for _, v := range violations {
		if v.Path == path && strings.Contains(v.Reason, reason) {
			return
		}
	}
	t.Errorf("no violation at %s containing %q; got %v", path, reason, violations)
}

// TestTerminationGraceBoundsAreInclusive: the near misses of the 15..3600 bound are accepted.
func TestTerminationGraceBoundsAreInclusive(t *testing.T) {
	c := checker(t)
	for _, seconds := range []string{"15", "3600"} {
		t.Run(seconds, func(t *testing.T) {
			_, violations, err := c.Check(object(t, deployment("  roles:\n"+role("server", "terminationGracePeriodSeconds: "+seconds))), nil)
			require.NoError(t, err)
			assert.Empty(t, violations)
		})
	}
}

func TestFrozenFields(t *testing.T) {
	stored := deployment("  kvCache: {poolRef: {name: team-a-dram}}\n  router: {name: llm-d-router}\n  roles:\n" +
		role("prefill", "kind: Prefill") + role("decode", "kind: Decode"))
	cases := []struct {
		rule, old, new, path, reason string
	}{
		{
			rule:   "model is frozen",
			old:    stored,
			new:    strings.Replace(stored, "Qwen2.5-72B-Instruct", "Qwen2.5-7B-Instruct", 1),
			path:   "spec.model",
			reason: "spec.model is frozen: a different model describes a different deployment, which is created rather than edited",
		},
		{
			rule:   "engine.name is frozen",
			old:    stored,
			new:    strings.Replace(stored, "name: vLLM", "name: SGLang", 1),
			path:   "spec.engine",
			reason: "spec.engine.name is frozen: a different engine describes a different deployment",
		},
		{
			rule:   "kvCache is frozen",
			old:    stored,
			new:    strings.Replace(stored, "name: team-a-dram", "name: team-a-hbm", 1),
			path:   "spec.kvCache",
			reason: "spec.kvCache is frozen",
		},
		{
			rule:   "kvCache cannot be removed",
			old:    stored,
			new:    strings.Replace(stored, "  kvCache: {poolRef: {name: team-a-dram}}\n", "", 1),
			path:   "spec",
			reason: "spec.kvCache is frozen: adding or removing the cache binding describes a different deployment",
		},
		{
			rule:   "router.name is frozen in place",
			old:    stored,
			new:    strings.Replace(stored, "llm-d-router", "vllm-router", 1),
			path:   "spec.router",
			reason: "spec.router.name is frozen in place",
		},
		{
			rule:   "a role cannot be added",
			old:    stored,
			new:    stored + role("extra", "kind: Server"),
			path:   "spec.roles",
			reason: "the set of roles is frozen",
		},
		{
			rule:   "a role cannot be renamed",
			old:    stored,
			new:    strings.Replace(stored, "name: decode", "name: decoder", 1),
			path:   "spec.roles",
			reason: "the set of roles is frozen",
		},
		{
			rule:   "a role's kind is frozen",
			old:    stored,
			new:    strings.Replace(stored, "kind: Decode", "kind: Prefill", 1),
			path:   "spec.roles[1]",
			reason: "kind is frozen",
		},
		{
			rule:   "a role restated without its kind picks up Server and is refused as a kind change",
			old:    stored,
			new:    strings.Replace(stored, "      kind: Prefill\n", "", 1),
			path:   "spec.roles[0]",
			reason: "kind is frozen",
		},
	}
	c := checker(t)
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			_, violations, err := c.Check(object(t, tc.new), object(t, tc.old))
			require.NoError(t, err)
			assertViolation(t, violations, tc.path, tc.reason)
		})
	}
}

func TestEditableFields(t *testing.T) {
	stored := deployment("  router: {name: llm-d-router}\n  roles:\n" + role("server", "replicas: 4"))
	cases := map[string]string{
		"replicas":       strings.Replace(stored, "replicas: 4", "replicas: 8", 1),
		"size":           strings.Replace(stored, "replicas: 4", "replicas: 4\n      size: 2", 1),
		"engine.image":   strings.Replace(stored, "v0.25.1", "v0.26.0", 1),
		"router removed": strings.Replace(stored, "  router: {name: llm-d-router}\n", "", 1),
		"instanceType":   strings.Replace(stored, "a10g", "h20", 1),
	}
	c := checker(t)
	for field, edited := range cases {
		t.Run(field, func(t *testing.T) {
			_, violations, err := c.Check(object(t, edited), object(t, stored))
			require.NoError(t, err)
			assert.Empty(t, violations)
		})
	}
}

func TestDefaults(t *testing.T) {
	c := checker(t)
	stored, violations, err := c.Check(object(t, deployment("  kvCache: {poolRef: {name: team-a-dram}}\n  roles:\n"+role("server"))), nil)
	require.NoError(t, err)
	require.Empty(t, violations)
	r := stored.Object["spec"].(map[string]any)["roles"].([]any)[0].(map[string]any)
	assert.Equal(t, "Server", r["kind"], "kind defaults to Server")
	assert.EqualValues(t, 1, r["replicas"], "replicas defaults to 1")
	assert.EqualValues(t, 1, r["size"], "size defaults to 1")
	assert.EqualValues(t, 1800, r["startupTimeoutSeconds"], "startupTimeoutSeconds defaults to 1800")
	connector, _, _ := unstructured.NestedString(stored.Object, "spec", "kvCache", "connector")
	assert.Equal(t, "Mooncake", connector, "connector defaults to Mooncake")

	binding, violations, err := c.Check(object(t, `apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: b, namespace: team-a}
spec:
  poolRef: {name: dram}
  domain: {blockSize: 16, dtype: bfloat16}
  quota: {ceiling: 1Gi}
`), nil)
	require.NoError(t, err)
	require.Empty(t, violations)
	domain, _, _ := unstructured.NestedString(binding.Object, "spec", "domain", "name")
	assert.Equal(t, "default", domain, "a Binding's domain name defaults to default")
}

func TestBindingRules(t *testing.T) {
	binding := `apiVersion: worker.gpustack.ai/v1
kind: KVCachePoolBinding
metadata: {name: b, namespace: team-a}
spec:
  poolRef: {name: dram}
  domain: {name: chat, blockSize: 16, dtype: bfloat16}
  quota: {ceiling: 1Gi}
`
	c := checker(t)
	t.Run("domain is frozen", func(t *testing.T) {
		_, v, err := c.Check(object(t, strings.Replace(binding, "blockSize: 16", "blockSize: 32", 1)), object(t, binding))
		require.NoError(t, err)
		assertViolation(t, v, "spec.domain", "spec.domain is frozen")
	})
	t.Run("poolRef is frozen", func(t *testing.T) {
		_, v, err := c.Check(object(t, strings.Replace(binding, "name: dram", "name: hbm", 1)), object(t, binding))
		require.NoError(t, err)
		assertViolation(t, v, "spec.poolRef", "spec.poolRef is frozen")
	})
	t.Run("the domain block is required", func(t *testing.T) {
		_, v, err := c.Check(object(t, strings.Replace(binding, "  domain: {name: chat, blockSize: 16, dtype: bfloat16}\n", "", 1)), nil)
		require.NoError(t, err)
		assertViolation(t, v, "spec.domain", "Required value")
	})
	t.Run("the quota ceiling is positive", func(t *testing.T) {
		_, v, err := c.Check(object(t, strings.Replace(binding, "ceiling: 1Gi", "ceiling: \"0\"", 1)), nil)
		require.NoError(t, err)
		assertViolation(t, v, "spec.quota.ceiling", "must be a positive quantity")
	})
}

func TestReplicaSpecIsFrozen(t *testing.T) {
	replica := `apiVersion: internal.mdplane.io/v1alpha1
kind: ModelReplica
metadata: {name: qwen-chat-server-0, namespace: team-a}
spec: {deploymentName: qwen-chat, roleName: server, ordinal: 0, revision: abc, revisionName: qwen-chat-server-abc}
`
	c := checker(t)
	_, v, err := c.Check(object(t, strings.Replace(replica, "revision: abc", "revision: def", 1)), object(t, replica))
	require.NoError(t, err)
	assertViolation(t, v, "spec", "a ModelReplica's spec is frozen")
}

func TestInstanceTypeIsFrozenButForItsLabels(t *testing.T) {
	stored := `apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata: {name: gpustack-nvidia-a10g-linux-amd64}
spec:
  displayName: NVIDIA A10G
  acceleratable: true
  acceleratorGroup: nvidia-a10g
  os: linux
  arch: amd64
  unitResources: {cpu: "8", ram: 32Gi}
  localStorage: 100Gi
`
	c := checker(t)
	for field, edited := range map[string]string{
		"displayName": strings.Replace(stored, "displayName: NVIDIA A10G", "displayName: A10G", 1),
		"inactive":    stored + "  inactive: true\n",
		"description": stored + "  description: retired next quarter\n",
	} {
		t.Run(field+" is editable", func(t *testing.T) {
			_, v, err := c.Check(object(t, edited), object(t, stored))
			require.NoError(t, err)
			assert.Empty(t, v)
		})
	}
	for field, edited := range map[string]string{
		"unitResources":    strings.Replace(stored, `cpu: "8"`, `cpu: "4"`, 1),
		"acceleratorGroup": strings.Replace(stored, "  acceleratorGroup: nvidia-a10g\n", "", 1),
		"localStorage":     strings.Replace(stored, "100Gi", "200Gi", 1),
		"arch":             strings.Replace(stored, "arch: amd64", "arch: arm64", 1),
	} {
		t.Run(field+" is frozen", func(t *testing.T) {
			_, v, err := c.Check(object(t, edited), object(t, stored))
			require.NoError(t, err)
			assertViolation(t, v, "spec", "an InstanceType is frozen but for displayName, description and inactive")
		})
	}
}

func TestBackendRules(t *testing.T) {
	managed := `apiVersion: worker.gpustack.ai/v1
kind: KVCacheBackend
metadata: {name: dram}
spec:
  connection:
    managed:
      leader: {}
      members:
        - {nodeSelector: {pool: dram}, medium: DRAM, capacityPerMember: 8Gi}
`
	external := `apiVersion: worker.gpustack.ai/v1
kind: KVCacheBackend
metadata: {name: far}
spec:
  connection:
    external:
      endpoints:
        - {name: Client, address: "store.example:50051"}
        - {name: Admin, address: "store.example:9003"}
`
	c := checker(t)
	rows := []struct {
		rule, manifest, path, reason string
	}{
		{"connection needs managed or external", strings.Replace(managed, "    managed:\n      leader: {}\n      members:\n        - {nodeSelector: {pool: dram}, medium: DRAM, capacityPerMember: 8Gi}\n", "    {}\n", 1),
			"spec.connection", `one of "managed" or "external" must be set`},
		{"connection takes one of managed and external", strings.Replace(external, "    external:\n", "    managed: {leader: {}, members: [{nodeSelector: {a: b}, medium: DRAM, capacityPerMember: 1Gi}]}\n    external:\n", 1),
			"spec.connection", `only one of "managed" or "external" may be set`},
		{"external needs Client and Admin", strings.Replace(external, "        - {name: Admin, address: \"store.example:9003\"}\n", "", 1),
			"spec.connection.external.endpoints", "needs both a Client and an Admin endpoint"},
		{"an endpoint address is a clean host:port", strings.Replace(external, "store.example:9003", "http://store.example:9003", 1),
			"spec.connection.external.endpoints", "clean host:port"},
		{"protocol is in the API spelling", strings.Replace(managed, "spec:\n", "spec:\n  transport: {protocol: rdma}\n", 1),
			"spec.transport.protocol", `Unsupported value: "rdma"`},
		{"a group protocol is in the API spelling", strings.Replace(managed, "capacityPerMember: 8Gi}", "capacityPerMember: 8Gi, transport: {protocol: ascend}}", 1),
			"spec.connection.managed.members[0].transport.protocol", `Unsupported value: "ascend"`},
		{"leader replicas above 1 need highAvailability", strings.Replace(managed, "leader: {}", "leader: {replicas: 3}", 1),
			"spec.connection.managed.leader", "needs leader.highAvailability"},
		{"a blank image is refused", strings.Replace(managed, "spec:\n", "spec:\n  image: \"  \"\n", 1),
			"spec.image", "spec.image is blank"},
		{"one group carries the disk tier", strings.Replace(managed, "        - {nodeSelector: {pool: dram}, medium: DRAM, capacityPerMember: 8Gi}\n",
			"        - {nodeSelector: {pool: a}, medium: DRAM, capacityPerMember: 8Gi, localDisks: [{path: /d}]}\n        - {nodeSelector: {pool: b}, medium: DRAM, capacityPerMember: 8Gi, localDisks: [{path: /d}]}\n", 1),
			"spec.connection.managed.members", "only one group"},
		{"no host mount of /dev/infiniband", strings.Replace(managed, "capacityPerMember: 8Gi}", "capacityPerMember: 8Gi, hostPaths: [{path: /dev/infiniband, mountPath: /dev/infiniband}]}", 1),
			"spec.connection.managed.members[0].hostPaths[0]", "/dev/infiniband is refused"},
	}
	for _, row := range rows {
		t.Run(row.rule, func(t *testing.T) {
			_, v, err := c.Check(object(t, row.manifest), nil)
			require.NoError(t, err)
			assertViolation(t, v, row.path, row.reason)
		})
	}
	// The near-misses of the rows above: each admitted.
	admitted := map[string]string{
		"a managed backend":                             managed,
		"an external backend":                           external,
		"mixed group protocols are schema-valid":        strings.Replace(managed, "capacityPerMember: 8Gi}", "capacityPerMember: 8Gi, transport: {protocol: RDMA}}", 1),
		"leader replicas above 1 with highAvailability": strings.Replace(managed, "leader: {}", "leader: {replicas: 3, highAvailability: {}}", 1),
		"one group with a disk tier":                    strings.Replace(managed, "capacityPerMember: 8Gi}", "capacityPerMember: 8Gi, localDisks: [{path: /d}]}", 1),
	}
	for name, manifest := range admitted {
		t.Run(name, func(t *testing.T) {
			stored, v, err := c.Check(object(t, manifest), nil)
			require.NoError(t, err)
			require.Empty(t, v)
			protocol, _, _ := unstructured.NestedString(stored.Object, "spec", "transport", "protocol")
			assert.Equal(t, "Auto", protocol, "spec.transport defaults to {} so its protocol defaults to Auto")
		})
	}
}

// TestViolationsAreInAFixedOrder: the API server's schema validator reports the violations of one
// object in map order; Check returns them sorted by path, so a refusal reads the same on every run
// (found by FuzzDeploymentFromYAML, whose input this is).
func TestViolationsAreInAFixedOrder(t *testing.T) {
	c := checker(t)
	obj := object(t, "apiVersion: worker.gpustack.ai/v1\nkind: ModelDeployment\nspec:\n  engine: \n  roles: ")
	_, first, err := c.Check(obj, nil)
	require.NoError(t, err)
	require.Greater(t, len(first), 2)
	for range 50 {
		_, again, err := c.Check(obj, nil)
		require.NoError(t, err)
		require.Equal(t, first, again)
	}
	var paths []string
	for _, v := range first {
		paths = append(paths, v.Path)
	}
	assert.IsNonDecreasing(t, paths)
}

// TestMetadataThatIsNotAnObject: the API server refuses an object whose metadata is not an object
// before validating anything, so the one violation names metadata, a field the object has (found by
// FuzzUpdateRules: an update setting metadata to 0 was refused at metadata.resourceVersion).
func TestMetadataThatIsNotAnObject(t *testing.T) {
	c := checker(t)
	stored := object(t, deployment("  roles:\n"+role("server")))
	edited := stored.DeepCopy()
	edited.Object["metadata"] = int64(0)
	for name, old := range map[string]*unstructured.Unstructured{"create": nil, "update": stored} {
		_, violations, err := c.Check(edited, old)
		require.NoError(t, err, name)
		require.Len(t, violations, 1, name)
		assert.Equal(t, "metadata", violations[0].Path, name)
		assert.Contains(t, violations[0].Reason, "expected object", name)
	}
	// A null metadata reads as empty: an update is refused for the stored name it changes, and its
	// resourceVersion is the stored one's, as for an apply (found by FuzzUpdateRules: it was refused
	// at metadata.resourceVersion).
	edited.Object["metadata"] = nil
	_, violations, err := c.Check(edited, stored)
	require.NoError(t, err)
	for _, v := range violations {
		assert.NotEqual(t, "metadata.resourceVersion", v.Path)
	}
	assertViolation(t, violations, "metadata.name", "field is immutable")
}

// TestMalformedMetadataFieldsAreDropped: the API server decodes a custom resource's metadata as
// ObjectMeta and drops a field of the wrong type, so the object is admitted without it, and the
// stored object the webhook reads decodes (found by FuzzUpdateRules: finalizers: 0 was admitted by
// the schema and then failed mdplane render with "cannot restore slice from int64").
func TestMalformedMetadataFieldsAreDropped(t *testing.T) {
	c := checker(t)
	obj := object(t, deployment("  roles:\n"+role("server")))
	obj.Object["metadata"].(map[string]any)["finalizers"] = int64(0)
	stored, violations, err := c.Check(obj, nil)
	require.NoError(t, err)
	assert.Empty(t, violations)
	assert.NotContains(t, stored.Object["metadata"], "finalizers")
	assert.NotContains(t, c.Default(obj).Object["metadata"], "finalizers")
	assert.Equal(t, "qwen-chat", c.Default(obj).GetName(), "the well-formed fields are kept")
	wellFormed := object(t, deployment("  roles:\n"+role("server")))
	assert.Equal(t, wellFormed.Object["metadata"], c.Default(wellFormed).Object["metadata"], "well-formed metadata is left as written")
}
