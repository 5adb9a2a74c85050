package rollout

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/internal/pacing"
)

// AnnotationRestartsReported on a member Pod is the restart count (the sum of its containers'
// restartCount) the deployment was last told of by a ReplicaRestarted event.
const AnnotationRestartsReported = "worker.gpustack.ai/restarts-reported"

// reportRestarts records a ReplicaRestarted event for each standing member whose containers
// restarted since the count last reported; a member being deleted is leaving, not restarting.
//
// Each rise is told once. The count told is kept on the Pod itself and written before the event,
// with the Pod's resourceVersion as precondition: a second pass, a pass on a stale cache, or a
// restarted controller finds the count already claimed (or loses the write) and says nothing,
// while a rise that happened while the controller was down is still seen, as the kubelet's count
// only grows for the life of the Pod. An in-memory comparison of old and new Pods in the watch
// would lose a rise at a restart and repeat one at a relist. A crash between the write and the
// event loses that one event rather than repeating it.
func (d *Departures) reportRestarts(ctx context.Context, replica *v1alpha1.ModelReplica, own []corev1.Pod) error {
	for i := range own {
		p := &own[i]
		n := restarts(p)
		if p.DeletionTimestamp != nil || n <= reported(p) {
			continue
		}
		claimed := p.DeepCopy()
		metav1.SetMetaDataAnnotation(&claimed.ObjectMeta, AnnotationRestartsReported, strconv.Itoa(int(n)))
		if err := d.Client.Patch(ctx, claimed, client.MergeFromWithOptions(p, client.MergeFromWithOptimisticLock{})); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				continue // the Pod changed or went: the watch brings its newest state back
			}
			return fmt.Errorf("recording the restart count %d of member %s/%s of replica %s: %w", n, p.Namespace, p.Name, replica.Name, err)
		}
		d.event(ctx, replica, "ReplicaRestarted", "Restart",
			"replica r%d of role %s has restarted %d time(s) (member %s); the cache blocks it held stay leased for the %s kv_lease_duration window, then its siblings lose them",
			replica.Spec.Ordinal, replica.Spec.RoleName, n, p.Name, pacing.LeaseWindow)
	}
	return nil
}

// restarts is a Pod's restart count: the sum of its containers' restartCount, its sidecars' and
// init containers' included.
func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range statuses {
			n += c.RestartCount
		}
	}
	return n
}

// reported is the restart count last told of a Pod; 0 when none was (or the value is not a count,
// which the next report overwrites).
func reported(p *corev1.Pod) int32 {
	n, err := strconv.ParseInt(p.Annotations[AnnotationRestartsReported], 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return int32(n)
}
