// Package functions lists mdplane's composition functions by the names Compositions call them, so
// that every in-process runner (mdplane render, the golden and fidelity tests, the e2e stack) runs
// the same set.
package functions

import (
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	kvcache "github.com/mdplane/mdplane/functions/kv-cache"
	renderroles "github.com/mdplane/mdplane/functions/render-roles"
	"github.com/mdplane/mdplane/internal/pipeline"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/xfn"
	manifests "github.com/mdplane/mdplane/package"
)

// BuiltIn returns a fresh instance of every function, keyed by Function name.
func BuiltIn() map[string]fnv1.FunctionRunnerServiceServer {
	return map[string]fnv1.FunctionRunnerServiceServer{
		renderroles.FunctionName: &renderroles.Function{},
		kvcache.FunctionName:     &kvcache.Function{},
	}
}

// Commands maps each Function name to the command that serves it.
var Commands = map[string]string{
	renderroles.FunctionName: "github.com/mdplane/mdplane/cmd/function-render-roles",
	kvcache.FunctionName:     "github.com/mdplane/mdplane/cmd/function-kv-cache",
}

// Materializers returns, keyed by apiVersion/kind, what mdplane's controllers create for a composite
// beyond its composition: a ModelRole's ModelReplicas, which the rollout controller creates with the
// same replicas.NewReplica, its PodDisruptionBudget (replicas.DisruptionBudget, the budgets
// controller's), and a ModelReplica's Pods and instance Service, which the members
// controller creates with the same replicas.Materialize.
func Materializers() map[string]pipeline.Materializer {
	return map[string]pipeline.Materializer{
		v1alpha1.SchemeGroupVersion.String() + "/" + v1alpha1.ModelRoleKind:    materializeRole,
		v1alpha1.SchemeGroupVersion.String() + "/" + v1alpha1.ModelReplicaKind: materializeReplica,
	}
}

// materializeRole renders what the controllers create for a new role: the revision of its current
// configuration, its disruption budget, then one replica per slot on it.
func materializeRole(xr *unstructured.Unstructured, _ []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	role := &v1alpha1.ModelRole{}
	if err := xfn.Decode(xr.Object, role); err != nil {
		return nil, err
	}
	revision, err := replicas.NewRevision(role)
	if err != nil {
		return nil, err
	}
	objs := []any{revision}
	if budget := replicas.DisruptionBudget(role); budget != nil {
		objs = append(objs, budget)
	}
	if renderroles.HeldByWeights(role.Annotations[workerv1.AnnotationRolloutHeld]) {
		return owned(objs, role.UID) // the rollout controller creates no replica while the weights cannot be delivered
	}
	for n := range role.Spec.Replicas {
		objs = append(objs, replicas.NewReplica(role, n))
	}
	return owned(objs, role.UID)
}

// materializeReplica renders a replica's members from the revision it names, found among what the
// role composed.
func materializeReplica(xr *unstructured.Unstructured, cluster []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	replica := &v1alpha1.ModelReplica{}
	if err := xfn.Decode(xr.Object, replica); err != nil {
		return nil, err
	}
	var revision *v1alpha1.RoleRevision
	for _, obj := range cluster {
		if obj.GetKind() != "ControllerRevision" || obj.GetNamespace() != replica.Namespace || obj.GetName() != replica.Spec.RevisionName {
			continue
		}
		cr := &appsv1.ControllerRevision{}
		if err := xfn.Decode(obj.Object, cr); err != nil {
			return nil, err
		}
		var err error
		if revision, err = replicas.ReadRevision(cr); err != nil {
			return nil, err
		}
	}
	if revision == nil {
		return nil, fmt.Errorf("its revision %s/%s is not among the rendered objects", replica.Namespace, replica.Spec.RevisionName)
	}
	pods, svc := replicas.Materialize(replica, revision)
	var objs []any
	if svc != nil {
		objs = append(objs, svc)
	}
	for _, pod := range pods {
		objs = append(objs, pod)
	}
	return owned(objs, replica.UID)
}

// owned converts objects a controller creates to unstructured ones. Offline their owner has no UID
// (ownerUID is empty) for the owner reference to name: the field is left out.
func owned(objs []any, ownerUID types.UID) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		m, err := xfn.ToMap(obj)
		if err != nil {
			return nil, err
		}
		if ownerUID == "" {
			for _, ref := range m["metadata"].(map[string]any)["ownerReferences"].([]any) {
				delete(ref.(map[string]any), "uid")
			}
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// Engine runs the package's Compositions in-process with the built-in functions, as `mdplane render`
// does.
func Engine() (*pipeline.Engine, error) {
	return pipeline.NewEngine(manifests.FS, BuiltIn(), Materializers())
}
