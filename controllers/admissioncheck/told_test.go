package admissioncheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// TestToldSkipsAWriteTheCacheHasNotShown: a write decided on a Workload at some version is not made
// again while the Workload is read at that version (the cache trails the write), unless it writes
// something else; once the Workload is read at another version, what it shows decides.
func TestToldSkipsAWriteTheCacheHasNotShown(t *testing.T) {
	at := func(rv string) *kueue.Workload {
		return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team-a", ResourceVersion: rv}}
	}
	checking := func(wl *kueue.Workload, state kueue.CheckState, message string) write {
		return write{workload: wl, check: &kueue.AdmissionCheckState{Name: CheckName, State: state, Message: message}}
	}
	assembling := "held until the whole set has reserved quota: 1 of 3 replica groups are still assembling their Pods (server 1 of 3)"
	var told told
	first := checking(at("5"), kueue.CheckStatePending, assembling)
	assert.False(t, told.covers(first), "nothing written yet")
	told.wrote(first, t0)

	assert.True(t, told.covers(checking(at("5"), kueue.CheckStatePending,
		"held until the whole set has reserved quota: 2 of 3 replica groups are still assembling their Pods (server 2 of 3)")),
		"read at the version it was decided at: the same wait is not written again, counts aside")
	assert.False(t, told.covers(checking(at("5"), kueue.CheckStateReady, "all 3 replica groups of the deployment hold quota; admitted together")),
		"another state is written")
	assert.False(t, told.covers(checking(at("6"), kueue.CheckStatePending, assembling)), "read at a later version: the cache decides")
	assert.False(t, told.covers(first), "and the write is forgotten")

	told.wrote(first, t0)
	told.wrote(write{workload: &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team-a"}}, check: first.check}, t0.Add(toldFor+time.Second))
	assert.False(t, told.covers(first), "a write older than toldFor is forgotten")
	assert.False(t, told.covers(write{workload: at("5"), active: new(bool)}), "an activation is never skipped")
}
