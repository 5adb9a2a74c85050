package retirement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

func rolloutSteps(t *testing.T) uint64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == "mdplane_rollout_step_seconds" {
			return f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatal("no rollout step histogram registered")
	return 0
}

// A rollout step is timed from the replacement of one ordinal to the next, or to the rollout's end;
// a step begun before this process started is not.
func TestRolloutStepsAreTimedFromOneReplacementToTheNext(t *testing.T) {
	b := NewBook()
	md := types.NamespacedName{Namespace: "team-a", Name: "chat"}
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		rule     string
		was, is  *int32
		observed uint64
	}{
		{"a step begun before the process started is not timed", ptr.To[int32](0), ptr.To[int32](1), 0},
		{"the same ordinal again is the same step", ptr.To[int32](1), ptr.To[int32](1), 0},
		{"the next ordinal ends the step", ptr.To[int32](1), ptr.To[int32](2), 1},
		{"the rollout's end ends the last step", ptr.To[int32](2), nil, 1},
		{"no replacement after none is no step", nil, nil, 0},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			before := rolloutSteps(t)
			b.timeStep(md, "server", tc.was, tc.is, start)
			assert.Equal(t, tc.observed, rolloutSteps(t)-before)
		})
	}
	assert.Empty(t, b.stepStarts, "a finished rollout leaves no start behind")
}
