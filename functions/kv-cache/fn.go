package kvcache

import (
	"context"
	"fmt"
	"strings"

	"github.com/crossplane/function-sdk-go/logging"
	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/request"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/crossplane/function-sdk-go/response"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers"
	"github.com/mdplane/mdplane/functions/kv-cache/routers/llmd"
	"github.com/mdplane/mdplane/functions/kv-cache/routingproxy"
	"github.com/mdplane/mdplane/internal/xfn"
)

// FunctionName is the name Compositions call this function by.
const FunctionName = "mdplane-function-kv-cache"

// Function is the kv-cache composition function.
type Function struct {
	fnv1.UnimplementedFunctionRunnerServiceServer

	Log logging.Logger
}

// RunFunction amends the desired ModelRoles of a ModelDeployment.
func (f *Function) RunFunction(_ context.Context, req *fnv1.RunFunctionRequest) (*fnv1.RunFunctionResponse, error) {
	rsp := response.To(req, response.DefaultTTL)
	if err := f.run(req, rsp); err != nil {
		if f.Log != nil {
			f.Log.Info("render failed", "error", err.Error())
		}
		xfn.Fatal(rsp, err)
	}
	return rsp, nil
}

func (f *Function) run(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) error {
	xr, err := request.GetObservedCompositeResource(req)
	if err != nil {
		return fmt.Errorf("cannot read the observed composite: %w", err)
	}
	if gvk := xr.Resource.GroupVersionKind(); gvk != workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind) {
		return fmt.Errorf("kv-cache amends ModelDeployments, not %s", gvk)
	}
	md := &workerv1.ModelDeployment{}
	if err := xfn.Decode(xr.Resource.Object, md); err != nil {
		return fmt.Errorf("cannot read ModelDeployment %s: %w", xr.Resource.GetName(), err)
	}
	d := Deployment{Engine: md.Spec.Engine.Name, Router: md.Spec.Router, KVTransfer: md.Spec.KVTransfer, Roles: md.Spec.Roles}
	// The Settings are required in the first round, beside the Binding or the InstanceTypes, so the
	// requirement chain grows no longer than Crossplane iterates; nothing before the last check below
	// reads them.
	s, settingsPending, err := readSettings(req, rsp)
	if err != nil {
		return err
	}
	d.Settings = &s
	objs, prefix, pending, err := readCache(req, rsp, md)
	if err != nil || pending {
		return err
	}
	domain, err := ResolveDomain(md, objs.binding, objs.pool)
	if err != nil {
		return err
	}
	d.Binding, d.CachePrefix = domain.Binding, prefix // the prefix is rendered on a store client only
	if d.Manufacturers, pending, err = readManufacturers(req, rsp, md, objs.backend != nil); err != nil || pending || settingsPending {
		return err
	}
	if d.StoreProtocols, err = storeProtocols(d, objs); err != nil {
		return err
	}
	if err := engine.ValidateAscendLeg(d.Engine, d.Router, d.Roles, d.Manufacturers); err != nil {
		return err
	}

	status := &workerv1.ModelDeploymentStatus{KVCache: domain.KVCache}

	desired, err := request.GetDesiredComposedResources(req)
	if err != nil {
		return fmt.Errorf("cannot read desired composed resources: %w", err)
	}
	if err := amendRoles(desired, md, d, domain.Registered); err != nil {
		return err
	}
	rt, routerErr := composeRouter(req, md, d, desired)
	if routerErr != nil && rt.err == nil {
		return routerErr
	}
	routerRoles, err := publishKVEvents(md, d, desired)
	if err != nil {
		return err
	}
	if err := response.SetDesiredComposedResources(rsp, desired); err != nil {
		return err
	}
	xfn.StateReadiness(rsp)
	xfn.SetCondition(rsp, "DomainRegistered", domain.Registered.Status, domain.Registered.Reason, domain.Registered.Message)
	setConditions(rsp, md, d, unmanagedRoles(req, md))
	removed := setRouterStatus(rsp, md, rt, routerRoles, poolEndpoint(d, objs.pool), status)
	if err := xfn.SetDesiredStatus(req, rsp, xr, status, removed...); err != nil {
		return err
	}
	// RouterReady and the status say why; the render still fails, so nothing is applied half-done.
	return rt.err
}

// storeProtocols matches each cache-client role's transport among the backend's offers; nil without
// a Binding.
func storeProtocols(d Deployment, objs cacheObjects) (map[string]string, error) {
	if d.Binding == nil {
		return nil, nil
	}
	offers, err := BackendOffers(objs.pool, objs.backend)
	if err != nil {
		return nil, err
	}
	return MatchStoreTransports(d.Engine, d.Roles, d.Manufacturers, offers)
}

// readSettings requires the mdplane-settings EnvironmentConfig; a bad value fails the render.
func readSettings(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse) (settings.Settings, bool, error) {
	r := xfn.NewRequirements(req, rsp)
	s, err := r.Settings()
	return s, r.Pending, err
}

// readCache reads the Binding, its pool and backend, and the cache prefix of the deployment's
// weights. The artifact is required in the same round as the Binding: Crossplane settles
// requirements within a few calls.
func readCache(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, md *workerv1.ModelDeployment) (cacheObjects, string, bool, error) {
	prefix, prefixPending, err := readCachePrefix(req, rsp, md)
	if err != nil {
		return cacheObjects{}, "", false, err
	}
	objs, pending, err := readBinding(req, rsp, md)
	return objs, prefix, pending || prefixPending, err
}

// readCachePrefix requires the ModelArtifact of a deployment with a KV cache and derives the cache
// prefix of its weights; "" without either or before the artifact is resolved. pending is true
// while Crossplane has not fetched it yet.
func readCachePrefix(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, md *workerv1.ModelDeployment) (string, bool, error) {
	ref := md.Spec.Model.ArtifactRef
	if ref == nil || md.Spec.KVCache == nil {
		return "", false, nil
	}
	r := xfn.NewRequirements(req, rsp)
	obj, err := r.ByName("artifact", workerv1.SchemeGroupVersion.String(), workerv1.ModelArtifactKind, md.Namespace, ref.Name)
	if err != nil || r.Pending || obj == nil {
		return "", r.Pending, err
	}
	a := &workerv1.ModelArtifact{}
	if err := xfn.Decode(obj.Object, a); err != nil {
		return "", false, err
	}
	if a.Status.Resolved == nil {
		return "", false, nil
	}
	prefix, err := engine.CachePrefix(a.Status.Resolved.ManifestDigest, string(a.UID))
	if err != nil {
		return "", false, fmt.Errorf("ModelArtifact %s: %w", a.Name, err)
	}
	return prefix, false, nil
}

// poolEndpoint is the client endpoint of the KVCachePool the deployment's cache domain resolved to.
func poolEndpoint(d Deployment, pool *workerv1.KVCachePool) string {
	if d.Binding == nil || pool == nil {
		return ""
	}
	return pool.Status.ClientEndpoint
}

// cacheObjects are the cluster objects a bound deployment's cache clients are rendered from.
type cacheObjects struct {
	binding *workerv1.KVCachePoolBinding
	pool    *workerv1.KVCachePool
	backend *workerv1.KVCacheBackend
}

// readBinding requires the Binding the deployment names and, as each exists, its pool and the pool's
// backend; nil for one that does not exist. pending is true while Crossplane has not fetched them
// yet.
func readBinding(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, md *workerv1.ModelDeployment) (cacheObjects, bool, error) {
	var out cacheObjects
	if md.Spec.KVCache == nil {
		return out, false, nil
	}
	r := xfn.NewRequirements(req, rsp)
	api := workerv1.SchemeGroupVersion.String()
	obj, err := r.ByName("binding", api, workerv1.KVCachePoolBindingKind, md.Namespace, md.Spec.KVCache.PoolRef.Name)
	if err != nil || r.Pending || obj == nil {
		return out, r.Pending, err
	}
	out.binding = &workerv1.KVCachePoolBinding{}
	if err := xfn.Decode(obj.Object, out.binding); err != nil {
		return out, false, err
	}
	obj, err = r.ByName("pool", api, workerv1.KVCachePoolKind, "", out.binding.Spec.PoolRef.Name)
	if err != nil || r.Pending || obj == nil {
		return out, r.Pending, err
	}
	out.pool = &workerv1.KVCachePool{}
	if err := xfn.Decode(obj.Object, out.pool); err != nil {
		return out, false, err
	}
	if len(out.pool.Spec.Backends) == 0 {
		return out, false, nil
	}
	obj, err = r.ByName("backend", api, workerv1.KVCacheBackendKind, "", out.pool.Spec.Backends[0])
	if err != nil || r.Pending || obj == nil {
		return out, r.Pending, err
	}
	out.backend = &workerv1.KVCacheBackend{}
	if err := xfn.Decode(obj.Object, out.backend); err != nil {
		return out, false, err
	}
	return out, r.Pending, nil
}

// readManufacturers requires, for vLLM, the InstanceType of every role and maps it to its accelerator
// manufacturer ("" when unknown): only vLLM has a build of its own per manufacturer, vLLM-Ascend. It
// reads them only where the build changes the render: the store transport of a resolved backend
// (bound), and the direct leg, routing proxy and KV events a router brings. pending is true while
// Crossplane has not fetched them yet.
func readManufacturers(req *fnv1.RunFunctionRequest, rsp *fnv1.RunFunctionResponse, md *workerv1.ModelDeployment, bound bool) (map[string]string, bool, error) {
	out := map[string]string{}
	if md.Spec.Engine.Name != workerv1.EngineVLLM || (!bound && md.Spec.Router == nil) {
		return out, false, nil
	}
	r := xfn.NewRequirements(req, rsp)
	for _, role := range md.Spec.Roles {
		if _, seen := out[role.InstanceType]; seen {
			continue
		}
		obj, err := r.ByName("instancetype/"+role.InstanceType, workerv1.SchemeGroupVersion.String(), workerv1.InstanceTypeKind, "", role.InstanceType)
		if err != nil {
			return nil, false, err
		}
		out[role.InstanceType] = ""
		if obj == nil {
			continue
		}
		it := &workerv1.InstanceType{}
		if err := xfn.Decode(obj.Object, it); err != nil {
			return nil, false, err
		}
		if it.Status.Detail != nil {
			out[role.InstanceType] = it.Status.Detail.Manufacturer
		}
	}
	return out, r.Pending, nil
}

// amendRoles amends each role's desired ModelRole. While the Binding is unresolved the roles render
// without a cache client, and their running replicas keep the one they have (RolloutHeldByCache)
// rather than being replaced onto none.
func amendRoles(desired map[resource.Name]*resource.DesiredComposed, md *workerv1.ModelDeployment, d Deployment, registered Condition) error {
	for _, role := range md.Spec.Roles {
		key := resource.Name(naming.RoleResource(role.Name))
		dr, ok := desired[key]
		if !ok {
			return fmt.Errorf("role %q: no desired ModelRole %s; the kv-cache step runs after render-roles", role.Name, key)
		}
		if err := amend(dr, RenderRole(d, role), d, role); err != nil {
			return fmt.Errorf("role %q: %w", role.Name, err)
		}
		// A weights hold (render-roles) is the stronger one: it also stops empty slots from filling.
		if registered.Status == "False" && !strings.HasPrefix(dr.Resource.GetAnnotations()[workerv1.AnnotationRolloutHeld], rolloutHeldByWeights) {
			held := RolloutHeldByCache + ": " + registered.Reason + ": " + registered.Message
			if err := dr.Resource.SetValue("metadata.annotations["+workerv1.AnnotationRolloutHeld+"]", held); err != nil {
				return err
			}
		}
	}
	return nil
}

// amend applies an amendment to the template of a desired ModelRole and, on a proxied decoder, puts
// the engine behind the routing proxy.
func amend(dr *resource.DesiredComposed, a Amendment, d Deployment, role workerv1.ModelDeploymentRole) error {
	raw, err := dr.Resource.GetValue("spec.template")
	if err != nil {
		return fmt.Errorf("the desired ModelRole has no spec.template: %w", err)
	}
	t := &corev1.PodTemplateSpec{}
	if err := xfn.Decode(raw, t); err != nil {
		return err
	}
	Apply(t, a)
	if engine.BehindRoutingProxy(d.Router, role) {
		if err := routingproxy.Apply(t, d.Engine, d.Manufacturers[role.InstanceType], role, d.settings().RoutingSidecarImageRef()); err != nil {
			return err
		}
	}
	m, err := xfn.ToMap(t)
	if err != nil {
		return err
	}
	return dr.Resource.SetValue("spec.template", m)
}

// setConditions reports what was configured, not what the containers did with it.
func setConditions(rsp *fnv1.RunFunctionResponse, md *workerv1.ModelDeployment, d Deployment, takesOver map[string]bool) {
	unmanaged := false
	producersUnmanaged := false
	for _, r := range md.Spec.Roles {
		if takesOver[r.Name] {
			unmanaged = true
			producersUnmanaged = producersUnmanaged || r.Kind != workerv1.RoleKindDecode
		}
	}
	silent := ascendProducers(d)
	switch {
	case md.Spec.KVCache == nil:
		response.ConditionTrue(rsp, "CacheAttached", "NotApplicable").WithMessage("spec.kvCache is not set").TargetComposite()
	case unmanaged:
		response.ConditionUnknown(rsp, "CacheAttached", "Unmanaged").
			WithMessage("a role takes its command line over, so mdplane configured no cache client for it").TargetComposite()
	case d.Binding == nil:
		response.ConditionUnknown(rsp, "CacheAttached", "NoObservationAvailable").
			WithMessage(fmt.Sprintf("no cache client is configured: KVCachePoolBinding %s/%s has not resolved (see DomainRegistered)", md.Namespace, md.Spec.KVCache.PoolRef.Name)).TargetComposite()
	default:
		response.ConditionUnknown(rsp, "CacheAttached", "NoObservationAvailable").
			WithMessage("the cache client is configured; no replica has reported cache operations yet").TargetComposite()
	}
	switch {
	case d.Router == nil:
		response.ConditionFalse(rsp, "KVEventsPublishing", "NoRouter").WithMessage("no router consumes KV events").TargetComposite()
	case d.Engine == workerv1.EngineSGLang:
		// A routed SGLang deployment renders no publisher arguments and reports
		// KVEventsPublishing=False/PublisherDisabled, behind whichever router.
		response.ConditionFalse(rsp, "KVEventsPublishing", "PublisherDisabled").
			WithMessage("SGLang's rendering carries no KV event publisher").TargetComposite()
	case d.Router.Name != workerv1.RouterLLMD:
		response.ConditionTrue(rsp, "KVEventsPublishing", "NotApplicable").WithMessage("only llm-d-router consumes KV events").TargetComposite()
	case len(silent) > 0:
		response.ConditionFalse(rsp, "KVEventsPublishing", "PublisherDisabled").
			WithMessage(fmt.Sprintf("the block-producing roles %q run vLLM-Ascend (their InstanceType reports manufacturer ascend), whose rendering carries no KV event publisher; llm-d-router scores prefixes approximately",
				silent)).TargetComposite()
	case producersUnmanaged:
		response.ConditionUnknown(rsp, "KVEventsPublishing", "RoleUnmanaged").
			WithMessage("a block-producing role takes its command line over").TargetComposite()
	default:
		response.ConditionTrue(rsp, "KVEventsPublishing", "Publishing").
			WithMessage(fmt.Sprintf("every block-producing role is configured to publish on tcp://*:%d, topic %s", engine.KVEventsPort, engine.KVEventsTopic)).TargetComposite()
	}
}

// unmanagedRoles says which roles run a take-over command as deployed: status.roles[].unmanaged as
// render-roles, earlier in the pipeline, read it off the standing replicas; a role it has not
// reported on is judged by its spec.
func unmanagedRoles(req *fnv1.RunFunctionRequest, md *workerv1.ModelDeployment) map[string]bool {
	out := map[string]bool{}
	for _, r := range md.Spec.Roles {
		out[r.Name] = r.TakesOver()
	}
	desired, err := request.GetDesiredCompositeResource(req)
	if err != nil || desired.Resource == nil {
		return out
	}
	var status workerv1.ModelDeploymentStatus
	if raw, ok := desired.Resource.Object["status"]; !ok || xfn.Decode(raw, &status) != nil {
		return out
	}
	for _, rs := range status.Roles {
		if _, declared := out[rs.Name]; declared {
			out[rs.Name] = rs.Unmanaged
		}
	}
	return out
}

// ascendProducers are the managed, block-producing roles (not decoders or encoders) on vLLM-Ascend,
// which renders no KV event publisher.
func ascendProducers(d Deployment) []string {
	var out []string
	for _, r := range d.Roles {
		producer := r.Kind != workerv1.RoleKindDecode && r.Kind != workerv1.RoleKindEncode && !r.TakesOver()
		if producer && engine.ClientEngineOf(d.Engine, d.Manufacturers[r.InstanceType]) == engine.ClientVLLMAscend {
			out = append(out, r.Name)
		}
	}
	return out
}

// routerState is what the deployment reports of its router.
type routerState int

const (
	routerAbsent routerState = iota
	routerNotRendered
	routerNotDeployed
	routerNotReady
	routerReady
)

// router is how far the deployment's router is: its state and, once observed, its ready replicas.
type router struct {
	state routerState
	ready int64
	err   error // why the router's objects did not render
}

// composeRouter adds the router's objects to the desired resources and reports how far the router
// is, by the ready replicas of its observed Deployment.
func composeRouter(req *fnv1.RunFunctionRequest, md *workerv1.ModelDeployment, d Deployment, desired map[resource.Name]*resource.DesiredComposed) (router, error) {
	if md.Spec.Router == nil {
		return router{state: routerAbsent}, nil
	}
	if !routers.Renders(md.Spec.Router.Name) && md.Spec.Router.Name != workerv1.RouterLLMD {
		return router{state: routerNotRendered}, nil
	}
	observed, err := request.GetObservedComposedResources(req)
	if err != nil {
		return router{}, err
	}
	r, err := renderRouter(md, d, routerEligibility(md, desired, observed))
	if err != nil {
		return router{state: routerNotRendered, err: err}, err
	}
	state := router{state: routerNotDeployed}
	for key, obj := range r.Objects {
		seen := observed[resource.Name(key)].Resource
		ready := seen != nil
		if key == naming.RouterDeploymentResource && seen != nil {
			state.ready, _ = xfn.NestedCount(seen.Object, "status", "readyReplicas")
			ready = state.ready > 0
			state.state = routerNotReady
			if ready {
				state.state = routerReady
			}
		}
		if desired[resource.Name(key)], err = xfn.Composed(obj, ready); err != nil {
			return router{}, err
		}
	}
	return state, nil
}

// routerEligibility decides the eligibility term of the router's selectors from the roles whose
// Services render-roles composed select on it and the terms the observed router already carries.
func routerEligibility(md *workerv1.ModelDeployment, desired map[resource.Name]*resource.DesiredComposed, observed map[resource.Name]resource.ObservedComposed) routers.Eligibility {
	e := routers.Eligibility{Roles: map[string]bool{}}
	for _, role := range md.Spec.Roles {
		if svc, ok := desired[resource.Name(naming.RoleServiceResource(role.Name))]; ok && svc.Resource != nil {
			selector, _, _ := unstructured.NestedStringMap(svc.Resource.Object, "spec", "selector")
			e.Roles[role.Name] = selector[workerv1.LabelEndpointEligible] == "true"
		}
	}
	var deployment, configMap *unstructured.Unstructured
	if seen := observed[naming.RouterDeploymentResource].Resource; seen != nil {
		deployment = &seen.Unstructured
	}
	if seen := observed[routers.ConfigMapResource].Resource; seen != nil {
		configMap = &seen.Unstructured
	}
	e.Kept = routers.KeptTerms(deployment, configMap)
	return e
}

// renderRouter renders the named router's objects on the one port every role serves on, with the
// eligibility term where eligibility puts it.
func renderRouter(md *workerv1.ModelDeployment, d Deployment, eligibility routers.Eligibility) (*routers.Router, error) {
	port, err := routers.ServingPort(md.Spec.Engine.Name, md.Spec.Router, md.Spec.Roles)
	if err != nil {
		return nil, err
	}
	s := d.settings()
	images := routers.Images{Router: s.RouterImageRef(), Proxy: s.RouterProxyImageRef()}
	if md.Spec.Router.Name == workerv1.RouterLLMD {
		shared := engine.RendersAscendLeg(md.Spec.Engine.Name, md.Spec.Router, md.Spec.Roles, d.Manufacturers)
		return routers.RenderLLMD(md, port, len(ascendProducers(d)) > 0, shared, eligibility, images)
	}
	return routers.Render(md.Namespace, md.Name, md.Spec.Engine.Name, md.Spec.Router, d.Roles, port, eligibility, images)
}

// setRouterStatus reports RouterReady and status.router and, once the router serves, makes it the
// deployment's endpoint: behind a router the deployment's address is the router's, and there is none
// until a router replica is ready. It returns the status fields to remove.
func setRouterStatus(rsp *fnv1.RunFunctionResponse, md *workerv1.ModelDeployment, rt router, roles []workerv1.RouterRoleStatus, poolEndpoint string, status *workerv1.ModelDeploymentStatus) (removed []string) {
	if rt.state == routerAbsent {
		response.ConditionTrue(rsp, "RouterReady", "NotApplicable").WithMessage("spec.router is not set").TargetComposite()
		return nil
	}
	name := md.Spec.Router.Name
	status.Router = &workerv1.RouterStatus{Name: name, Roles: roles, PoolEndpoint: poolEndpoint}
	if name == workerv1.RouterLLMD {
		status.Router.Metrics = routerMetrics(md)
	}
	switch rt.state {
	case routerNotRendered:
		if rt.err != nil {
			response.ConditionFalse(rsp, "RouterReady", "RenderFailed").WithMessage(rt.err.Error()).TargetComposite()
			return []string{"endpoint"}
		}
		response.ConditionUnknown(rsp, "RouterReady", "NotDeployed").
			WithMessage(fmt.Sprintf("this release of mdplane does not render %s's objects", name)).TargetComposite()
		return nil
	case routerNotDeployed:
		response.ConditionUnknown(rsp, "RouterReady", "NotDeployed").WithMessage("the router Deployment does not exist yet").TargetComposite()
	case routerNotReady:
		response.ConditionFalse(rsp, "RouterReady", "NoReadyReplicas").WithMessage(workerv1.RouterNotReadyMessage(name)).TargetComposite()
	case routerReady:
		response.ConditionTrue(rsp, "RouterReady", "Ready").WithMessage(fmt.Sprintf("router %q has %d ready replicas", name, rt.ready)).TargetComposite()
	}
	status.Router.Endpoint = routers.Endpoint(md.Namespace, md.Name)
	if rt.state != routerReady {
		return []string{"endpoint"}
	}
	status.Endpoint = routers.Endpoint(md.Namespace, md.Name)
	return nil
}

// routerMetrics are the engine metrics llm-d-router scores on, scraped on the serving port; none
// when the roles do not share one (RouterReady then says why).
func routerMetrics(md *workerv1.ModelDeployment) *workerv1.RouterMetricsStatus {
	m, err := llmd.EngineMetrics(md.Spec.Engine.Name)
	if err != nil {
		return nil
	}
	port, err := routers.ServingPort(md.Spec.Engine.Name, md.Spec.Router, md.Spec.Roles)
	if err != nil {
		return nil
	}
	return &workerv1.RouterMetricsStatus{Port: port, QueuedRequests: m.QueuedRequests, RunningRequests: m.RunningRequests, KVCacheUtilization: m.KVCacheUtilization}
}

// publishKVEvents declares the event ports on the Service of every role that publishes, so its
// hostname is the dialable form, and returns what the router fronts for status.router.roles.
func publishKVEvents(md *workerv1.ModelDeployment, d Deployment, desired map[resource.Name]*resource.DesiredComposed) ([]workerv1.RouterRoleStatus, error) {
	if md.Spec.Router == nil {
		return nil, nil
	}
	var roles []workerv1.RouterRoleStatus
	for _, role := range md.Spec.Roles {
		svc, ok := desired[resource.Name(naming.RoleServiceResource(role.Name))]
		if !ok {
			return nil, fmt.Errorf("role %q: no desired Service; the kv-cache step runs after render-roles", role.Name)
		}
		ports, _, _ := unstructured.NestedSlice(svc.Resource.Object, "spec", "ports")
		host := fmt.Sprintf("%s.%s.svc", svc.Resource.GetName(), md.Namespace)
		entry := workerv1.RouterRoleStatus{
			Name:     role.Name,
			Kind:     role.Kind.RouterSpelling(),
			Selector: servingSelector(md.Name, role.Name, svc.Resource.Object),
		}
		if len(ports) > 0 {
			if p, ok := ports[0].(map[string]any)["port"]; ok {
				entry.Endpoint = fmt.Sprintf("http://%s:%v", host, p)
			}
		}
		if engine.PublishesKVEvents(d.Engine, d.Manufacturers[role.InstanceType], d.Router, role) {
			for _, p := range []struct {
				name string
				port int64
			}{{"kv-events", engine.KVEventsPort}, {"kv-replay", engine.KVReplayPort}} {
				ports = append(ports, map[string]any{"name": p.name, "port": p.port, "targetPort": p.port, "protocol": "TCP"})
			}
			if err := unstructured.SetNestedSlice(svc.Resource.Object, ports, "spec", "ports"); err != nil {
				return nil, err
			}
			entry.KVEvents = &workerv1.KVEventsStatus{
				Endpoint:       fmt.Sprintf("tcp://%s:%d", host, engine.KVEventsPort),
				ReplayEndpoint: fmt.Sprintf("tcp://%s:%d", host, engine.KVReplayPort),
				Topic:          engine.KVEventsTopic,
			}
		}
		roles = append(roles, entry)
	}
	return roles, nil
}

// servingSelector is the published selector of a role's serving Pods: the terms its Service
// render-roles composed selects on (every rank of an External-DP Server role, the eligibility term
// once active), spelled in naming's fixed order.
func servingSelector(deployment, role string, service map[string]any) string {
	selector, _, _ := unstructured.NestedStringMap(service, "spec", "selector")
	return naming.ServingSelector(deployment, role, selector[workerv1.LabelServes] == "true", selector[workerv1.LabelEndpointEligible] == "true")
}
