package pacing_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/pacing"
)

// TestReadyTimeoutBackoff: Kueue's requeuing defaults, doubling from a minute to at most an hour.
func TestReadyTimeoutBackoff(t *testing.T) {
	for count, want := range map[int32]time.Duration{1: time.Minute, 2: 2 * time.Minute, 3: 4 * time.Minute, 7: time.Hour, 40: time.Hour} {
		assert.Equal(t, want, pacing.ReadyTimeoutBackoff(count), "after %d in a row", count)
	}
}

// TestAfterReadyTimeouts: a slot evicted at the PodsReady timeout stays vacant for its backoff.
func TestAfterReadyTimeouts(t *testing.T) {
	now := time.Date(2026, 12, 5, 16, 0, 0, 0, time.UTC)
	timeouts := map[string]v1alpha1.ReadyTimeout{
		"r0": {Count: 1, Until: metav1.NewTime(now.Add(40 * time.Second))},
		"r1": {Count: 2, Until: metav1.NewTime(now.Add(30 * time.Second))},
		"r2": {Count: 1, Until: metav1.NewTime(now)},
	}
	for _, row := range []struct {
		rule   string
		vacant []int32
		free   []int32
		wait   time.Duration
	}{
		{"a slot inside its backoff waits for the rest of it", []int32{0}, nil, 40 * time.Second},
		{"a second slot waits for its own", []int32{1}, nil, 30 * time.Second},
		{"the soonest of several held slots sets the wait", []int32{0, 1}, nil, 30 * time.Second},
		{"near miss: a slot whose backoff has passed is filled", []int32{2}, []int32{2}, 0},
		{"near miss: a slot never evicted is filled", []int32{3}, []int32{3}, 0},
	} {
		t.Run(row.rule, func(t *testing.T) {
			free, wait := pacing.AfterReadyTimeouts(timeouts, row.vacant, now)
			assert.Equal(t, row.free, free)
			assert.Equal(t, row.wait, wait)
		})
	}
}
