package rolestatus_test

import (
	"testing"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/rolestatus"
)

// replica is a ModelReplica of slot ordinal on revision, Ready as ready.
func replica(name string, ordinal int32, revision string, ready bool) *v1alpha1.ModelReplica {
	r := &v1alpha1.ModelReplica{Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "chat", RoleName: "server", Ordinal: ordinal, Revision: revision}}
	r.Name = name
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	r.Status.SetConditions(xpv2.Condition{Type: xpv2.TypeReady, Status: status})
	return r
}

func leaving(r *v1alpha1.ModelReplica) *v1alpha1.ModelReplica {
	r.DeletionTimestamp = &metav1.Time{}
	return r
}

func withFlavors(r *v1alpha1.ModelReplica, flavors ...string) *v1alpha1.ModelReplica {
	r.Status.Flavors = flavors
	return r
}

func TestCount(t *testing.T) {
	spec := v1alpha1.ModelRoleSpec{DeploymentName: "chat", RoleName: "server", Replicas: 3, Size: 1, Revision: "new"}
	all := func(ready bool) []*v1alpha1.ModelReplica {
		return []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "new", true), replica("c", 2, "new", ready)}
	}
	t.Run("is ready once every slot holds a ready replica", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(false)})
		assert.False(t, s.Ready)
		assert.EqualValues(t, 2, *s.Status.Ready)
		s = rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: all(true)})
		assert.True(t, s.Ready)
		assert.EqualValues(t, 3, *s.Status.Ready)
		assert.EqualValues(t, 3, *s.Status.UpToDate)
	})
	t.Run("counts a slot whose replica is being deleted as Terminating and an empty one as in flight", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{leaving(replica("a", 0, "new", true)), replica("b", 1, "old", true)}})
		assert.Equal(t, map[string]int32{"Terminating": 1, "InFlight": 2}, s.Status.Quota)
		assert.EqualValues(t, 0, *s.Status.UpToDate)
	})
	t.Run("counts the standing replicas by the mode of the revision each runs, not the role's current one", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "old", true)},
			TakesOver: map[string]bool{"new": true, "old": false}})
		assert.Equal(t, v1alpha1.DeployedModes{Managed: 1, Unmanaged: 1}, *s.Status.Modes)
	})
	t.Run("a replica whose revision is not read yet counts in no mode", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("a", 0, "new", true), replica("b", 1, "old", true)},
			TakesOver: map[string]bool{"new": false}})
		assert.Equal(t, v1alpha1.DeployedModes{Managed: 1}, *s.Status.Modes)
	})
	t.Run("reports the flavors its standing replicas were admitted on, once each, sorted", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{
			withFlavors(replica("a", 0, "new", true), "h100-spot"), withFlavors(replica("b", 1, "new", true), "a-reserved", "h100-spot")}})
		assert.Equal(t, []string{"a-reserved", "h100-spot"}, s.Status.AssignedFlavors)
	})
	t.Run("a replica above replicas is not counted: the rollout controller retires it", func(t *testing.T) {
		one := spec
		one.Replicas = 1
		s := rolestatus.Count(rolestatus.Observed{Spec: one, Replicas: all(true)})
		assert.True(t, s.Ready)
		assert.EqualValues(t, 1, *s.Status.Ready)
	})
	t.Run("a new role counts zero before any replica exists", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec})
		assert.Equal(t, ptr.To[int32](0), s.Status.Ready)
		assert.Equal(t, map[string]int32{"InFlight": 3}, s.Status.Quota)
		assert.False(t, s.PodsCreatedKnown, "no PodsCreated before any replica reports one")
	})
	t.Run("of two replicas of one slot, the first by name counts", func(t *testing.T) {
		s := rolestatus.Count(rolestatus.Observed{Spec: spec, Replicas: []*v1alpha1.ModelReplica{replica("b", 0, "new", false), replica("a", 0, "new", true)}})
		assert.EqualValues(t, 1, *s.Status.Ready)
	})
}
