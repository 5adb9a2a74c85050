// Package rolekey maps an object labelled for a role (a ModelReplica, a Pod, a revision) to the
// reconcile request of its ModelRole, for the controllers that reconcile roles.
package rolekey

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Requests is the request of the ModelRole whose deployment and role o's labels name; none for an
// object without both labels.
func Requests(_ context.Context, o client.Object) []reconcile.Request {
	l := o.GetLabels()
	if l[workerv1.LabelInstance] == "" || l[workerv1.LabelComponent] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: naming.RoleNameOf(l)}}}
}
