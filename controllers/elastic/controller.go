package elastic

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// The observation ConfigMap's label and key (§1.2).
const (
	LabelObservation = "gpustack.ai/elastic-observation"
	ObservationKey   = "observation.json"
)

// Reconciler writes each Elastic EP deployment's observation ConfigMap, only when its content
// changes. ConfigMaps are read uncached (Reader): mdplane-controllers caches none of the cluster's.
type Reconciler struct {
	Client client.Client
	Reader client.Reader
}

// SetupWithManager watches the deployments and their replicas and Pods, by deployment.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	toDeployment := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		md := o.GetLabels()[workerv1.LabelInstance]
		if md == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: md}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("elastic_observation").
		For(&workerv1.ModelDeployment{}).
		Watches(&v1alpha1.ModelReplica{}, toDeployment).
		// A Pod's coming and going moves the master's UID; its status churn moves nothing read here.
		Watches(&corev1.Pod{}, toDeployment, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
		}})).
		Complete(r)
}

// Reconcile writes the observation of one deployment carrying elasticEp; any other is left alone.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	md := &workerv1.ModelDeployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, md); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	role := RoleOf(md)
	if role == nil || md.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	replicas := &v1alpha1.ModelReplicaList{}
	if err := r.Client.List(ctx, replicas, client.InNamespace(md.Namespace), client.MatchingLabels(naming.RoleLabels(md.Name, role.Name))); err != nil {
		return reconcile.Result{}, err
	}
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(md.Namespace), client.MatchingFields{index.PodDeployment: md.Name},
		client.MatchingLabels{workerv1.LabelComponent: role.Name}); err != nil {
		return reconcile.Result{}, err
	}
	doc, err := json.Marshal(Observe(md, role, replicas.Items, pods.Items))
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.write(ctx, md, string(doc))
}

// write creates the ConfigMap, or updates it when its document moved.
func (r *Reconciler) write(ctx context.Context, md *workerv1.ModelDeployment, doc string) error {
	want := ObservationConfigMap(md, doc)
	have := &corev1.ConfigMap{}
	err := r.Reader.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		return r.Client.Create(ctx, want)
	case err != nil:
		return err
	case have.Data[ObservationKey] == doc:
		return nil
	}
	have.Data = want.Data
	return r.Client.Update(ctx, have)
}

// ObservationConfigMap is the ConfigMap elastic-observation-<md UID> holding doc, controlled by the
// deployment.
func ObservationConfigMap(md *workerv1.ModelDeployment, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: md.Namespace, Name: naming.ElasticObservationName(string(md.UID)),
			Labels: map[string]string{LabelObservation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.ModelDeploymentKind,
				Name: md.Name, UID: md.UID, Controller: ptr.To(true)}},
		},
		Data: map[string]string{ObservationKey: doc},
	}
}
