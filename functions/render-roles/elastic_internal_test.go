package renderroles

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestElasticHeadGrace: the Ray head takes its role's grace as the role's configuration records
// it, so writing out the managed default restarts no head; another grace reaches it.
func TestElasticHeadGrace(t *testing.T) {
	spec := &workerv1.ModelDeploymentSpec{Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM, Image: "vllm/vllm-openai:v0.25.1"}}
	role := func(grace *int64) workerv1.ModelDeploymentRole {
		return workerv1.ModelDeploymentRole{Name: "server", TerminationGracePeriodSeconds: grace,
			ElasticEP: &workerv1.ModelDeploymentRoleElasticEP{HeadInstanceType: "cpu"}}
	}
	unwritten := elasticHeadRole(spec, "moe", role(nil))
	written := elasticHeadRole(spec, "moe", role(ptr.To[int64](DefaultTerminationGracePeriodSeconds)))
	assert.Equal(t, unwritten, written)
	assert.Equal(t, ptr.To[int64](45), elasticHeadRole(spec, "moe", role(ptr.To[int64](45))).TerminationGracePeriodSeconds)
}
