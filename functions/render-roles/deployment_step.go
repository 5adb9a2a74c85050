package renderroles

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/rolestatus"
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
	backend       *workerv1.KVCacheBackend
	artifact      *workerv1.ModelArtifact
	// runtimeClasses are the RuntimeClasses the types' manufacturers name that exist, by name.
	runtimeClasses map[string]bool
	// settings are the worker Settings (the mdplane-settings EnvironmentConfig).
	settings settings.Settings
	// delivery is how the artifact's weights reach the Pods, nil without an artifact.
	delivery *Delivery
}

// deploymentStep renders one ModelRole per role, the role Services and the deployment Service, and
// aggregates the roles' status onto the deployment.
var deploymentStep = phases(observeDeployment, planDeployment, writeDeployment)

// deploymentObservation is what the deployment step reads off its request.
type deploymentObservation struct {
	md     *workerv1.ModelDeployment
	inputs *deploymentInputs
	// roles are the observed ModelRoles, by role name.
	roles map[string]*v1alpha1.ModelRole
	// exists tells the composed resources that are observed.
	exists map[resource.Name]bool
	// routerReady is the ready Pods of the router Deployment, which kv-cache composes.
	routerReady int64
	// eligibilityMarked are the composed Services whose eligibility term is already active.
	eligibilityMarked map[resource.Name]bool
}

// eligibilityActive reports whether a role's Service selects on the eligibility label: once the
// role's qualification is active (every instance conclusive, the qualified ones labelled), and from
// then on, as the Service's mark keeps the term.
func (o *deploymentObservation) eligibilityActive(svc resource.Name, role string) bool {
	if o.eligibilityMarked[svc] {
		return true
	}
	r := o.roles[role]
	return r != nil && r.Status.EligibilityActive
}

// observeDeployment reads the deployment, the external objects its roles bind and its observed
// ModelRoles; nil while Crossplane has not fetched those objects yet.
func observeDeployment(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite) (*deploymentObservation, error) {
	md := &workerv1.ModelDeployment{}
	if err := xfn.Decode(xr.Resource.Object, md); err != nil {
		return nil, fmt.Errorf("cannot read ModelDeployment %s: %w", xr.Resource.GetName(), err)
	}
	r := xfn.NewRequirements(req, rsp)
	in, err := readDeploymentInputs(r, md)
	if err != nil || r.Pending {
		return nil, err
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return nil, fmt.Errorf("cannot read observed composed resources: %w", err)
	}
	o := &deploymentObservation{md: md, inputs: in, roles: map[string]*v1alpha1.ModelRole{}, exists: map[resource.Name]bool{},
		eligibilityMarked: map[resource.Name]bool{}}
	for key, obs := range observed {
		o.exists[key] = true
		if obs.Resource != nil && obs.Resource.GetKind() == "Service" {
			o.eligibilityMarked[key] = obs.Resource.GetAnnotations()[workerv1.AnnotationEndpointEligibility] == workerv1.EndpointEligibilityActive
		}
	}
	if router := observed[naming.RouterDeploymentResource].Resource; router != nil {
		o.routerReady, _ = xfn.NestedCount(router.Object, "status", "readyReplicas")
	}
	names := map[string]resource.Name{naming.ElasticHeadName(md.Name): naming.ElasticHeadResource}
	for _, role := range md.Spec.Roles {
		names[role.Name] = resource.Name(naming.RoleResource(role.Name))
	}
	for role, key := range names {
		obs := observed[key].Resource
		if obs == nil {
			continue
		}
		o.roles[role] = &v1alpha1.ModelRole{}
		if err := xfn.Decode(obs.Object, o.roles[role]); err != nil {
			return nil, fmt.Errorf("cannot read ModelRole %s: %w", obs.GetName(), err)
		}
	}
	return o, nil
}

// deploymentPlan is what the deployment step writes.
type deploymentPlan struct {
	// roles are the deployment's roles with their defaults, and rendered what each renders to.
	roles    []workerv1.ModelDeploymentRole
	rendered []*RenderedRole
	// head is the Elastic EP Ray head's role, rendered, nil without an elastic role.
	head *RenderedRole
	// quota, upToDate, weights and eligibility are the QuotaReserved, ReplicasUpToDate, WeightsReady
	// and EndpointEligibility conditions.
	quota, upToDate, weights, eligibility Condition
	// podsCreated is the PodsCreated condition, written when podsCreatedKnown.
	podsCreated      Condition
	podsCreatedKnown bool
	status           workerv1.ModelDeploymentStatus
}

// planDeployment renders every role and aggregates the observed ModelRoles into the deployment's
// conditions and status.
func planDeployment(o *deploymentObservation) (*deploymentPlan, error) {
	md := o.md
	rendered, err := renderRoles(md, o.inputs)
	if err != nil {
		return nil, err
	}
	head, err := renderElasticHead(md, o.inputs)
	if err != nil {
		return nil, err
	}
	p := &deploymentPlan{rendered: rendered, head: head}
	desiredReplicas := map[string]int32{}
	quotaStates := map[string]map[string]int32{}
	shortages, preempted := map[string]string{}, map[string]string{}
	rollouts := map[string]RoleRollout{}
	eligibility := map[string]string{}
	var live v1alpha1.MemberCounts
	for i := range md.Spec.Roles {
		role := rendered[i].Role // defaulted once, by RenderRole
		observed := o.roles[role.Name]
		p.roles = append(p.roles, role)
		p.status.Roles = append(p.status.Roles, roleStatus(md, role, rendered[i], observed))
		desiredReplicas[role.Name] = role.Replicas
		quotaStates[role.Name] = observedQuota(observed)
		shortages[role.Name] = RoleShortage(o.inputs.instanceTypes[role.InstanceType], role)
		rollouts[role.Name] = observedRollout(role, observed)
		eligibility[role.Name] = ""
		if observed != nil {
			eligibility[role.Name] = observed.Status.Eligibility
			preempted[role.Name] = observed.Status.PreemptedBy
		}
		if observed != nil && observed.Status.Members != nil {
			live = live.Add(*observed.Status.Members)
		}
	}
	p.quota = QuotaCondition(desiredReplicas, quotaStates, shortages, preempted)
	if borrowing := borrowingTypes(p.roles, o.inputs.instanceTypes); borrowing != "" {
		p.quota.Message += "; " + borrowing
	}
	p.upToDate = UpToDateCondition(rollouts, o.inputs.delivery.Held())
	p.weights = WeightsCondition(o.inputs.delivery, live)
	p.eligibility = Condition(rolestatus.EligibilityCondition(eligibility))
	p.podsCreated, p.podsCreatedKnown = observedPodsCreated(o)
	p.status.Model = o.inputs.delivery.ModelStatus()
	p.status.Endpoint = Endpoint(md.Namespace, md.Name, rendered[0])
	p.status.RoleSummary = roleSummary(md, o.routerReady, p.status.Roles)
	p.status.Phase, p.status.PhaseMessage = deploymentPhase(md, o.routerReady, p.status.Roles, roleNotes(o.roles))
	p.status.Retirement = observedRetirement(md, o.roles)
	return p, nil
}

// observedPodsCreated aggregates the PodsCreated conditions of the declared roles and the Elastic
// EP head's role.
func observedPodsCreated(o *deploymentObservation) (Condition, bool) {
	var names []string
	var roles []*v1alpha1.ModelRole
	for _, role := range o.md.Spec.Roles {
		names, roles = append(names, role.Name), append(roles, o.roles[role.Name])
	}
	if head := naming.ElasticHeadName(o.md.Name); o.roles[head] != nil {
		names, roles = append(names, head), append(roles, o.roles[head])
	}
	carried, _ := rolestatus.PodsCreatedOf(o.md.Status.ConditionedStatus)
	c, ok := rolestatus.DeploymentPodsCreated(names, roles, carried)
	return Condition(c), ok
}

// observedRetirement is the deployment's retirement operation, as the role whose replica it retires
// reports it (one per deployment); nil when no declared role does.
func observedRetirement(md *workerv1.ModelDeployment, roles map[string]*v1alpha1.ModelRole) *workerv1.Retirement {
	for _, role := range md.Spec.Roles {
		r := roles[role.Name]
		if r != nil && r.Status.Retirement != nil {
			return r.Status.Retirement.DeepCopy()
		}
	}
	return nil
}

// writeDeployment composes the ModelRoles and Services and writes the deployment's conditions and
// status.
func writeDeployment(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, xr *resource.Composite, o *deploymentObservation, p *deploymentPlan) error {
	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	if err := composeRoles(desired, o, p); err != nil {
		return err
	}
	xfn.SetCondition(rsp, "QuotaReserved", p.quota.Status, p.quota.Reason, p.quota.Message)
	xfn.SetCondition(rsp, "ReplicasUpToDate", p.upToDate.Status, p.upToDate.Reason, p.upToDate.Message)
	xfn.SetCondition(rsp, weightsConditionType, p.weights.Status, p.weights.Reason, p.weights.Message)
	xfn.SetCondition(rsp, rolestatus.EligibilityConditionType, p.eligibility.Status, p.eligibility.Reason, p.eligibility.Message)
	if p.podsCreatedKnown {
		xfn.SetCondition(rsp, string(v1alpha1.PodsCreatedConditionType), p.podsCreated.Status, p.podsCreated.Reason, p.podsCreated.Message)
	}
	ns, name := o.md.Namespace, o.md.Name
	first := o.md.Spec.Roles[0].Name
	svc := RenderRoleService(ns, name, name, first, p.rendered[0], o.eligibilityActive(deploymentServiceResource, first))
	if desired[deploymentServiceResource], err = xfn.Composed(svc, o.exists[deploymentServiceResource]); err != nil {
		return err
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return err
	}
	xfn.StateReadiness(rsp)
	return xfn.SetDesiredStatus(req, rsp, xr, &p.status)
}

// composeRoles adds each role's ModelRole and Service to the desired resources.
func composeRoles(desired map[resource.Name]*resource.DesiredComposed, o *deploymentObservation, p *deploymentPlan) error {
	md := o.md
	ns, name := md.Namespace, md.Name
	var err error
	composeRole := func(key resource.Name, role workerv1.ModelDeploymentRole, r *RenderedRole, d *Delivery) error {
		observedRole := o.roles[role.Name]
		desired[key], err = xfn.Composed(modelRole(md, role, r, d), observedRole != nil && statusReady(observedRole.Status.ConditionedStatus))
		return err
	}
	if p.head != nil {
		// The Ray head carries no weights: it is composed without the delivery.
		if err := composeRole(naming.ElasticHeadResource, p.head.Role, p.head, nil); err != nil {
			return err
		}
		key := resource.Name(naming.ElasticHeadServiceResource)
		if desired[key], err = xfn.Composed(RenderElasticHeadService(ns, name), o.exists[key]); err != nil {
			return err
		}
	}
	for i, role := range p.roles {
		r := p.rendered[i]
		if err := composeRole(resource.Name(naming.RoleResource(role.Name)), role, r, o.inputs.delivery); err != nil {
			return err
		}
		svcResource := resource.Name(naming.RoleServiceResource(role.Name))
		svc := RenderRoleService(ns, naming.RoleServiceName(name, role.Name), name, role.Name, r, o.eligibilityActive(svcResource, role.Name))
		if desired[svcResource], err = xfn.Composed(svc, o.exists[svcResource]); err != nil {
			return err
		}
	}
	return nil
}

// readDeploymentInputs requires the InstanceType of every role, the Settings and, when named, the
// cache Binding, its pool, the pool's backend and the ModelArtifact. Until Crossplane has fetched
// them all, r is pending.
func readDeploymentInputs(r *xfn.Requirements, md *workerv1.ModelDeployment) (*deploymentInputs, error) {
	instanceTypes, err := readInstanceTypes(r, md)
	if err != nil {
		return nil, err
	}
	runtimeClasses, err := readRuntimeClasses(r, instanceTypes)
	if err != nil {
		return nil, err
	}
	s, err := r.Settings()
	if err != nil {
		return nil, err
	}
	in := &deploymentInputs{instanceTypes: instanceTypes, runtimeClasses: runtimeClasses, settings: s}
	api := workerv1.SchemeGroupVersion.String()
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
		// The backend's group transports decide the fabric a cache client is given interfaces on.
		if in.pool != nil && len(in.pool.Spec.Backends) > 0 {
			obj, err := r.ByName("backend", api, workerv1.KVCacheBackendKind, "", in.pool.Spec.Backends[0])
			if err := decodeInto(obj, err, &in.backend); err != nil {
				return nil, err
			}
		}
	}
	if ref := md.Spec.Model.ArtifactRef; ref != nil {
		obj, err := r.ByName("artifact", api, workerv1.ModelArtifactKind, md.Namespace, ref.Name)
		if err := decodeInto(obj, err, &in.artifact); err != nil {
			return nil, err
		}
		settings := deliverySettingsOf(s)
		objs := DeliveryObjects{Artifact: in.artifact}
		if err := readDeliveryInputs(r, md, &objs, settings); err != nil {
			return nil, err
		}
		in.delivery = ChooseDelivery(md, objs, settings)
	}
	return in, nil
}

// readInstanceTypes requires the InstanceType of every role, by name; nil for one that does not
// exist or has not been fetched yet.
func readInstanceTypes(r *xfn.Requirements, md *workerv1.ModelDeployment) (map[string]*workerv1.InstanceType, error) {
	out := map[string]*workerv1.InstanceType{}
	var names []string
	for _, role := range md.Spec.Roles {
		names = append(names, role.InstanceType)
		if role.ElasticEP != nil && role.ElasticEP.HeadInstanceType != "" {
			names = append(names, role.ElasticEP.HeadInstanceType) // the Ray head's
		}
	}
	for _, name := range names {
		if _, seen := out[name]; seen {
			continue
		}
		obj, err := r.ByName("instancetype/"+name, workerv1.SchemeGroupVersion.String(), workerv1.InstanceTypeKind, "", name)
		var it *workerv1.InstanceType
		if err := decodeInto(obj, err, &it); err != nil {
			return nil, err
		}
		out[name] = it
	}
	return out, nil
}

// RuntimeClass identity: a manufacturer's Pods run with its RuntimeClass only where the cluster has
// one.
const (
	runtimeClassAPIVersion = "node.k8s.io/v1"
	runtimeClassKind       = "RuntimeClass"
)

// readRuntimeClasses requires, by name, the RuntimeClass each fetched InstanceType's manufacturer
// names and reports which exist. A missing class is no error: the Pods run without one.
func readRuntimeClasses(r *xfn.Requirements, instanceTypes map[string]*workerv1.InstanceType) (map[string]bool, error) {
	out := map[string]bool{}
	for _, it := range instanceTypes {
		name := ""
		if it != nil {
			name = it.RuntimeClassName()
		}
		if _, seen := out[name]; seen || name == "" {
			continue
		}
		obj, err := r.ByName("runtimeclass/"+name, runtimeClassAPIVersion, runtimeClassKind, "", name)
		if err != nil {
			return nil, err
		}
		out[name] = obj != nil
	}
	return out, nil
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
		if role.ElasticEP != nil {
			role = elasticMembersRole(role)
		}
		it := in.instanceTypes[role.InstanceType]
		runtimeClass := ""
		if it != nil && in.runtimeClasses[it.RuntimeClassName()] {
			runtimeClass = it.RuntimeClassName()
		}
		r, err := RenderRole(Role{
			Namespace:        md.Namespace,
			Deployment:       md.Name,
			Spec:             &md.Spec,
			Role:             role,
			InstanceType:     it,
			Binding:          in.binding,
			Pool:             in.pool,
			Backend:          in.backend,
			Artifact:         in.artifact,
			RuntimeClassName: runtimeClass,
			Settings:         &in.settings,
			Delivery:         in.delivery,
			PriorityClass:    md.Labels[workerv1.LabelPriorityClass],
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if role.ElasticEP != nil {
			amendElasticMembers(r, md.Namespace, md.Name)
		}
		out[i] = r
	}
	return out, errors.Join(errs...)
}

// renderElasticHead renders the Ray head of the deployment's Elastic EP role, nil without one: a
// take-over role on the CPU-only head type, admitted through that type's queue with its unit CPU
// and memory.
func renderElasticHead(md *workerv1.ModelDeployment, in *deploymentInputs) (*RenderedRole, error) {
	for _, role := range md.Spec.Roles {
		if role.ElasticEP == nil {
			continue
		}
		head := elasticHeadRole(&md.Spec, md.Name, role)
		r, err := RenderRole(Role{Namespace: md.Namespace, Deployment: md.Name, Spec: &md.Spec, Role: head,
			InstanceType: in.instanceTypes[head.InstanceType], Settings: &in.settings, PriorityClass: md.Labels[workerv1.LabelPriorityClass]})
		if err != nil {
			return nil, fmt.Errorf("the Elastic EP head of role %q: %w", role.Name, err)
		}
		amendElasticHead(r)
		return r, nil
	}
	return nil, nil
}

// modelRole is the internal composite of one role. While the delivery is blocked the role carries
// the weights hold, which keeps the rollout controller from creating any Pod.
func modelRole(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, r *RenderedRole, d *Delivery) *v1alpha1.ModelRole {
	mr := &v1alpha1.ModelRole{
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
			Elastic:          r.Elastic,
		},
	}
	if held := d.Held(); held != "" {
		mr.Annotations = map[string]string{workerv1.AnnotationRolloutHeld: held}
	}
	if d != nil && d.NodeAffinity != nil {
		mr.Spec.RequiredNodeAffinity = d.NodeAffinity
	}
	return mr
}

// observedRollout reads a role's rollout progress off its observed ModelRole.
func observedRollout(role workerv1.ModelDeploymentRole, observed *v1alpha1.ModelRole) RoleRollout {
	r := RoleRollout{Desired: role.Replicas}
	if observed == nil {
		return r
	}
	if role.ElasticEP != nil {
		// Outside the rollout: an edit reaches only members created later, so the role reports no
		// rollout in progress whatever its members run.
		r.UpToDate, r.Observed = int64(role.Replicas), true
		return r
	}
	if upToDate := observed.Status.UpToDate; upToDate != nil {
		r.UpToDate, r.Observed = int64(*upToDate), true
	}
	if rep := observed.Status.Replacement; rep != nil {
		r.Replacing, r.Gate = rep.Ordinal != nil, rep.Gate
	}
	r.Held = observed.Annotations[workerv1.AnnotationRolloutHeld]
	r.OlderCompatible = int64(ptr.Deref(observed.Status.OlderCompatible, 0))
	return r
}

// observedQuota reads a ModelRole's instances counted by admission state; none before it is observed.
func observedQuota(role *v1alpha1.ModelRole) map[string]int32 {
	if role == nil {
		return nil
	}
	return role.Status.Quota
}

// roleStatus is one entry of status.roles, counted in instances from the observed ModelRole, with
// the parallel layout its command line declares.
func roleStatus(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, r *RenderedRole, observed *v1alpha1.ModelRole) workerv1.RoleStatus {
	parallelism := engine.ReadParallelism(md.Spec.Engine.Name, role)
	s := workerv1.RoleStatus{Name: role.Name, Kind: role.Kind, Desired: role.Replicas, Unmanaged: r.Unmanaged,
		Parallelism: &parallelism, Endpoints: &workerv1.RoleEndpoints{Serving: servingEndpoints(md)}}
	if role.ElasticEP != nil {
		return elasticRoleStatus(s, role.Replicas, observed)
	}
	if observed != nil {
		s.Ready, s.UpToDate, s.QuotaReserved = observed.Status.Ready, observed.Status.UpToDate, observed.Status.QuotaReserved
		s.AssignedFlavors = observed.Status.AssignedFlavors
		// What is deployed decides: a role part-way through a command edit is unmanaged while any
		// standing replica runs a take-over command. With none standing, the spec says what will run.
		if m := observed.Status.Modes; m != nil && m.Managed+m.Unmanaged > 0 {
			s.Unmanaged = m.Unmanaged > 0
		}
		s.Endpoints.Eligible = observed.Status.Eligible
	}
	return s
}

// servingEndpoints is what the routers serve of a role: NotConfigured without a router, else
// Unknown, as mdplane reads no router's serving view
// (docs/decisions/0029-external-dp.md).
func servingEndpoints(md *workerv1.ModelDeployment) *workerv1.ServingEndpoints {
	if md.Spec.Router == nil {
		return &workerv1.ServingEndpoints{State: workerv1.ServingNotConfigured}
	}
	return &workerv1.ServingEndpoints{State: workerv1.ServingUnknown}
}

// elasticRoleStatus counts an Elastic EP role as the one serving instance it is: desired 1;
// ready and quota-reserved once every one of its width members is; up to date always, since it is
// outside the rollout. Width progress is the observation ConfigMap's.
func elasticRoleStatus(s workerv1.RoleStatus, width int32, observed *v1alpha1.ModelRole) workerv1.RoleStatus {
	s.Desired = 1
	if observed == nil {
		return s
	}
	whole := func(n *int32) *int32 {
		if n == nil {
			return nil
		}
		if *n >= width {
			return ptr.To(int32(1))
		}
		return ptr.To(int32(0))
	}
	s.Ready, s.QuotaReserved, s.UpToDate = whole(observed.Status.Ready), whole(observed.Status.QuotaReserved), ptr.To(int32(1))
	s.AssignedFlavors = observed.Status.AssignedFlavors
	return s
}

// roleSummary counts Ready instances per kind, in the order R (router Pods), S, P, D, E: 4S, 2P2D.
// deploymentPhase summarizes the deployment for a person: Ready when every role has every declared
// replica Ready and the router, if any, a ready replica; every role Ready but the router not is
// Degraded with the RouterReady message. A role short of Ready replicas is Starting until the
// deployment first was Ready and Degraded after (a lost replica, a scale-up or a rollout serving
// with fewer than declared); the message names each short role, with its notes (roleNotes).
// Deleting once deleted.
func deploymentPhase(md *workerv1.ModelDeployment, routerReady int64, statuses []workerv1.RoleStatus, notes map[string]string) (workerv1.Phase, string) {
	if md.DeletionTimestamp != nil {
		return workerv1.PhaseDeleting, "the deployment is being deleted"
	}
	var short []string
	for _, s := range statuses {
		if ready := ptr.Deref(s.Ready, 0); ready < s.Desired {
			why := fmt.Sprintf("role %s has %d of %d replicas Ready", s.Name, ready, s.Desired)
			if note := notes[s.Name]; note != "" {
				why += " (" + note + ")"
			}
			short = append(short, why)
		}
	}
	routerDown := md.Spec.Router != nil && routerReady == 0
	switch {
	case len(short) == 0 && !routerDown:
		return workerv1.PhaseReady, "every role has every declared replica Ready"
	case len(short) == 0:
		return workerv1.PhaseDegraded, workerv1.RouterNotReadyMessage(md.Spec.Router.Name)
	case md.Status.Phase == workerv1.PhaseReady || md.Status.Phase == workerv1.PhaseDegraded:
		return workerv1.PhaseDegraded, strings.Join(short, "; ")
	}
	return workerv1.PhaseStarting, strings.Join(short, "; ")
}

// borrowingTypes are Borrowing of the roles' InstanceTypes, each once, sorted, joined.
func borrowingTypes(roles []workerv1.ModelDeploymentRole, instanceTypes map[string]*workerv1.InstanceType) string {
	var out []string
	for _, role := range roles {
		if b := instanceTypes[role.InstanceType].Borrowing(); b != "" && !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// roleNotes say, by role name, what keeps an observed role's replicas from Ready that the count
// alone does not: a node that stopped reporting (status.lostNode), nodes an autoscaled pool is
// provisioning or refused (status.provisioning), and the lowest slot evicted at Kueue's
// waitForPodsReady timeout (status.readyTimeouts) and when it is filled again.
func roleNotes(roles map[string]*v1alpha1.ModelRole) map[string]string {
	out := map[string]string{}
	for name, role := range roles {
		if role == nil {
			continue
		}
		var notes []string
		if role.Status.LostNode != "" {
			notes = append(notes, role.Status.LostNode)
		}
		if role.Status.Provisioning != "" {
			notes = append(notes, role.Status.Provisioning)
		}
		if note := readyTimeoutNote(role.Status.ReadyTimeouts); note != "" {
			notes = append(notes, note)
		}
		if len(notes) > 0 {
			out[name] = strings.Join(notes, "; ")
		}
	}
	return out
}

// readyTimeoutNote is the lowest slot's record of evictions at the PodsReady timeout in words; ""
// for none.
func readyTimeoutNote(timeouts map[string]v1alpha1.ReadyTimeout) string {
	key := v1alpha1.LowestSlot(timeouts)
	if key == "" {
		return ""
	}
	t := timeouts[key]
	return fmt.Sprintf("%s: Kueue evicted its group at the waitForPodsReady timeout %d time(s) in a row (%s); its slot is filled again from %s: a timeout shorter than the engine's load time evicts it again",
		key, t.Count, t.Message, t.Until.UTC().Format(time.RFC3339))
}

// routerReady is the ready Pods of the router Deployment kv-cache composes.
func roleSummary(md *workerv1.ModelDeployment, routerReady int64, statuses []workerv1.RoleStatus) string {
	ready := map[workerv1.RoleKind]int64{}
	present := map[workerv1.RoleKind]bool{}
	for _, s := range statuses {
		present[s.Kind] = true
		ready[s.Kind] += int64(ptr.Deref(s.Ready, 0))
	}
	summary := ""
	if md.Spec.Router != nil {
		summary += fmt.Sprintf("%dR", routerReady)
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
