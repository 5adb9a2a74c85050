package renderroles

import (
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestObservedRolloutCarriesTheCacheHold: the deployment's ReplicasUpToDate reads the cache hold
// off the observed ModelRole, where the cache step wrote it, so a held role with outdated
// instances reports RolloutHeldByCache.
func TestObservedRolloutCarriesTheCacheHold(t *testing.T) {
	held := "RolloutHeldByCache: BindingNotFound: KVCachePoolBinding team-a/b does not exist"
	observed := &v1alpha1.ModelRole{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{workerv1.AnnotationRolloutHeld: held}},
		Status:     v1alpha1.ModelRoleStatus{UpToDate: ptr.To(int32(1))},
	}
	r := observedRollout(workerv1.ModelDeploymentRole{Name: "server", Replicas: 2}, observed)
	assert.Equal(t, held, r.Held)
	c := UpToDateCondition(map[string]RoleRollout{"server": r}, "")
	assert.Equal(t, "False", c.Status)
	assert.Equal(t, RolloutHeldByCache, c.Reason)
}
