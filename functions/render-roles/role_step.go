package renderroles

import (
	"encoding/json"
	"fmt"
	"strconv"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

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
var roleStep = phases(observeRole, planRole, writeRole)

// roleObservation is what the role step reads off its request.
type roleObservation struct {
	namespace string
	spec      v1alpha1.ModelRoleSpec
	// replicas are the observed ModelReplicas of the ordinals below spec.replicas. A spec field an
	// object lacks is the current one.
	replicas map[int32]*v1alpha1.ModelReplica
	// draining are the empty slots whose departed replica's Pods are still on the API server.
	draining map[int32]bool
	// revisions are the observed revisions, other than the current one, the replicas run.
	revisions map[string]runtime.RawExtension
}

// observeRole reads the role and its observed replicas and revisions; nil while Crossplane has not
// fetched the Pods of every empty slot yet.
func observeRole(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) (*roleObservation, error) {
	role := &v1alpha1.ModelRole{}
	if err := xfn.Decode(xr.Resource.Object, role); err != nil {
		return nil, fmt.Errorf("cannot read ModelRole %s: %w", xr.Resource.GetName(), err)
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	o := &roleObservation{namespace: xr.Resource.GetNamespace(), spec: role.Spec,
		replicas: map[int32]*v1alpha1.ModelReplica{}, draining: map[int32]bool{}, revisions: map[string]runtime.RawExtension{}}
	r := xfn.NewRequirements(req, rsp)
	if err := o.requireSlotPods(r, observed); err != nil || r.Pending {
		return nil, err
	}
	if err := o.readReplicas(observed); err != nil {
		return nil, err
	}
	return o, nil
}

// requireSlotPods asks, for each empty slot, whether Pods of its ordinal remain. Only an empty slot
// needs to know; asking for the Pods of the whole role would carry every member of every replica
// into the request.
//
// A role that has composed nothing yet asks nothing: its slots never held a replica of its own, and
// asking would have Crossplane send the role every event of every Pod its first replicas bring up
// (enough to open the role's watch circuit breaker). Pods an earlier deployment of the same name
// left behind are waited out by the members controller, which creates no Pod in a slot another
// replica's Pods still hold.
func (o *roleObservation) requireSlotPods(r *xfn.Requirements, observed map[resource.Name]resource.ObservedComposed) error {
	if len(observed) == 0 {
		return nil
	}
	ns, spec := o.namespace, o.spec
	for n := range spec.Replicas {
		if observed[replicaResource(n)].Resource != nil {
			continue
		}
		selector := naming.ReplicaLabels(spec.DeploymentName, spec.RoleName, n)
		pods, err := r.ByLabels(fmt.Sprintf("pods-r%d", n), "v1", "Pod", ns, selector)
		if err != nil {
			return err
		}
		o.draining[n] = len(pods) > 0
	}
	return nil
}

// readReplicas decodes the observed replicas of the ordinals in use and the old revisions they run.
func (o *roleObservation) readReplicas(observed map[resource.Name]resource.ObservedComposed) error {
	for n := range o.spec.Replicas {
		obs := observed[replicaResource(n)].Resource
		if obs == nil {
			continue
		}
		// The slot keeps its revision: its small spec is rendered again, read off the object.
		replica := &v1alpha1.ModelReplica{Spec: o.newReplica(n)}
		spec, _ := obs.Object["spec"].(map[string]any)
		if err := xfn.Decode(obs.Object, replica); err != nil || spec == nil {
			return fmt.Errorf("cannot read ModelReplica %s: %w", obs.GetName(), err)
		}
		o.replicas[n] = replica
		rev := replica.Spec.Revision
		if _, seen := o.revisions[rev]; seen || rev == o.spec.Revision {
			continue
		}
		if old := observed[resource.Name(revisionResourcePrefix+rev)].Resource; old != nil {
			if err := o.readRevision(rev, old); err != nil {
				return err
			}
		}
	}
	return nil
}

func (o *roleObservation) readRevision(rev string, obj *composed.Unstructured) error {
	cr := &appsv1.ControllerRevision{}
	if err := xfn.Decode(obj.Object, cr); err != nil {
		return err
	}
	o.revisions[rev] = cr.Data
	return nil
}

// newReplica is the spec of a replica created in slot n now: on the current revision.
func (o *roleObservation) newReplica(n int32) v1alpha1.ModelReplicaSpec {
	spec := o.spec
	return v1alpha1.ModelReplicaSpec{
		DeploymentName: spec.DeploymentName, RoleName: spec.RoleName, Ordinal: n,
		Revision: spec.Revision, RevisionName: naming.RevisionName(spec.DeploymentName, spec.RoleName, spec.Revision),
		ConfigDigest: spec.ConfigDigest, RenderVersion: spec.RenderVersion,
	}
}

// desiredReplica is one ModelReplica the role step composes.
type desiredReplica struct {
	spec  v1alpha1.ModelReplicaSpec
	ready bool
}

// rolePlan is what the role step writes.
type rolePlan struct {
	replicas  map[int32]desiredReplica
	revisions map[string]runtime.RawExtension
	status    v1alpha1.ModelRoleStatus
}

// planRole fills each slot, keeps the revisions the replicas run and counts the role's instances.
func planRole(o *roleObservation) (*rolePlan, error) {
	current, err := currentRevision(o.spec)
	if err != nil {
		return nil, err
	}
	p := &rolePlan{replicas: map[int32]desiredReplica{}, revisions: map[string]runtime.RawExtension{o.spec.Revision: current}}
	var ready, upToDate int32
	quota := map[string]int32{}
	for n := range o.spec.Replicas {
		r, state := o.slot(n)
		quota[state]++
		if r == nil {
			continue // the departed replica's Pods are still on the API server
		}
		p.replicas[n] = *r
		if data, ok := o.revisions[r.spec.Revision]; ok {
			p.revisions[r.spec.Revision] = data
		}
		if r.ready {
			ready++
		}
		if r.spec.UpToDate(o.spec) {
			upToDate++
		}
	}
	p.status = v1alpha1.ModelRoleStatus{Ready: &ready, UpToDate: &upToDate, QuotaReserved: ptr.To(quota[QuotaReserved]), Quota: quota}
	return p, nil
}

// currentRevision is the snapshot of the role's current configuration.
func currentRevision(spec v1alpha1.ModelRoleSpec) (runtime.RawExtension, error) {
	data, err := json.Marshal(CurrentRevision(spec))
	return runtime.RawExtension{Raw: data}, err
}

// CurrentRevision is the RoleRevision of a role's current configuration: what its ControllerRevision
// holds once the role's composition has applied it.
func CurrentRevision(spec v1alpha1.ModelRoleSpec) *v1alpha1.RoleRevision {
	return &v1alpha1.RoleRevision{
		TypeMeta: typeMeta(v1alpha1.SchemeGroupVersion.String(), v1alpha1.RoleRevisionKind),
		Revision: spec.Revision,
		Size:     spec.Size,
		Template: spec.Template,
	}
}

// slot decides slot n: its observed replica stays on its revision; while the departed replica's
// Pods remain it stays empty (nil); otherwise a replica is created on the current revision. state
// is the slot's admission state.
func (o *roleObservation) slot(n int32) (r *desiredReplica, state string) {
	obs := o.replicas[n]
	switch {
	case obs != nil:
		state = QuotaInFlight
		if obs.Status.Quota != "" {
			state = obs.Status.Quota
		}
		return &desiredReplica{spec: obs.Spec, ready: statusReady(obs.Status.ConditionedStatus)}, state
	case o.draining[n]:
		return nil, QuotaTerminating
	}
	return &desiredReplica{spec: o.newReplica(n)}, QuotaInFlight // a replica not yet observed has no Pods
}

// writeRole composes the replicas and revisions and writes the role's status.
func writeRole(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite, o *roleObservation, p *rolePlan) error {
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	ns, spec := o.namespace, o.spec
	// Every replica is composed as ready and the role's readiness is stated once, below: Crossplane
	// records an event for each unready composed resource on every reconcile, which for a role of
	// hundreds of replicas coming up is hundreds of events per pass.
	for n, r := range p.replicas {
		if desired[replicaResource(n)], err = xfn.Composed(modelReplica(ns, r.spec), true); err != nil {
			return err
		}
	}
	for rev, data := range p.revisions {
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
	if err := xfn.SetDesiredStatus(req, rsp, xr, &p.status); err != nil {
		return err
	}
	xfn.SetDesiredReady(rsp, *p.status.Ready == spec.Replicas)
	return nil
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
