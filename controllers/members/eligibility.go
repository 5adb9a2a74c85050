package members

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
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
func (r *Reconciler) qualify(ctx context.Context, replica *v1alpha1.ModelReplica, pods []*corev1.Pod, size int) (*v1alpha1.Qualification, error) {
	condemned, err := r.condemned(ctx, replica)
	if err != nil {
		return nil, err
	}
	q := qualification.Qualify(qualification.Replica{Size: int32(size), Members: pods, Condemned: condemned})
	changes := qualification.LabelChanges(q, pods)
	for _, p := range changes.Revoke {
		if err := r.patchLabels(ctx, p, map[string]any{workerv1.LabelEndpointEligible: nil}); err != nil {
			return nil, err
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
			return nil, err
		}
	}
	q.Granted = allGranted(pods) // a patch leaves the Pod read as the API server returned it
	return &q, nil
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

// condemned reports whether the rollout has chosen the replica for replacement: its role remembers
// the replica's ordinal as the replacement in flight while the replica runs an outdated revision
// (the pacer writes that before it deletes the replica; a replica being deleted is not qualified at
// all, as its Pods leave at once).
func (r *Reconciler) condemned(ctx context.Context, replica *v1alpha1.ModelReplica) (bool, error) {
	role := &v1alpha1.ModelRole{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: replica.Namespace, Name: naming.RoleServiceName(replica.Spec.DeploymentName, replica.Spec.RoleName)}, role)
	if err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return role.Annotations[workerv1.AnnotationReplacing] == fmt.Sprint(replica.Spec.Ordinal) && !replica.Spec.UpToDate(role.Spec), nil
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
