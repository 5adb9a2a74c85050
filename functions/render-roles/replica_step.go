package renderroles

import (
	"fmt"
	"strconv"
	"strings"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/xfn"
)

// Composition resource names of the replica step.
const (
	memberResourcePrefix    = "member-"
	instanceServiceResource = "service"
)

// replicaStep reports a replica's readiness. Its Pods and headless Service are created by the
// members controller (controllers/members) from the same Materialize this package renders with, so
// that no event on a Pod re-runs this composition. A replica created before the controller took the
// Pods over still has them composed here, and keeps them composed until it is replaced: dropping
// them from the desired state would make Crossplane delete them.
var replicaStep = phases(observeReplica, planReplica, writeReplica)

// replicaObservation is what the replica step reads off its request.
type replicaObservation struct {
	name, namespace string
	spec            v1alpha1.ModelReplicaSpec
	// status is the replica's status as the members controller reported it.
	status v1alpha1.ModelReplicaStatus
	// revision is the RoleRevision the replica names, read when this step composes the members; nil
	// when it is not on the API server.
	revision *v1alpha1.RoleRevision
	// composesMembers is true for a replica whose Pods this step composes (created before the
	// members controller took them over).
	composesMembers bool
	// group names the replica's Kueue pod group and so its Workload.
	group string
	// workload is the group's Workload, read only when this step composes the members; nil while
	// Kueue has built none.
	workload *kueue.Workload
	// members are the observed member Pods, by composition resource name.
	members map[resource.Name]*corev1.Pod
	// service is whether the instance Service exists.
	service bool
}

// observeReplica reads the replica and, when it composes the members, its revision, its Workload and
// its observed Pods; nil while Crossplane has not fetched what it required yet.
func observeReplica(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) (*replicaObservation, error) {
	replica := &v1alpha1.ModelReplica{}
	if err := xfn.Decode(xr.Resource.Object, replica); err != nil {
		return nil, fmt.Errorf("cannot read ModelReplica %s: %w", xr.Resource.GetName(), err)
	}
	ns, spec := xr.Resource.GetNamespace(), replica.Spec
	o := &replicaObservation{name: xr.Resource.GetName(), namespace: ns, spec: spec, status: replica.Status,
		group: workerv1.GroupName(ns, spec.DeploymentName, spec.RoleName, spec.Ordinal), members: map[resource.Name]*corev1.Pod{}}
	if err := o.readMembers(req); err != nil || !o.composesMembers {
		return o, err
	}
	r := xfn.NewRequirements(req, rsp)
	revObj, err := r.ByName("revision", "apps/v1", "ControllerRevision", ns, spec.RevisionName)
	if err != nil {
		return nil, err
	}
	wlObj, err := r.ByName("workload", kueue.GroupVersion.String(), "Workload", ns, o.group)
	if err != nil || r.Pending {
		return nil, err
	}
	if o.revision, err = readRoleRevision(revObj, ns, spec.RevisionName); err != nil {
		return nil, err
	}
	if err := decodeInto(wlObj, nil, &o.workload); err != nil {
		return nil, fmt.Errorf("cannot read Workload %s/%s: %w", ns, o.group, err)
	}
	return o, nil
}

// readRoleRevision decodes the RoleRevision a ControllerRevision holds; nil when there is no
// ControllerRevision.
func readRoleRevision(obj *unstructured.Unstructured, ns, name string) (*v1alpha1.RoleRevision, error) {
	if obj == nil {
		return nil, nil
	}
	cr := &appsv1.ControllerRevision{}
	if err := xfn.Decode(obj.Object, cr); err != nil {
		return nil, fmt.Errorf("revision %s/%s holds no readable RoleRevision: %w", ns, name, err)
	}
	return ReadRevision(cr)
}

// readMembers decodes the observed member Pods and notes whether the instance Service exists.
func (o *replicaObservation) readMembers(req *fnv1.RunFunctionRequest) error {
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	for key, obs := range observed {
		if !strings.HasPrefix(string(key), memberResourcePrefix) {
			continue
		}
		pod := &corev1.Pod{}
		if err := xfn.Decode(obs.Resource.Object, pod); err != nil {
			return fmt.Errorf("cannot read Pod %s: %w", obs.Resource.GetName(), err)
		}
		o.members[key] = pod
	}
	o.service = observed[instanceServiceResource].Resource != nil
	o.composesMembers = len(o.members) > 0 || o.service
	return nil
}

// replicaPlan is what the replica step writes.
type replicaPlan struct {
	// composesMembers is true when the step composes the replica's Pods and Service itself.
	composesMembers bool
	// members are the Pods to compose, by member index, and whether each is Ready.
	members []*corev1.Pod
	ready   []bool
	// service is the instance Service, nil at size 1, and whether it exists.
	service      *corev1.Service
	serviceReady bool
	status       v1alpha1.ModelReplicaStatus
	// replicaReady is the replica's readiness when the members controller creates its Pods: as many
	// members as its revision gives it exist and are Ready, as the controller reported.
	replicaReady bool
}

// planReplica decides the replica's readiness from what the members controller reported or, for a
// replica whose Pods it composes, renders them from its revision and reports its members and
// admission.
func planReplica(o *replicaObservation) (*replicaPlan, error) {
	if !o.composesMembers {
		return &replicaPlan{replicaReady: o.status.Ready()}, nil
	}
	if err := o.checkRevision(); err != nil {
		return nil, err
	}
	spec := o.spec
	in := Replica{Namespace: o.namespace, Deployment: spec.DeploymentName, Role: spec.RoleName, Ordinal: spec.Ordinal, Revision: o.revision}
	p := &replicaPlan{composesMembers: true, members: RenderMembers(in), service: RenderInstanceService(in), serviceReady: o.service}
	observed := make([]*corev1.Pod, 0, len(o.members))
	for m := range p.members {
		p.ready = append(p.ready, podReady(o.members[memberResource(m)]))
	}
	for _, pod := range o.members {
		observed = append(observed, pod)
	}
	p.status = MemberStatus(observed, o.workload, o.group, o.spec.RoleName, len(p.members))
	return p, nil
}

// checkRevision fails the render when the replica's revision is missing or holds another revision.
// Failing keeps the replica's Pods as they are: nothing is applied or deleted on a fatal result.
func (o *replicaObservation) checkRevision() error {
	spec := o.spec
	if o.revision == nil {
		return fmt.Errorf("ModelReplica %s (role %s, ordinal %d): its revision %s/%s is not on the API server, so its Pods cannot be rendered",
			o.name, spec.RoleName, spec.Ordinal, o.namespace, spec.RevisionName)
	}
	if o.revision.Revision != spec.Revision {
		return fmt.Errorf("revision %s/%s holds revision %q, not the %q ModelReplica %s was created with", o.namespace, spec.RevisionName, o.revision.Revision, spec.Revision, o.name)
	}
	return nil
}

// writeReplica composes the replica's Pods and Service and writes its status when it composes its
// members; otherwise it only states whether the replica is ready, leaving the status to the members
// controller.
func writeReplica(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite, _ *replicaObservation, p *replicaPlan) error {
	if !p.composesMembers {
		xfn.SetDesiredReady(rsp, p.replicaReady)
		return nil
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	for m, pod := range p.members {
		if desired[memberResource(m)], err = xfn.Composed(pod, p.ready[m]); err != nil {
			return err
		}
	}
	if p.service != nil {
		if desired[instanceServiceResource], err = xfn.Composed(p.service, p.serviceReady); err != nil {
			return err
		}
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return err
	}
	return xfn.SetDesiredStatus(req, rsp, xr, &p.status)
}

func memberResource(m int) resource.Name {
	return resource.Name(memberResourcePrefix + strconv.Itoa(m))
}
