package elastic

import (
	"context"
	"encoding/json"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/workload"
)

// The observation ConfigMap's label and key.
const (
	LabelObservation = "gpustack.ai/elastic-observation"
	ObservationKey   = "observation.json"
)

// passBudget bounds a whole resize pass, the engine's answer included.
const passBudget = 3 * time.Minute

// Reconciler resizes each Elastic EP deployment's engine to its width and writes its observation
// ConfigMap, its operation record and its ElasticResize condition. ConfigMaps are read uncached
// (Reader): mdplane-controllers caches none of the cluster's.
type Reconciler struct {
	Client client.Client
	Reader client.Reader
	// Engine speaks to the masters; Now is the clock (time.Now when nil).
	Engine *Engine
	Now    func() time.Time
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
		// A Pod's coming and going moves the master's UID, its readiness and address whether a resize
		// may be sent; the rest of its status churn moves nothing read here.
		Watches(&corev1.Pod{}, toDeployment, builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			old, cur, ok := pods(e)
			return ok && (old.DeletionTimestamp == nil && cur.DeletionTimestamp != nil ||
				replicas.PodReady(old) != replicas.PodReady(cur) || old.Status.PodIP != cur.Status.PodIP)
		}})).
		// A group's admission moves what a resize may count as serving.
		Watches(&kueue.Workload{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			pods := &corev1.PodList{}
			if err := mgr.GetClient().List(ctx, pods, client.InNamespace(o.GetNamespace()), client.MatchingFields{index.PodGroup: o.GetName()}, client.Limit(1)); err != nil || len(pods.Items) == 0 {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: pods.Items[0].Labels[workerv1.LabelInstance]}}}
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return workloadAdmitted(e.ObjectOld) != workloadAdmitted(e.ObjectNew)
		}})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).
		Complete(r)
}

func workloadAdmitted(o client.Object) bool {
	wl, ok := o.(*kueue.Workload)
	return ok && workload.Admitted(wl)
}

// admittedNow sets each replica's admitted flag from its group's Workload, where Kueue has built
// one: a replica reports its admission only with its next change that its role reads, seconds to a
// minute later; the Workload has it first.
func (r *Reconciler) admittedNow(ctx context.Context, md *workerv1.ModelDeployment, role string, list []v1alpha1.ModelReplica) error {
	for i := range list {
		replica := &list[i]
		wl := &kueue.Workload{}
		key := types.NamespacedName{Namespace: md.Namespace, Name: workerv1.GroupName(md.Namespace, md.Name, role, replica.Spec.Ordinal)}
		switch err := r.Client.Get(ctx, key, wl); {
		case err == nil:
			replica.Status.Admitted = ptr.To(workloadAdmitted(wl))
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	return nil
}

func pods(e event.UpdateEvent) (*corev1.Pod, *corev1.Pod, bool) {
	old, ok1 := e.ObjectOld.(*corev1.Pod)
	cur, ok2 := e.ObjectNew.(*corev1.Pod)
	return old, cur, ok1 && ok2
}

// Reconcile resizes and observes one deployment carrying elasticEp; any other is left alone.
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
	if err := r.admittedNow(ctx, md, role.Name, replicas.Items); err != nil {
		return reconcile.Result{}, err
	}
	members, err := r.pods(ctx, md, role.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	heads, err := r.pods(ctx, md, naming.ElasticHeadName(md.Name))
	if err != nil {
		return reconcile.Result{}, err
	}
	store := &records{client: r.Client, reader: r.Reader, md: md}
	rec, err := store.load(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	pass, cancel := context.WithTimeout(ctx, passBudget)
	defer cancel()
	d := newDeployment(md, role, replicas.Items, members, heads)
	res, passErr := resizer{engine: r.Engine, now: r.now(), save: store.save}.pass(pass, d, rec)
	o := Observe(md, role, replicas.Items, members)
	o.overlay(d, res)
	doc, err := json.Marshal(o)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.write(ctx, md, string(doc)); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.condition(ctx, md, ResizeCondition(res.rec)); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: res.requeue}, passErr
}

func (r *Reconciler) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// pods are the deployment's Pods of one role (component).
func (r *Reconciler) pods(ctx context.Context, md *workerv1.ModelDeployment, component string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := r.Client.List(ctx, list, client.InNamespace(md.Namespace), client.MatchingFields{index.PodDeployment: md.Name},
		client.MatchingLabels{workerv1.LabelComponent: component})
	return list.Items, err
}

// condition writes the deployment's ElasticResize condition when it says something new. Crossplane
// and the functions write the other conditions: the patch is bound to the version read.
func (r *Reconciler) condition(ctx context.Context, md *workerv1.ModelDeployment, c xpv2.Condition) error {
	if have := md.Status.GetCondition(c.Type); sameCondition(have, c) {
		return nil
	}
	patch := client.MergeFromWithOptions(md.DeepCopy(), client.MergeFromWithOptimisticLock{})
	md.Status.SetConditions(stamped(c, md.Generation))
	return r.Client.Status().Patch(ctx, md, patch)
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
