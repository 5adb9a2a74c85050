package renderroles

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
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

// replicaStep stamps a replica's Pods and headless Service from the revision it names.
var replicaStep = phases(observeReplica, planReplica, writeReplica)

// replicaObservation is what the replica step reads off its request.
type replicaObservation struct {
	name, namespace string
	spec            v1alpha1.ModelReplicaSpec
	// group names the replica's Kueue pod group and so its Workload.
	group string
	// revision is the RoleRevision the replica names; nil when it is not on the API server.
	revision *v1alpha1.RoleRevision
	// workload is the group's Workload; nil while Kueue has built none.
	workload *kueue.Workload
	// members are the observed member Pods, by composition resource name.
	members map[resource.Name]*corev1.Pod
	// service is whether the instance Service exists.
	service bool
}

// observeReplica reads the replica, its revision, its Workload and its observed Pods; nil while
// Crossplane has not fetched the revision and the Workload yet.
func observeReplica(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) (*replicaObservation, error) {
	replica := &v1alpha1.ModelReplica{}
	if err := xfn.Decode(xr.Resource.Object, replica); err != nil {
		return nil, fmt.Errorf("cannot read ModelReplica %s: %w", xr.Resource.GetName(), err)
	}
	ns, spec := xr.Resource.GetNamespace(), replica.Spec
	o := &replicaObservation{name: xr.Resource.GetName(), namespace: ns, spec: spec, members: map[resource.Name]*corev1.Pod{}}
	r := xfn.NewRequirements(req, rsp)
	revObj, err := r.ByName("revision", "apps/v1", "ControllerRevision", ns, spec.RevisionName)
	if err != nil {
		return nil, err
	}
	o.group = workerv1.GroupName(ns, spec.DeploymentName, spec.RoleName, spec.Ordinal)
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
	if err := o.readMembers(req); err != nil {
		return nil, err
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
	revision := &v1alpha1.RoleRevision{}
	err := xfn.Decode(obj.Object, cr)
	if err == nil && cr.Data.Raw != nil {
		err = json.Unmarshal(cr.Data.Raw, revision)
	}
	if err != nil || cr.Data.Raw == nil {
		return nil, fmt.Errorf("revision %s/%s holds no readable RoleRevision: %v", ns, name, err)
	}
	return revision, nil
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
	return nil
}

// replicaPlan is what the replica step writes.
type replicaPlan struct {
	// members are the Pods to compose, by member index, and whether each is Ready.
	members []*corev1.Pod
	ready   []bool
	// service is the instance Service, nil at size 1, and whether it exists.
	service      *corev1.Service
	serviceReady bool
	status       v1alpha1.ModelReplicaStatus
}

// planReplica renders the replica's Pods and Service from its revision and reports its members and
// admission.
func planReplica(o *replicaObservation) (*replicaPlan, error) {
	if err := o.checkRevision(); err != nil {
		return nil, err
	}
	spec := o.spec
	in := Replica{Namespace: o.namespace, Deployment: spec.DeploymentName, Role: spec.RoleName, Ordinal: spec.Ordinal, Revision: o.revision}
	p := &replicaPlan{members: RenderMembers(in), service: RenderInstanceService(in), serviceReady: o.service}
	var readyMembers int32
	for m := range p.members {
		isReady := podReady(o.members[memberResource(m)])
		p.ready = append(p.ready, isReady)
		if isReady {
			readyMembers++
		}
	}
	p.status = o.status(readyMembers, len(p.members))
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

// status reports the replica's members and its group's admission.
func (o *replicaObservation) status(readyMembers int32, size int) v1alpha1.ModelReplicaStatus {
	terminating := 0
	for _, pod := range o.members {
		if pod.DeletionTimestamp != nil {
			terminating++
		}
	}
	quota := InstanceQuota(o.workload, len(o.members), terminating, size)
	admitted := o.workload != nil && apimeta.IsStatusConditionTrue(o.workload.Status.Conditions, kueue.WorkloadAdmitted)
	return v1alpha1.ModelReplicaStatus{
		Members: ptr.To(int32(len(o.members))), ReadyMembers: ptr.To(readyMembers), Workload: o.group,
		Quota: quota, QuotaReserved: ptr.To(quota == QuotaReserved), Admitted: ptr.To(admitted),
	}
}

// writeReplica composes the replica's Pods and Service and writes its status.
func writeReplica(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite, _ *replicaObservation, p *replicaPlan) error {
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
