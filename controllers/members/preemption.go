package members

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/controllers/internal/preemptor"
	"github.com/mdplane/mdplane/internal/replicas"
)

// preemptedBy is who Kueue preempted a replica's group for and why, as its status reports it: read
// from the group's Workload or its stopped members (preemptor.Of), and kept from the last report
// after (a Workload rebuilt for the replacements says nothing of it) until the group holds quota
// again.
func (r *Reconciler) preemptedBy(ctx context.Context, wl *kueue.Workload, members []*corev1.Pod, quota, reported string) (string, error) {
	if quota == replicas.QuotaReserved {
		return "", nil
	}
	text, ok, err := preemptor.Of(ctx, r.Client, wl, members)
	if err != nil || !ok {
		return reported, err
	}
	return text, nil
}

// carriedPreemption is what is known of a preemption the replica's group waits behind from before
// this report: the replica's own last report, else its role's entry for its slot (written while the
// replica it replaces said so).
func (r *Reconciler) carriedPreemption(ctx context.Context, replica *v1alpha1.ModelReplica) string {
	if replica.Status.PreemptedBy != "" {
		return replica.Status.PreemptedBy
	}
	owner := metav1.GetControllerOf(replica)
	if owner == nil || owner.Kind != v1alpha1.ModelRoleKind {
		return ""
	}
	role := &v1alpha1.ModelRole{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: owner.Name}, role); err != nil || role.UID != owner.UID {
		return ""
	}
	return role.Status.Preemptions[v1alpha1.SlotKey(replica.Spec.Ordinal)]
}
