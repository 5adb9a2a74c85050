package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	renderroles "github.com/mdplane/mdplane/functions/render-roles"
)

func TestRoleServiceSelection(t *testing.T) {
	cases := []struct {
		rule                  string
		everyMember, eligible bool
		want                  map[string]string
	}{
		{"a leader-served role's Service selects its leaders", false, false,
			map[string]string{"modeldeployment.gpustack.ai/member-index": "0"}},
		{"an External-DP Server role's Service selects every serving rank", true, false,
			map[string]string{"modeldeployment.gpustack.ai/serves": "true"}},
		{"an active qualification adds the eligibility term and marks the Service", true, true,
			map[string]string{"modeldeployment.gpustack.ai/serves": "true", "modeldeployment.gpustack.ai/endpoint-eligible": "true"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			svc := renderroles.RenderRoleService("ns", "md-server", "md", "server",
				&renderroles.RenderedRole{ServicePort: 8000, TargetPort: 8000, ServesEveryMember: tc.everyMember}, tc.eligible)
			want := map[string]string{"app.kubernetes.io/name": "model-deployment", "app.kubernetes.io/instance": "md", "app.kubernetes.io/component": "server"}
			for k, v := range tc.want {
				want[k] = v
			}
			assert.Equal(t, want, svc.Spec.Selector)
			assert.Equal(t, tc.eligible, svc.Annotations["worker.gpustack.ai/endpoint-eligibility"] == "active")
		})
	}
}
