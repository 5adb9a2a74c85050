package naming_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestNames(t *testing.T) {
	assert.Equal(t, "qwen-decode", naming.RoleServiceName("qwen", "decode"))
	assert.Equal(t, "qwen-decode-r2", naming.InstanceName("qwen", "decode", 2))
	assert.Equal(t, "qwen-decode-r2-m1", naming.MemberName("qwen", "decode", 2, 1))
	assert.Equal(t, "qwen-decode-r2-m0.qwen-decode-r2", naming.LeaderAddress("qwen", "decode", 2))
	assert.Equal(t, "qwen-decode-abc", naming.RevisionName("qwen", "decode", "abc"))
	assert.Equal(t, "qwen-router", naming.RouterName("qwen"))
	assert.Equal(t, "role-decode", naming.RoleResource("decode"))
	assert.Equal(t, "service-decode", naming.RoleServiceResource("decode"))
	assert.Equal(t, "qwen-decode-r2-", naming.ReplicaGenerateName("qwen", "decode", 2))
	long := naming.ReplicaGenerateName(strings.Repeat("a", 55)+"-", "x", 0)
	assert.LessOrEqual(t, len(long), 58, "room for the API server's five characters")
	assert.False(t, strings.HasSuffix(long, "--"), "a cut never leaves a dash before the suffix's dash")
}

func TestLabels(t *testing.T) {
	replica := naming.ReplicaLabels("qwen", "decode", 3)
	assert.Equal(t, map[string]string{
		workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "qwen",
		workerv1.LabelComponent: "decode", workerv1.LabelPodOrdinal: "3",
	}, replica)
	name, ok := naming.InstanceNameOf(replica)
	assert.True(t, ok)
	assert.Equal(t, "qwen-decode-r3", name)
	assert.Equal(t, "qwen-decode", naming.RoleNameOf(replica))
	_, ok = naming.InstanceNameOf(naming.RoleLabels("qwen", "decode"))
	assert.False(t, ok, "no ordinal, no instance")
	assert.Equal(t, "0", naming.Leaders(naming.RoleLabels("qwen", "decode"))[workerv1.LabelMemberIndex])
	assert.Equal(t, "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,app.kubernetes.io/component=decode,modeldeployment.gpustack.ai/member-index=0",
		naming.LeaderSelector("qwen", "decode"))
}

// TestServingSelection: each deployed configuration selects endpoints by its own mode
// while a role is part-way through a configuration change.
func TestServingSelection(t *testing.T) {
	role := func() map[string]string { return naming.RoleLabels("qwen", "server") }
	cases := []struct {
		rule                  string
		everyMember, eligible bool
		want                  map[string]string
		published             string
	}{
		{"a leader-served role selects its leaders", false, false,
			map[string]string{workerv1.LabelMemberIndex: "0"}, "modeldeployment.gpustack.ai/member-index=0"},
		{"an External-DP Server role drops the leader term for the serving label", true, false,
			map[string]string{workerv1.LabelServes: "true"}, "modeldeployment.gpustack.ai/serves=true"},
		{"an active qualification adds the eligibility term", true, true,
			map[string]string{workerv1.LabelServes: "true", workerv1.LabelEndpointEligible: "true"},
			"modeldeployment.gpustack.ai/serves=true,modeldeployment.gpustack.ai/endpoint-eligible=true"},
		{"a leader-served role keeps its leader term beside the eligibility term", false, true,
			map[string]string{workerv1.LabelMemberIndex: "0", workerv1.LabelEndpointEligible: "true"},
			"modeldeployment.gpustack.ai/member-index=0,modeldeployment.gpustack.ai/endpoint-eligible=true"},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			want := role()
			for k, v := range tc.want {
				want[k] = v
			}
			assert.Equal(t, want, naming.Serving(role(), tc.everyMember, tc.eligible))
			assert.Equal(t, "app.kubernetes.io/name=model-deployment,app.kubernetes.io/instance=qwen,app.kubernetes.io/component=server,"+tc.published,
				naming.ServingSelector("qwen", "server", tc.everyMember, tc.eligible))
		})
	}
}
