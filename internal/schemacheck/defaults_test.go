package schemacheck_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestARoleIsDefaultedAlikeByGoAndBySchema: the defaults the API server applies from the generated
// schema and the ones the Go code assumes for a role left unset (WithDefaults) are the same, field
// by field, so an object read before the API server stored it renders as one read after.
func TestARoleIsDefaultedAlikeByGoAndBySchema(t *testing.T) {
	c := checker(t)
	for _, row := range []struct{ rule, role string }{
		{"a role that sets nothing but its name and InstanceType", role("server")},
		{"a role that sets every defaulted field keeps its values", role("server", "kind: Decode", "replicas: 3", "size: 2", "startupTimeoutSeconds: 600")},
	} {
		t.Run(row.rule, func(t *testing.T) {
			stored := c.Default(object(t, deployment("  roles:\n"+row.role)))
			var md workerv1.ModelDeployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(stored.Object, &md))
			require.Len(t, md.Spec.Roles, 1)

			var submitted workerv1.ModelDeployment
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(object(t, deployment("  roles:\n"+row.role)).Object, &submitted))
			assert.Equal(t, submitted.Spec.Roles[0].WithDefaults(), md.Spec.Roles[0], "the schema's defaults (right) against WithDefaults on the submitted role (left)")
			assert.Equal(t, md.Spec.Roles[0], md.Spec.Roles[0].WithDefaults(), "WithDefaults changes a stored role")
		})
	}
}
