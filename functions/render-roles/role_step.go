package renderroles

import (
	"encoding/json"
	"fmt"
	"strconv"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/internal/xfn"
)

// Composition resource names of the role step.
const (
	revisionResourcePrefix = "revision-"
	replicaResourcePrefix  = "replica-"
)

// roleStep renders a role's revisions still in use and one ModelReplica per ordinal. An occupied
// slot keeps the revision it was created with; an empty slot gets the current one; a slot whose Pods
// are still on the API server is not refilled until they are gone.
func roleStep(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) error {
	role := &v1alpha1.ModelRole{}
	if err := xfn.Decode(xr.Resource.Object, role); err != nil {
		return fmt.Errorf("cannot read ModelRole %s: %w", xr.Resource.GetName(), err)
	}
	ns, spec := xr.Resource.GetNamespace(), role.Spec
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	// Only an empty slot needs to know whether Pods of its ordinal remain; asking for the Pods of the
	// whole role would carry every member of every replica into the request.
	r := xfn.NewRequirements(req, rsp)
	occupied := map[int32]bool{}
	for n := range spec.Replicas {
		if observed[replicaResource(n)].Resource != nil {
			continue
		}
		selector := naming.ReplicaLabels(spec.DeploymentName, spec.RoleName, n)
		pods, err := r.ByLabels(fmt.Sprintf("pods-r%d", n), "v1", "Pod", ns, selector)
		if err != nil {
			return err
		}
		occupied[n] = len(pods) > 0
	}
	if r.Pending {
		return nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}

	current := &v1alpha1.RoleRevision{
		TypeMeta: typeMeta(v1alpha1.SchemeGroupVersion.String(), v1alpha1.RoleRevisionKind),
		Revision: spec.Revision,
		Size:     spec.Size,
		Template: spec.Template,
	}
	data, err := json.Marshal(current)
	if err != nil {
		return err
	}
	revisions := map[string]runtime.RawExtension{spec.Revision: {Raw: data}}

	var ready, upToDate, reserved int64
	quota := map[string]any{}
	count := func(state string) {
		n, _ := quota[state].(int64)
		quota[state] = n + 1
		if state == QuotaReserved {
			reserved++
		}
	}
	for n := range spec.Replicas {
		key := replicaResource(n)
		replica := v1alpha1.ModelReplicaSpec{
			DeploymentName: spec.DeploymentName, RoleName: spec.RoleName, Ordinal: n,
			Revision: spec.Revision, RevisionName: naming.RevisionName(spec.DeploymentName, spec.RoleName, spec.Revision),
			ConfigDigest: spec.ConfigDigest, RenderVersion: spec.RenderVersion,
		}
		obs := observed[key].Resource
		switch {
		case obs != nil:
			// The slot keeps its revision: render the same small spec again, read off the object.
			observedSpec, _ := obs.Object["spec"].(map[string]any)
			if err := xfn.Decode(observedSpec, &replica); err != nil || observedSpec == nil {
				return fmt.Errorf("cannot read ModelReplica %s: %w", obs.GetName(), err)
			}
			if _, ok := revisions[replica.Revision]; !ok {
				if old := observed[resource.Name(revisionResourcePrefix+replica.Revision)].Resource; old != nil {
					raw, err := json.Marshal(old.Object["data"])
					if err != nil {
						return err
					}
					revisions[replica.Revision] = runtime.RawExtension{Raw: raw}
				}
			}
		case occupied[n]:
			count(QuotaTerminating)
			continue // the departed replica's Pods are still on the API server
		}
		isReady := observedReady(obs)
		if isReady {
			ready++
		}
		state := QuotaInFlight // a replica not yet observed has no Pods
		if obs != nil {
			if s, ok, _ := unstructured.NestedString(obs.Object, "status", "quota"); ok && s != "" {
				state = s
			}
		}
		count(state)
		if replica.UpToDate(spec) {
			upToDate++
		}
		if desired[key], err = xfn.Composed(modelReplica(ns, replica), isReady); err != nil {
			return err
		}
	}
	for rev, data := range revisions {
		cr := &appsv1.ControllerRevision{
			TypeMeta:   typeMeta("apps/v1", "ControllerRevision"),
			ObjectMeta: objectMeta(ns, naming.RevisionName(spec.DeploymentName, spec.RoleName, rev), naming.RoleLabels(spec.DeploymentName, spec.RoleName)),
			Data:       data,
			Revision:   1,
		}
		if desired[resource.Name(revisionResourcePrefix+rev)], err = xfn.Composed(cr, true); err != nil {
			return err
		}
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return err
	}
	return xfn.SetDesiredStatus(req, rsp, xr, map[string]any{"ready": ready, "upToDate": upToDate, "quotaReserved": reserved, "quota": quota})
}

func replicaResource(ordinal int32) resource.Name {
	return resource.Name(replicaResourcePrefix + strconv.Itoa(int(ordinal)))
}

// modelReplica is the internal composite of one replica. Its name is generated: a replacement must
// never collide with the object it replaces while that one is still being deleted.
func modelReplica(namespace string, spec v1alpha1.ModelReplicaSpec) *v1alpha1.ModelReplica {
	meta := objectMeta(namespace, "", naming.ReplicaLabels(spec.DeploymentName, spec.RoleName, spec.Ordinal))
	meta.GenerateName = naming.ReplicaGenerateName(spec.DeploymentName, spec.RoleName, spec.Ordinal)
	return &v1alpha1.ModelReplica{
		TypeMeta:   typeMeta(v1alpha1.SchemeGroupVersion.String(), v1alpha1.ModelReplicaKind),
		ObjectMeta: meta,
		Spec:       spec,
	}
}
