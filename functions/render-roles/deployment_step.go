package renderroles

import (
	"errors"
	"fmt"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/resource/composed"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/xfn"
)

// Composition resource names of the deployment step.
const (
	deploymentServiceResource = "service"
)

// deploymentInputs are the external objects a deployment's roles bind, as Crossplane fetched them.
type deploymentInputs struct {
	instanceTypes map[string]*workerv1.InstanceType
	binding       *workerv1.KVCachePoolBinding
	pool          *workerv1.KVCachePool
	artifact      *workerv1.ModelArtifact
}

// deploymentStep renders one ModelRole per role, the role Services and the deployment Service, and
// aggregates the roles' status onto the deployment.
func deploymentStep(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) error {
	md := &workerv1.ModelDeployment{}
	if err := xfn.Decode(xr.Resource.Object, md); err != nil {
		return fmt.Errorf("cannot read ModelDeployment %s: %w", xr.Resource.GetName(), err)
	}
	r := xfn.NewRequirements(req, rsp)
	in, err := readDeploymentInputs(r, md)
	if err != nil || r.Pending {
		return err // while pending, Crossplane fetches what was required and calls again
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	rendered, err := renderRoles(md, in)
	if err != nil {
		return err
	}

	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	ns, name := md.Namespace, md.Name
	var statuses []any
	desiredReplicas := map[string]int32{}
	quotaStates := map[string]map[string]int32{}
	rollouts := map[string]RoleRollout{}
	for i, role := range md.Spec.Roles {
		role = rendered[i].Role // defaulted once, by RenderRole
		r := rendered[i]
		roleResource := resource.Name(naming.RoleResource(role.Name))
		observedRole := observed[roleResource].Resource
		if desired[roleResource], err = xfn.Composed(modelRole(md, role, r), observedReady(observedRole)); err != nil {
			return err
		}
		svcResource := resource.Name(naming.RoleServiceResource(role.Name))
		svc := RenderRoleService(ns, naming.RoleServiceName(name, role.Name), name, role.Name, r)
		if desired[svcResource], err = xfn.Composed(svc, observed[svcResource].Resource != nil); err != nil {
			return err
		}
		statuses = append(statuses, roleStatus(role, r, observedRole))
		desiredReplicas[role.Name] = role.Replicas
		quotaStates[role.Name] = observedQuota(observedRole)
		rollouts[role.Name] = observedRollout(role, observedRole)
	}
	setCondition(rsp, "QuotaReserved", QuotaCondition(desiredReplicas, quotaStates))
	setCondition(rsp, "ReplicasUpToDate", UpToDateCondition(rollouts))
	first := md.Spec.Roles[0].Name
	svc := RenderRoleService(ns, name, name, first, rendered[0])
	if desired[deploymentServiceResource], err = xfn.Composed(svc, observed[deploymentServiceResource].Resource != nil); err != nil {
		return err
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return err
	}
	return xfn.SetDesiredStatus(req, rsp, xr, map[string]any{
		"roles":       statuses,
		"endpoint":    Endpoint(ns, name, rendered[0]),
		"roleSummary": roleSummary(md, statuses),
	})
}

// readDeploymentInputs requires the InstanceType of every role and, when named, the cache Binding,
// its pool and the ModelArtifact. Until Crossplane has fetched them all, r is pending.
func readDeploymentInputs(r *xfn.Requirements, md *workerv1.ModelDeployment) (*deploymentInputs, error) {
	in := &deploymentInputs{instanceTypes: map[string]*workerv1.InstanceType{}}
	api := workerv1.SchemeGroupVersion.String()
	for _, role := range md.Spec.Roles {
		if _, seen := in.instanceTypes[role.InstanceType]; seen {
			continue
		}
		obj, err := r.ByName("instancetype/"+role.InstanceType, api, workerv1.InstanceTypeKind, "", role.InstanceType)
		if err != nil {
			return nil, err
		}
		in.instanceTypes[role.InstanceType] = nil
		if obj != nil {
			in.instanceTypes[role.InstanceType] = &workerv1.InstanceType{}
			if err := xfn.Decode(obj.Object, in.instanceTypes[role.InstanceType]); err != nil {
				return nil, err
			}
		}
	}
	if kv := md.Spec.KVCache; kv != nil && kv.PoolRef.Name != "" {
		obj, err := r.ByName("binding", api, workerv1.KVCachePoolBindingKind, md.Namespace, kv.PoolRef.Name)
		if err := decodeInto(obj, err, &in.binding); err != nil {
			return nil, err
		}
		if in.binding != nil {
			obj, err := r.ByName("pool", api, workerv1.KVCachePoolKind, "", in.binding.Spec.PoolRef.Name)
			if err := decodeInto(obj, err, &in.pool); err != nil {
				return nil, err
			}
		}
	}
	if ref := md.Spec.Model.ArtifactRef; ref != nil {
		obj, err := r.ByName("artifact", api, workerv1.ModelArtifactKind, md.Namespace, ref.Name)
		if err := decodeInto(obj, err, &in.artifact); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// decodeInto decodes a required object, when there is one, into a newly allocated *T.
func decodeInto[T any](obj *unstructured.Unstructured, err error, into **T) error {
	if err != nil || obj == nil {
		return err
	}
	*into = new(T)
	return xfn.Decode(obj.Object, *into)
}

// renderRoles renders every role, reporting every role that cannot be rendered at once.
func renderRoles(md *workerv1.ModelDeployment, in *deploymentInputs) ([]*RenderedRole, error) {
	if len(md.Spec.Roles) == 0 {
		return nil, fmt.Errorf("ModelDeployment %s declares no roles", md.Name)
	}
	var errs []error
	out := make([]*RenderedRole, len(md.Spec.Roles))
	for i, role := range md.Spec.Roles {
		r, err := RenderRole(Role{
			Namespace:    md.Namespace,
			Deployment:   md.Name,
			Spec:         &md.Spec,
			Role:         role,
			InstanceType: in.instanceTypes[role.InstanceType],
			Binding:      in.binding,
			Pool:         in.pool,
			Artifact:     in.artifact,
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[i] = r
	}
	return out, errors.Join(errs...)
}

// modelRole is the internal composite of one role.
func modelRole(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, r *RenderedRole) *v1alpha1.ModelRole {
	return &v1alpha1.ModelRole{
		TypeMeta:   typeMeta(v1alpha1.SchemeGroupVersion.String(), v1alpha1.ModelRoleKind),
		ObjectMeta: objectMeta(md.Namespace, naming.RoleServiceName(md.Name, role.Name), naming.RoleLabels(md.Name, role.Name)),
		Spec: v1alpha1.ModelRoleSpec{
			DeploymentName:   md.Name,
			RoleName:         role.Name,
			Kind:             role.Kind,
			Replicas:         role.Replicas,
			Size:             role.Size,
			Revision:         r.Revision,
			ConfigDigest:     r.ConfigDigest,
			RenderVersion:    RenderVersion,
			MinRenderVersion: RenderFloor(md.Annotations),
			Template:         r.Template,
		},
	}
}

// setCondition reports a condition on the deployment.
func setCondition(rsp *fnv1.RunFunctionResponse, typ string, c Condition) {
	var opt *response.ConditionOption
	switch c.Status {
	case "True":
		opt = response.ConditionTrue(rsp, typ, c.Reason)
	case "False":
		opt = response.ConditionFalse(rsp, typ, c.Reason)
	default:
		opt = response.ConditionUnknown(rsp, typ, c.Reason)
	}
	opt.WithMessage(c.Message).TargetComposite()
}

// observedRollout reads a role's rollout progress off its observed ModelRole.
func observedRollout(role workerv1.ModelDeploymentRole, observed *composed.Unstructured) RoleRollout {
	r := RoleRollout{Desired: role.Replicas}
	if observed == nil {
		return r
	}
	r.UpToDate, r.Observed = xfn.NestedCount(observed.Object, "status", "upToDate")
	r.Replacing = observed.GetAnnotations()[workerv1.AnnotationReplacing] != ""
	return r
}

// observedQuota reads a ModelRole's instances counted by admission state; none before it is observed.
func observedQuota(role *composed.Unstructured) map[string]int32 {
	out := map[string]int32{}
	if role == nil {
		return out
	}
	counts, _, _ := unstructured.NestedMap(role.Object, "status", "quota")
	for state := range counts {
		if n, ok := xfn.NestedCount(counts, state); ok {
			out[state] = int32(n)
		}
	}
	return out
}

// roleStatus is one entry of status.roles, counted in instances from the observed ModelRole.
func roleStatus(role workerv1.ModelDeploymentRole, r *RenderedRole, observed *composed.Unstructured) map[string]any {
	s := map[string]any{
		"name":    role.Name,
		"kind":    string(role.Kind),
		"desired": int64(role.Replicas),
	}
	if r.Unmanaged {
		s["unmanaged"] = true
	}
	if observed != nil {
		for _, field := range []string{"ready", "upToDate", "quotaReserved"} {
			if v, ok := xfn.NestedCount(observed.Object, "status", field); ok {
				s[field] = v
			}
		}
	}
	return s
}

// roleSummary counts Ready instances per kind, in the order R (router Pods), S, P, D, E: 4S, 2P2D.
func roleSummary(md *workerv1.ModelDeployment, statuses []any) string {
	ready := map[workerv1.RoleKind]int64{}
	present := map[workerv1.RoleKind]bool{}
	for _, s := range statuses {
		m := s.(map[string]any)
		kind := workerv1.RoleKind(m["kind"].(string))
		present[kind] = true
		if v, ok := m["ready"].(int64); ok {
			ready[kind] += v
		}
	}
	summary := ""
	if md.Spec.Router != nil {
		summary += "0R" // the router is not rendered yet, so none of its Pods is Ready
	}
	kinds := []workerv1.RoleKind{workerv1.RoleKindServer, workerv1.RoleKindPrefill, workerv1.RoleKindDecode, workerv1.RoleKindEncode}
	letters := map[workerv1.RoleKind]string{workerv1.RoleKindServer: "S", workerv1.RoleKindPrefill: "P", workerv1.RoleKindDecode: "D", workerv1.RoleKindEncode: "E"}
	for _, k := range kinds {
		if present[k] {
			summary += fmt.Sprintf("%d%s", ready[k], letters[k])
		}
	}
	return summary
}
