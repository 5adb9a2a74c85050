package members

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/qualification"
)

// qualify decides the replica's qualification and applies its eligibility label to the members at
// once, each by a patch of the Pod's labels alone (outside the pod-spec hash, no container is
// touched); a revocation is never held back by the status write's interval. A leader rendered
// before the serving label gets it too, so a role turning to External DP still selects it.
// recheck is when to look again for a group-forward probe's result (0: nothing pending).
func (r *Reconciler) qualify(ctx context.Context, replica *v1alpha1.ModelReplica, pods []*corev1.Pod, size int) (q *v1alpha1.Qualification, recheck time.Duration, err error) {
	role := &v1alpha1.ModelRole{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: naming.RoleServiceName(replica.Spec.DeploymentName, replica.Spec.RoleName)}, role); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, 0, err
		}
		role = nil
	}
	in := qualification.Replica{Size: int32(size), Members: pods, Condemned: r.condemned(replica, role), Retiring: r.retiring(replica, role)}
	if size > 1 && role != nil {
		leg, wait, err := r.groupForward(ctx, replica, role, in)
		if err != nil {
			return nil, 0, err
		}
		in.GroupForward, recheck = &leg, wait
	}
	qualified := qualification.Qualify(in)
	q = &qualified
	changes := qualification.LabelChanges(*q, pods)
	for _, p := range changes.Revoke {
		if err := r.patchLabels(ctx, p, map[string]any{workerv1.LabelEndpointEligible: nil}); err != nil {
			return nil, 0, err
		}
	}
	grant := map[*corev1.Pod]bool{}
	for _, p := range changes.Grant {
		grant[p] = true
	}
	for p := range qualification.Serving(pods) {
		labels := map[string]any{}
		if p.Labels[workerv1.LabelServes] != "true" {
			labels[workerv1.LabelServes] = "true"
		}
		if grant[p] {
			labels[workerv1.LabelEndpointEligible] = "true"
		}
		if len(labels) == 0 || p.DeletionTimestamp != nil {
			continue
		}
		if err := r.patchLabels(ctx, p, labels); err != nil {
			return nil, 0, err
		}
	}
	q.Granted = allGranted(pods) // a patch leaves the Pod read as the API server returned it
	return q, recheck, nil
}

// groupForward is a multi-member replica's GroupForward leg: Unsupported where no probe can be sent
// (a Prefill or Decode role, a take-over, an engine version the probe cannot read), Unknown until
// every member is Ready, else its probe's.
func (r *Reconciler) groupForward(ctx context.Context, replica *v1alpha1.ModelReplica, role *v1alpha1.ModelRole, in qualification.Replica) (v1alpha1.QualificationLeg, time.Duration, error) {
	md := &workerv1.ModelDeployment{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: replica.Spec.DeploymentName}, md); err != nil {
		unread := v1alpha1.QualificationLeg{Type: qualification.LegGroupForward, State: v1alpha1.LegUnknown, Reason: "the deployment is not read yet"}
		return unread, 0, client.IgnoreNotFound(err)
	}
	var leader *corev1.Pod
	for _, p := range in.Members {
		if p.Labels[workerv1.LabelMemberIndex] == naming.LeaderIndex {
			leader = p
		}
	}
	if leader == nil {
		return v1alpha1.QualificationLeg{Type: qualification.LegGroupForward, State: v1alpha1.LegUnknown, Reason: "no leader to read the engine from"}, 0, nil
	}
	if why := qualification.ProbeSupport(md.Spec.Engine.Name, role.Spec.Kind, leader); why != "" {
		return v1alpha1.QualificationLeg{Type: qualification.LegGroupForward, State: v1alpha1.LegUnsupported, Reason: why}, 0, nil
	}
	if !qualification.Probeable(in) {
		return v1alpha1.QualificationLeg{Type: qualification.LegGroupForward, State: v1alpha1.LegUnknown, Reason: "probed once every member is Ready"}, 0, nil
	}
	leg, recheck := r.probes.groupForward(replica.UID, md.Spec.Engine.Name, in.Members)
	return leg, recheck, nil
}

// allGranted reports whether every serving member carries the eligibility label.
func allGranted(pods []*corev1.Pod) bool {
	for p := range qualification.Serving(pods) {
		if p.Labels[workerv1.LabelEndpointEligible] != "true" {
			return false
		}
	}
	return true
}

// condemned reports whether the rollout has chosen the replica for replacement: its role's
// replacement in flight is the replica's ordinal while the replica runs an outdated revision (the
// pacer records that before it deletes the replica; a replica being deleted is not qualified at
// all, as its Pods leave at once).
func (r *Reconciler) condemned(replica *v1alpha1.ModelReplica, role *v1alpha1.ModelRole) bool {
	if role == nil {
		return false
	}
	in := r.Retirements.Replacement(role).Ordinal
	return in != nil && *in == replica.Spec.Ordinal && !replica.Spec.UpToDate(role.Spec)
}

// retiring reports whether the deployment's retirement operation reserves the replica's ordinal.
func (r *Reconciler) retiring(replica *v1alpha1.ModelReplica, role *v1alpha1.ModelRole) bool {
	if role == nil {
		return false
	}
	op := r.Retirements.Targeting(role)
	return op != nil && op.ReplicaOrdinal == replica.Spec.Ordinal
}

// patchLabels merges labels into a Pod's metadata (nil removes one) and mirrors them on the copy read.
func (r *Reconciler) patchLabels(ctx context.Context, p *corev1.Pod, labels map[string]any) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("labelling Pod %s/%s for endpoint eligibility: %w", p.Namespace, p.Name, err))
	}
	return nil
}
