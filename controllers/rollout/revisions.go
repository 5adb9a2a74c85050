package rollout

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/internal/replicas"
)

// keepRevisions snapshots the role's current configuration as an immutable ControllerRevision,
// owned by the role, before any replica of it is created, and deletes each snapshot of the role
// that neither the role nor any of its replicas (leaving ones too) runs any more. Only this
// controller creates replicas, and only of the current revision, so a snapshot it deletes has no
// user left.
func (p *Pacer) keepRevisions(ctx context.Context, o *observed) error {
	role := o.role
	current := naming.RevisionName(role.Spec.DeploymentName, role.Spec.RoleName, role.Spec.Revision)
	inUse := map[string]bool{current: true}
	for i := range o.replicas {
		inUse[o.replicas[i].Spec.RevisionName] = true
	}
	have := &appsv1.ControllerRevisionList{}
	if err := p.Client.List(ctx, have, client.InNamespace(role.Namespace), client.MatchingLabels(naming.RoleLabels(role.Spec.DeploymentName, role.Spec.RoleName))); err != nil {
		return err
	}
	found := false
	for i := range have.Items {
		cr := &have.Items[i]
		found = found || cr.Name == current
		if inUse[cr.Name] || !metav1.IsControlledBy(cr, role) {
			continue // not a snapshot this controller took of this role
		}
		if err := client.IgnoreNotFound(p.Client.Delete(ctx, cr, client.Preconditions{UID: &cr.UID})); err != nil {
			return fmt.Errorf("deleting revision %s/%s, which no replica runs any more: %w", cr.Namespace, cr.Name, err)
		}
	}
	if found {
		return nil
	}
	cr, err := replicas.NewRevision(role)
	if err != nil {
		return err
	}
	if err := p.Client.Create(ctx, cr); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("snapshotting revision %s of ModelRole %s/%s: %w", role.Spec.Revision, role.Namespace, role.Name, err)
	}
	return nil
}
