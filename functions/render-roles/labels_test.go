package renderroles_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
	"github.com/mdplane/mdplane/internal/replicas"
)

func h100() *workerv1.InstanceType {
	return &workerv1.InstanceType{
		ObjectMeta: metav1.ObjectMeta{Name: "h100"},
		Spec: workerv1.InstanceTypeSpec{Acceleratable: true, OS: "linux", Arch: "amd64",
			UnitResources: workerv1.InstanceTypeUnitResources{CPU: "24", RAM: "224Gi"}, LocalStorage: "100Gi"},
		Status: workerv1.InstanceTypeStatus{Entrance: "gpustack-fnv64-0123456789abcdef",
			Detail: &workerv1.InstanceTypeDetail{Manufacturer: "nvidia"}},
	}
}

func spec(roles ...workerv1.ModelDeploymentRole) *workerv1.ModelDeploymentSpec {
	return &workerv1.ModelDeploymentSpec{
		Model:  workerv1.ModelDeploymentModel{Name: "Qwen/Qwen3-32B"},
		Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM, Image: "vllm/vllm-openai:v0.25.1"},
		Roles:  roles,
	}
}

// serverRole is a Server role on h100 passing args to its engine.
func serverRole(args ...string) workerv1.ModelDeploymentRole {
	return workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", ExtraArgs: args}
}

// decodeRole is a Decode role on h100 passing args to its engine.
func decodeRole(args ...string) workerv1.ModelDeploymentRole {
	r := serverRole(args...)
	r.Name, r.Kind = "decode", workerv1.RoleKindDecode
	return r
}

// members renders replica ordinal of role as the three steps would.
func members(t *testing.T, role workerv1.ModelDeploymentRole, ordinal int32) []*corev1.Pod {
	t.Helper()
	rendered, err := renderroles.RenderRole(renderroles.Role{
		Namespace: "team-a", Deployment: "qwen", Spec: spec(role), Role: role, InstanceType: h100(),
	})
	require.NoError(t, err)
	size := role.Size
	if size == 0 {
		size = 1
	}
	return replicas.RenderMembers(replicas.Replica{
		Namespace: "team-a", Deployment: "qwen", Role: role.Name, Ordinal: ordinal,
		Revision: &v1alpha1.RoleRevision{Revision: rendered.Revision, Size: size, Template: rendered.Template},
	})
}

// TestPodLabelsAndAnnotations has one row per rule of the spec's "Pod labels and annotations" table.
func TestPodLabelsAndAnnotations(t *testing.T) {
	server := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Size: 2}
	decode := workerv1.ModelDeploymentRole{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: "h100"}
	rack := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100",
		Topology: &workerv1.ModelDeploymentRoleTopology{RequiredLevel: "topology.gpustack.ai/rack"}}

	cases := map[string]func(t *testing.T){
		"pod-group-name is the hashed form over namespace, deployment, role and ordinal": func(t *testing.T) {
			r0, r1 := members(t, server, 0), members(t, server, 1)
			group := r0[0].Labels[workerv1.LabelPodGroupName]
			assert.Regexp(t, regexp.MustCompile(`^gpustack-fnv64-[0-9a-f]{16}$`), group)
			assert.Equal(t, workerv1.GroupName("team-a", "qwen", "server", 0), group)
			assert.Equal(t, group, r0[1].Labels[workerv1.LabelPodGroupName], "every member of a replica is in its group")
			assert.NotEqual(t, group, r1[0].Labels[workerv1.LabelPodGroupName], "every replica is its own group")
		},
		"queue-name is the status.entrance the InstanceType publishes": func(t *testing.T) {
			assert.Equal(t, "gpustack-fnv64-0123456789abcdef", members(t, server, 0)[0].Labels[workerv1.LabelQueueName])
		},
		"a missing entrance is a render failure, never a guess": func(t *testing.T) {
			it := h100()
			it.Status.Entrance = ""
			_, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: spec(server), Role: server, InstanceType: it})
			assert.ErrorContains(t, err, `InstanceType "h100" publishes no status.entrance yet`)
		},
		"pod-group-total-count is the role's size": func(t *testing.T) {
			assert.Equal(t, "2", members(t, server, 0)[0].Annotations[workerv1.AnnotationPodGroupTotalCount])
			assert.Equal(t, "1", members(t, decode, 0)[0].Annotations[workerv1.AnnotationPodGroupTotalCount])
		},
		"role-hash is the role's name": func(t *testing.T) {
			assert.Equal(t, "decode", members(t, decode, 0)[0].Annotations[workerv1.AnnotationRoleHash])
		},
		"pod-group-serving is true": func(t *testing.T) {
			assert.Equal(t, "true", members(t, server, 0)[0].Annotations[workerv1.AnnotationPodGroupServing])
		},
		"podset-required-topology is the required level when set": func(t *testing.T) {
			assert.Equal(t, "topology.gpustack.ai/rack", members(t, rack, 0)[0].Annotations[workerv1.AnnotationRequiredTopology])
			assert.NotContains(t, members(t, server, 0)[0].Annotations, workerv1.AnnotationRequiredTopology)
		},
		"component is the role's name": func(t *testing.T) {
			assert.Equal(t, "decode", members(t, decode, 0)[0].Labels[workerv1.LabelComponent])
		},
		"role-kind is the router spelling, server when the kind is unset": func(t *testing.T) {
			assert.Equal(t, "server", members(t, server, 0)[0].Labels[workerv1.LabelRoleKind])
			assert.Equal(t, "decode", members(t, decode, 0)[0].Labels[workerv1.LabelRoleKind])
		},
		"pod-ordinal is the replica's slot": func(t *testing.T) {
			assert.Equal(t, "3", members(t, decode, 3)[0].Labels[workerv1.LabelPodOrdinal])
		},
		"member-index is rendered at every size": func(t *testing.T) {
			assert.Equal(t, "0", members(t, decode, 0)[0].Labels[workerv1.LabelMemberIndex], "one Pod included")
			pods := members(t, server, 0)
			assert.Equal(t, "0", pods[0].Labels[workerv1.LabelMemberIndex])
			assert.Equal(t, "1", pods[1].Labels[workerv1.LabelMemberIndex])
		},
		"pod-spec-hash is a SHA-256 hex digest bound to the seat": func(t *testing.T) {
			pods := members(t, server, 0)
			h := pods[0].Annotations[workerv1.AnnotationPodSpecHash]
			assert.Regexp(t, regexp.MustCompile(`^[0-9a-f]{64}$`), h)
			assert.NotEqual(t, h, pods[1].Annotations[workerv1.AnnotationPodSpecHash], "another member")
			assert.NotEqual(t, h, members(t, server, 1)[0].Annotations[workerv1.AnnotationPodSpecHash], "another ordinal")
		},
		"pod-spec-hash follows explicit fields, not the replica count": func(t *testing.T) {
			h := members(t, decode, 0)[0].Annotations[workerv1.AnnotationPodSpecHash]
			scaled := decode
			scaled.Replicas = 7
			assert.Equal(t, h, members(t, scaled, 0)[0].Annotations[workerv1.AnnotationPodSpecHash])
			edited := decode
			edited.ExtraArgs = []string{"--max-model-len", "4096"}
			assert.NotEqual(t, h, members(t, edited, 0)[0].Annotations[workerv1.AnnotationPodSpecHash])
		},
		"render-version is a positive integer": func(t *testing.T) {
			v, err := strconv.Atoi(members(t, server, 0)[0].Annotations[workerv1.AnnotationRenderVersion])
			require.NoError(t, err)
			assert.Positive(t, v)
			assert.Equal(t, renderroles.RenderVersion, v, "this release's baseline")
		},
		"no topology value is added to the node selector": func(t *testing.T) {
			assert.Empty(t, members(t, rack, 0)[0].Spec.NodeSelector)
		},
		"pod-group-fast-admission is never set": func(t *testing.T) {
			for _, p := range append(members(t, server, 0), members(t, decode, 0)...) {
				assert.NotContains(t, p.Annotations, "kueue.x-k8s.io/pod-group-fast-admission")
			}
		},
		"Kueue's own fields are never rendered": func(t *testing.T) {
			for _, p := range members(t, server, 0) {
				assert.Empty(t, p.Spec.SchedulingGates)
				assert.Empty(t, p.Finalizers)
				assert.NotContains(t, p.Labels, "kueue.x-k8s.io/managed")
			}
		},
	}
	for rule, check := range cases {
		t.Run(rule, check)
	}
}

// TestMemberIdentity covers the naming and the three GPUSTACK_* variables.
func TestMemberIdentity(t *testing.T) {
	t.Run("size 1 is named by the API server", func(t *testing.T) {
		pods := members(t, workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100"}, 0)
		require.Len(t, pods, 1)
		assert.Equal(t, "qwen-server-", pods[0].GenerateName)
		assert.Empty(t, pods[0].Name)
		assert.Empty(t, pods[0].Spec.Hostname)
		for _, e := range pods[0].Spec.Containers[0].Env {
			assert.NotContains(t, e.Name, "GPUSTACK_", "the variables appear only above size 1")
		}
	})
	t.Run("above size 1 every member is named and addressable", func(t *testing.T) {
		pods := members(t, workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Size: 4}, 2)
		require.Len(t, pods, 4)
		for m, p := range pods {
			name := naming.MemberName("qwen", "server", 2, int32(m))
			assert.Equal(t, name, p.Name)
			assert.Equal(t, name, p.Spec.Hostname)
			assert.Equal(t, "qwen-server-r2", p.Spec.Subdomain)
			env := p.Spec.Containers[0].Env
			require.GreaterOrEqual(t, len(env), 3)
			assert.Equal(t, corev1.EnvVar{Name: "GPUSTACK_REPLICA_LEADER_ADDRESS", Value: "qwen-server-r2-m0.qwen-server-r2"}, env[0])
			assert.Equal(t, corev1.EnvVar{Name: "GPUSTACK_REPLICA_SIZE", Value: "4"}, env[1])
			assert.Equal(t, "GPUSTACK_MEMBER_INDEX", env[2].Name)
			assert.Equal(t, "metadata.labels['modeldeployment.gpustack.ai/member-index']", env[2].ValueFrom.FieldRef.FieldPath,
				"every member carries the same container spec; only the label differs")
		}
		assert.Equal(t, pods[0].Spec.Containers, pods[3].Spec.Containers)
	})
	t.Run("above size 1 a managed role's members wait for the workers, told about their instance", func(t *testing.T) {
		pods := members(t, workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Size: 2}, 0)
		for _, p := range pods {
			require.Len(t, p.Spec.InitContainers, 1)
			wait := p.Spec.InitContainers[0]
			assert.Equal(t, naming.WaitForWorkerContainer, wait.Name)
			assert.Equal(t, p.Spec.Containers[0].Image, wait.Image, "the engine image's own python3")
			require.GreaterOrEqual(t, len(wait.Env), 3)
			assert.Equal(t, "GPUSTACK_REPLICA_LEADER_ADDRESS", wait.Env[0].Name)
		}
		assert.Equal(t, pods[0].Spec.InitContainers, pods[1].Spec.InitContainers, "the member decides at run time")
	})
	t.Run("a take-over role and a single member wait for nobody", func(t *testing.T) {
		takeOver := members(t, workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Size: 2, Command: []string{"serve"}}, 0)
		assert.Empty(t, takeOver[0].Spec.InitContainers)
		single := members(t, workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100"}, 0)
		assert.Empty(t, single[0].Spec.InitContainers)
	})
}

// TestStartupBudget: the startup probe allows ceil(startupTimeoutSeconds/10) failures, 10 s apart.
func TestStartupBudget(t *testing.T) {
	for seconds, failures := range map[int32]int32{10: 1, 1800: 180, 1805: 181, 86400: 8640} {
		role := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", StartupTimeoutSeconds: &seconds}
		p := members(t, role, 0)[0].Spec.Containers[0].StartupProbe
		require.NotNil(t, p)
		assert.Equal(t, failures, p.FailureThreshold, "%d seconds", seconds)
		assert.EqualValues(t, 10, p.PeriodSeconds)
		assert.EqualValues(t, 5, p.TimeoutSeconds)
	}
}

// TestWholeCardsScaleUnitResources: CPU and memory are the unit times the cards; ephemeral storage is
// not scaled (TestEphemeralStorageIs15GiCappedAtLocalStorage).
func TestWholeCardsScaleUnitResources(t *testing.T) {
	four := resource.MustParse("4")
	role := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100",
		Resources: &workerv1.ModelDeploymentRoleResources{Accelerator: &four}}
	limits := members(t, role, 0)[0].Spec.Containers[0].Resources.Limits
	assert.Equal(t, "96", limits.Cpu().String())
	assert.Equal(t, "896Gi", limits.Memory().String())
	assert.Equal(t, "15Gi", limits.StorageEphemeral().String())
	gpus := limits["nvidia.com/gpu"]
	assert.Equal(t, "4", gpus.String())
}

// TestEphemeralStorageIs15GiCappedAtLocalStorage: ephemeral storage defaults to 15Gi, capped at the
// InstanceType's spec.localStorage, on the request and the limit alike.
func TestEphemeralStorageIs15GiCappedAtLocalStorage(t *testing.T) {
	four := resource.MustParse("4")
	fourCards := &workerv1.ModelDeploymentRoleResources{Accelerator: &four}
	half := int32(50)
	halfSlice := &workerv1.ModelDeploymentRoleResources{AcceleratorSlicedMemoryPercentage: &half}
	for _, row := range []struct {
		name         string
		localStorage string
		resources    *workerv1.ModelDeploymentRoleResources
		want         string
	}{
		{"a type with more than 15Gi gives 15Gi, not its whole localStorage", "512Gi", nil, "15Gi"},
		{"four cards of a type with more than 15Gi still give 15Gi: the cap is not scaled", "512Gi", fourCards, "15Gi"},
		{"a type with exactly 15Gi gives 15Gi", "15Gi", nil, "15Gi"},
		{"a type with less than 15Gi caps it at its localStorage", "10Gi", nil, "10Gi"},
		{"four cards of a type with less than 15Gi still give its localStorage", "10Gi", fourCards, "10Gi"},
		{"a slice of a type with less than 15Gi gives its whole localStorage, not half", "10Gi", halfSlice, "10Gi"},
		{"a decimal 16G is less than 15Gi, so it caps", "16G", nil, "16G"},
		{"a type declaring no localStorage has no cap: 15Gi", "", nil, "15Gi"},
	} {
		t.Run(row.name, func(t *testing.T) {
			it := h100()
			it.Spec.LocalStorage = row.localStorage
			it.Status.Detail.SlicedDetail = &workerv1.SlicedDetail{Logical: &workerv1.LogicalSlicing{Count: 10}}
			role := workerv1.ModelDeploymentRole{Name: "server", InstanceType: "h100", Resources: row.resources}
			rendered, err := renderroles.RenderRole(renderroles.Role{
				Namespace: "team-a", Deployment: "qwen", Spec: spec(role), Role: role, InstanceType: it,
			})
			require.NoError(t, err)
			r := rendered.Template.Spec.Containers[0].Resources
			assert.Equal(t, row.want, r.Requests.StorageEphemeral().String(), "request")
			assert.Equal(t, row.want, r.Limits.StorageEphemeral().String(), "limit")
		})
	}
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// TestFabricInterfacesFollowTheTransferPath: a role is given fabric interfaces only for a fabric its
// transfers run on.
func TestFabricInterfacesFollowTheTransferPath(t *testing.T) {
	one := resource.MustParse("1")
	pair := func(protocol workerv1.TransferProtocol) *workerv1.ModelDeploymentSpec {
		roles := []workerv1.ModelDeploymentRole{
			{Name: "prefill", Kind: workerv1.RoleKindPrefill, Resources: &workerv1.ModelDeploymentRoleResources{Interface: &one}},
			{Name: "decode", Kind: workerv1.RoleKindDecode, Resources: &workerv1.ModelDeploymentRoleResources{Interface: &one}},
		}
		s := spec(roles...)
		s.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
		if protocol != "" {
			s.KVTransfer = &workerv1.ModelDeploymentKVTransfer{Protocol: protocol}
		}
		return s
	}
	// A lone server bound to a pool: its only path is the cache client, which speaks the backend's
	// transport, not spec.kvTransfer's.
	pooled := func(protocol workerv1.TransferProtocol) *workerv1.ModelDeploymentSpec {
		s := spec(workerv1.ModelDeploymentRole{Name: "server", Resources: &workerv1.ModelDeploymentRoleResources{Interface: &one}})
		s.KVCache = &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "team"}}
		s.KVTransfer = &workerv1.ModelDeploymentKVTransfer{Protocol: protocol}
		return s
	}
	backend := func(protocol string) *workerv1.KVCacheBackend {
		return &workerv1.KVCacheBackend{Spec: workerv1.KVCacheBackendSpec{Transport: workerv1.KVCacheBackendTransport{Protocol: protocol}}}
	}
	binding := &workerv1.KVCachePoolBinding{}
	for _, tc := range []struct {
		rule    string
		spec    *workerv1.ModelDeploymentSpec
		binding *workerv1.KVCachePoolBinding
		backend *workerv1.KVCacheBackend
		key     corev1.ResourceName
	}{
		{"an RDMA leg gets the shared RDMA device", pair(workerv1.TransferRDMA), nil, nil, "device.gpustack.ai/rdma.shared"},
		{"an EFA leg gets an EFA interface", pair(workerv1.TransferEFA), nil, nil, "vpc.amazonaws.com/efa"},
		{"a TCP leg gets none", pair(workerv1.TransferTCP), nil, nil, ""},
		{"an unset protocol is TCP: none", pair(""), nil, nil, ""},
		{"a cache client on an RDMA backend gets the RDMA device", pooled(workerv1.TransferTCP), binding, backend(workerv1.TransportRDMA), "device.gpustack.ai/rdma.shared"},
		{"a cache client on a TCP backend gets none, whatever spec.kvTransfer says", pooled(workerv1.TransferRDMA), binding, backend(workerv1.TransportTCP), ""},
		{"a cache client whose backend is unread speaks spec.kvTransfer", pooled(workerv1.TransferEFA), binding, nil, "vpc.amazonaws.com/efa"},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			role := tc.spec.Roles[0]
			rendered, err := renderroles.RenderRole(renderroles.Role{Namespace: "team-a", Deployment: "qwen", Spec: tc.spec, Role: role, InstanceType: h100(),
				Binding: tc.binding, Backend: tc.backend})
			require.NoError(t, err)
			requests := rendered.Template.Spec.Containers[0].Resources.Requests
			var fabric []corev1.ResourceName
			for k := range requests {
				if strings.Contains(string(k), "rdma") || strings.Contains(string(k), "efa") {
					fabric = append(fabric, k)
				}
			}
			if tc.key == "" {
				assert.Empty(t, fabric)
				return
			}
			assert.Equal(t, []corev1.ResourceName{tc.key}, fabric)
		})
	}
}
