package renderroles

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	xpv1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"google.golang.org/protobuf/types/known/durationpb"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/xfn"
)

// revisionResourcePrefix opens the composition resource name of each revision the role step renders.
const revisionResourcePrefix = "revision-"

// roleStep renders the revisions a role's replicas run and the role's status. The replicas
// themselves are created by the rollout controller (a role of hundreds of replicas would otherwise
// re-apply every one of them on each of its reconciles).
var roleStep = phases(observeRole, planRole, writeRole)

// ConvergingTTL is how soon a role that is not ready, or whose watch circuit breaker is open, is
// rendered again. Its replicas coming up send it about a dozen events each (Crossplane's own writes
// to each new replica, the members controller's reports), enough to open the breaker of a role of a
// few dozen replicas, which then drops the events its readiness and its spec edits arrive by; the
// deployment's readiness waits on the role's. A settled role keeps the function's minute.
const ConvergingTTL = 5 * time.Second

// replicasRequirement names the role's ModelReplicas among a request's required resources.
const replicasRequirement = "replicas"

// roleObservation is what the role step reads off its request.
type roleObservation struct {
	namespace string
	spec      v1alpha1.ModelRoleSpec
	// replicas are the standing ModelReplicas of the ordinals below spec.replicas.
	replicas map[int32]*v1alpha1.ModelReplica
	// leaving are the ordinals with no standing replica whose departed one is still being deleted.
	leaving map[int32]bool
	// revisions are the observed revisions, other than the current one, the replicas run.
	revisions map[string]runtime.RawExtension
	// podsCreated is whether the role already carries a PodsCreated condition.
	podsCreated bool
}

// observeRole reads the role, its replicas and the revisions they run; nil until Crossplane has
// fetched the replicas.
func observeRole(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) (*roleObservation, error) {
	role := &v1alpha1.ModelRole{}
	if err := xfn.Decode(xr.Resource.Object, role); err != nil {
		return nil, fmt.Errorf("cannot read ModelRole %s: %w", xr.Resource.GetName(), err)
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	o := &roleObservation{namespace: xr.Resource.GetNamespace(), spec: role.Spec, replicas: map[int32]*v1alpha1.ModelReplica{},
		leaving: map[int32]bool{}, revisions: map[string]runtime.RawExtension{}}
	o.podsCreated, _ = refusedCondition(role.Status.ConditionedStatus)
	r := xfn.NewRequirements(req, rsp)
	replicas, err := r.ByLabels(replicasRequirement, v1alpha1.SchemeGroupVersion.String(), v1alpha1.ModelReplicaKind, o.namespace,
		naming.RoleLabels(role.Spec.DeploymentName, role.Spec.RoleName))
	if err != nil || r.Pending {
		return nil, err
	}
	if err := o.readReplicas(replicas, observed); err != nil {
		return nil, err
	}
	return o, nil
}

// readReplicas sorts the role's replicas of the declared ordinals into standing and leaving ones,
// and reads the old revisions the standing ones run.
func (o *roleObservation) readReplicas(replicas []*unstructured.Unstructured, observed map[resource.Name]resource.ObservedComposed) error {
	for _, obj := range replicas {
		replica := &v1alpha1.ModelReplica{}
		if err := xfn.Decode(obj.Object, replica); err != nil {
			return fmt.Errorf("cannot read ModelReplica %s: %w", obj.GetName(), err)
		}
		n := replica.Spec.Ordinal
		switch {
		case n >= o.spec.Replicas:
			continue // scaled away: the rollout controller retires it
		case replica.DeletionTimestamp != nil:
			o.leaving[n] = true
			continue
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

// rolePlan is what the role step writes.
type rolePlan struct {
	revisions map[string]runtime.RawExtension
	status    v1alpha1.ModelRoleStatus
	// podsCreated is the role's PodsCreated condition, written when podsCreatedKnown.
	podsCreated      Condition
	podsCreatedKnown bool
}

// planRole keeps the revisions the replicas run and counts the role's instances.
func planRole(o *roleObservation) (*rolePlan, error) {
	current, err := currentRevision(o.spec)
	if err != nil {
		return nil, err
	}
	p := &rolePlan{revisions: map[string]runtime.RawExtension{o.spec.Revision: current}}
	var ready, upToDate, olderCompatible int32
	var live v1alpha1.MemberCounts
	var modes v1alpha1.DeployedModes
	var flavors []string
	takesOver := map[string]bool{} // by revision, decoded once
	quota := map[string]int32{}
	qualifications := make([]*v1alpha1.Qualification, 0, o.spec.Replicas)
	standing := make([]*v1alpha1.ModelReplica, 0, o.spec.Replicas)
	for n := range o.spec.Replicas {
		quota[o.slotState(n)]++
		r := o.replicas[n]
		standing = append(standing, r)
		if r == nil {
			qualifications = append(qualifications, nil)
			continue
		}
		qualifications = append(qualifications, r.Status.Qualification)
		if data, ok := o.revisions[r.Spec.Revision]; ok {
			p.revisions[r.Spec.Revision] = data
		}
		if statusReady(r.Status.ConditionedStatus) { // written by the members controller
			ready++
		}
		if r.Status.Live != nil {
			live = live.Add(*r.Status.Live)
		}
		for _, f := range r.Status.Flavors {
			if !slices.Contains(flavors, f) {
				flavors = append(flavors, f)
			}
		}
		if r.Spec.UpToDate(o.spec) {
			upToDate++
		}
		if r.Spec.OlderCompatible(o.spec) {
			olderCompatible++
		}
		if data, ok := p.revisions[r.Spec.Revision]; ok {
			over, seen := takesOver[r.Spec.Revision]
			if !seen {
				rev := &v1alpha1.RoleRevision{}
				if err := json.Unmarshal(data.Raw, rev); err != nil {
					return nil, fmt.Errorf("cannot read revision %s of replica %s: %w", r.Spec.Revision, r.Name, err)
				}
				over = rev.TakesOver()
				takesOver[r.Spec.Revision] = over
			}
			if over {
				modes.Unmanaged++
			} else {
				modes.Managed++
			}
		}
	}
	p.status = v1alpha1.ModelRoleStatus{Ready: &ready, UpToDate: &upToDate, OlderCompatible: &olderCompatible, QuotaReserved: ptr.To(quota[replicas.QuotaReserved]), Quota: quota, Members: &live, Modes: &modes, AssignedFlavors: flavors}
	slices.Sort(p.status.AssignedFlavors)
	p.status.Eligible, p.status.Eligibility, p.status.EligibilityActive = RoleEligibility(qualifications)
	p.podsCreated, p.podsCreatedKnown = RolePodsCreated(standing, o.podsCreated)
	return p, nil
}

// currentRevision is the snapshot of the role's current configuration.
func currentRevision(spec v1alpha1.ModelRoleSpec) (runtime.RawExtension, error) {
	data, err := json.Marshal(replicas.CurrentRevision(spec))
	return runtime.RawExtension{Raw: data}, err
}

// slotState is slot n's admission state: its standing replica's, Terminating while its departed
// replica is still being deleted, in flight while its replica is being created.
func (o *roleObservation) slotState(n int32) string {
	switch r := o.replicas[n]; {
	case r != nil && r.Status.Quota != "":
		return r.Status.Quota
	case r == nil && o.leaving[n]:
		return replicas.QuotaTerminating
	}
	return replicas.QuotaInFlight
}

// writeRole composes the revisions and writes the role's status.
func writeRole(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite, o *roleObservation, p *rolePlan) error {
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	ns, spec := o.namespace, o.spec
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
	if p.podsCreatedKnown {
		c := p.podsCreated
		xfn.SetCondition(rsp, string(v1alpha1.PodsCreatedConditionType), c.Status, c.Reason, c.Message)
	}
	ready := *p.status.Ready == spec.Replicas
	xfn.SetDesiredReady(rsp, ready)
	if !ready || xr.Resource.GetCondition(xpv1.TypeResponsive).Status == corev1.ConditionFalse {
		rsp.Meta.Ttl = durationpb.New(ConvergingTTL)
	}
	return nil
}
