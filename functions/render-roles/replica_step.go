package renderroles

import (
	"fmt"
	"strconv"
	"strings"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
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
func replicaStep(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) error {
	replica := &v1alpha1.ModelReplica{}
	if err := xfn.Decode(xr.Resource.Object, replica); err != nil {
		return fmt.Errorf("cannot read ModelReplica %s: %w", xr.Resource.GetName(), err)
	}
	ns, spec := xr.Resource.GetNamespace(), replica.Spec
	r := xfn.NewRequirements(req, rsp)
	obj, err := r.ByName("revision", "apps/v1", "ControllerRevision", ns, spec.RevisionName)
	if err != nil {
		return err
	}
	group := workerv1.GroupName(ns, spec.DeploymentName, spec.RoleName, spec.Ordinal)
	wlObj, err := r.ByName("workload", kueue.GroupVersion.String(), "Workload", ns, group)
	if err != nil || r.Pending {
		return err
	}
	if obj == nil {
		// Failing keeps the replica's Pods as they are: nothing is applied or deleted on a fatal result.
		return fmt.Errorf("ModelReplica %s (role %s, ordinal %d): its revision %s/%s is not on the API server, so its Pods cannot be rendered",
			xr.Resource.GetName(), spec.RoleName, spec.Ordinal, ns, spec.RevisionName)
	}
	revision := &v1alpha1.RoleRevision{}
	data, _ := obj.Object["data"].(map[string]any)
	if err := xfn.Decode(data, revision); err != nil || data == nil {
		return fmt.Errorf("revision %s/%s holds no readable RoleRevision: %v", ns, spec.RevisionName, err)
	}
	if revision.Revision != spec.Revision {
		return fmt.Errorf("revision %s/%s holds revision %q, not the %q ModelReplica %s was created with", ns, spec.RevisionName, revision.Revision, spec.Revision, xr.Resource.GetName())
	}

	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	in := Replica{Namespace: ns, Deployment: spec.DeploymentName, Role: spec.RoleName, Ordinal: spec.Ordinal, Revision: revision}
	var members, readyMembers, terminating int64
	pods := RenderMembers(in)
	for m, pod := range pods {
		key := resource.Name(memberResourcePrefix + strconv.Itoa(m))
		isReady := observedReady(observed[key].Resource)
		if desired[key], err = xfn.Composed(pod, isReady); err != nil {
			return err
		}
		if isReady {
			readyMembers++
		}
	}
	for key, o := range observed {
		if strings.HasPrefix(string(key), memberResourcePrefix) {
			members++
			if o.Resource.GetDeletionTimestamp() != nil {
				terminating++
			}
		}
	}
	var wl *kueue.Workload
	if wlObj != nil {
		wl = &kueue.Workload{}
		if err := xfn.Decode(wlObj.Object, wl); err != nil {
			return fmt.Errorf("cannot read Workload %s/%s: %w", ns, group, err)
		}
	}
	quota := InstanceQuota(wl, int(members), int(terminating), len(pods))
	if svc := RenderInstanceService(in); svc != nil {
		if desired[instanceServiceResource], err = xfn.Composed(svc, observed[instanceServiceResource].Resource != nil); err != nil {
			return err
		}
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return err
	}
	return xfn.SetDesiredStatus(req, rsp, xr, map[string]any{
		"members": members, "readyMembers": readyMembers, "workload": group,
		"quota": quota, "quotaReserved": quota == QuotaReserved,
		"admitted": wl != nil && apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadAdmitted),
	})
}
