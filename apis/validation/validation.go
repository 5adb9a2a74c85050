// Package validation judges ModelDeployments by the spec's admission refusal table: pure, objects in,
// a field error list out. Each refusal names the field, the value, the bound and the way out. The
// admission webhook and `mdplane validate` both run it; the schema keeps the rules it can say itself.
package validation

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	posixpath "path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Cluster holds the objects the rules that read other objects consult. A nil map means the caller
// did not fetch that kind, and its rules are skipped.
type Cluster struct {
	InstanceTypes map[string]*workerv1.InstanceType
	// KVCache is spec.kvCache's Binding, pool and backend; nil when not read (an offline check),
	// and then a cache client is judged to speak spec.kvTransfer.protocol, as before the backend
	// was readable.
	KVCache *KVCacheChain
	// Settings are the worker Settings (the mdplane-settings EnvironmentConfig); nil is the
	// defaults. They decide whether --kv-cache-dtype is owned and whether privileged roles and
	// hostPath volumes are admitted.
	Settings *settings.Settings
	// PriorityClasses holds, for a deployment labelled with a Kueue priority class, whether that
	// WorkloadPriorityClass exists; nil when not read (offline), and then any name is admitted.
	PriorityClasses map[string]bool
}

// settings are c's Settings, the defaults when none were read.
func (c Cluster) settings() settings.Settings {
	return settings.OrDefaults(c.Settings)
}

// ValidateCreate judges a new deployment.
func ValidateCreate(md *workerv1.ModelDeployment, c Cluster) field.ErrorList {
	return validate(md, nil, c)
}

// ValidateUpdate judges an edit of a stored deployment. Rules added after an object was stored do not
// strand it: a role the object already had keeps its name, and a stored --port is judged only when an
// edit changes it. The update that releases a deleted deployment's finalizers is always admitted.
func ValidateUpdate(md, old *workerv1.ModelDeployment, c Cluster) field.ErrorList {
	if releasesFinalizersOnly(md, old) {
		return nil
	}
	return validate(md, old, c)
}

// releasesFinalizersOnly reports an update of a deployment being deleted that changes nothing but its
// finalizers: the step that completes its teardown. No rule may refuse it, whatever the stored spec
// holds (a stored --kv-cache-dtype included), or the object could never be released.
func releasesFinalizersOnly(md, old *workerv1.ModelDeployment) bool {
	if md.DeletionTimestamp == nil || old == nil {
		return false
	}
	withoutFinalizers := func(o *workerv1.ModelDeployment) *workerv1.ModelDeployment {
		c := o.DeepCopy()
		// The API server's own bookkeeping moves on every write; it is no edit of the user's.
		c.Finalizers, c.ResourceVersion, c.ManagedFields, c.Generation = nil, "", nil, 0
		c.Status = workerv1.ModelDeploymentStatus{}
		return c
	}
	return equality.Semantic.DeepEqual(withoutFinalizers(md), withoutFinalizers(old))
}

func validate(md, old *workerv1.ModelDeployment, c Cluster) field.ErrorList {
	var errs field.ErrorList
	roles := field.NewPath("spec", "roles")
	md = withDefaults(md)
	oldRoles := map[string]workerv1.ModelDeploymentRole{}
	if old != nil {
		old = withDefaults(old)
		for _, r := range old.Spec.Roles {
			oldRoles[r.Name] = r
		}
	}
	errs = append(errs, validateKinds(md, roles)...)
	errs = append(errs, validateModelName(md, old)...)
	errs = append(errs, validateRouter(md)...)
	errs = append(errs, validateServiceNames(md, roles, oldRoles)...)
	errs = append(errs, validateRoutedPorts(md, roles)...)
	errs = append(errs, validateBindingName(md, old)...)
	errs = append(errs, validateCadence(md, old)...)
	errs = append(errs, validatePriorityClass(md, old, c)...)
	for i, role := range md.Spec.Roles {
		path := roles.Index(i)
		stored, had := oldRoles[role.Name]
		errs = append(errs, validateMemberNames(md, role, path)...)
		if !had || stored.TakesOver() != role.TakesOver() {
			errs = append(errs, validateRenderingTerm(md.Spec.Engine.Name, role, path)...)
		}
		errs = append(errs, validateOwnedKeys(md, role, path, c.settings().KVCacheDtypeOwned)...)
		errs = append(errs, validateHostAccess(role, stored, had, path, c.settings())...)
		errs = append(errs, validateArtifactKeys(md, role, path)...)
		errs = append(errs, validateDegrees(md.Spec.Engine.Name, role, path)...)
		if !had || portsOrArgsChanged(role, stored) || routerChanged(md, old) {
			errs = append(errs, validatePortArg(md, role, path)...)
		}
		errs = append(errs, validateReservedPorts(md, role, path, storedCollision(old, stored, had))...)
		errs = append(errs, validateResources(role, path)...)
		errs = append(errs, validateVolumes(role, path)...)
		if !had || !sameFabricPath(md, old, role, stored) {
			errs = append(errs, validateInterface(md, role, path, c)...)
		}
		if !had || !sameWidthInputs(role, stored) {
			errs = append(errs, validateWidth(md, role, path, c)...)
		}
		errs = append(errs, validateTopology(role, path)...)
		errs = append(errs, validateElastic(md, role, stored, had, path, c)...)
		if role.ShmSize != nil && role.ShmSize.Sign() <= 0 {
			errs = append(errs, field.Invalid(path.Child("shmSize"), role.ShmSize.String(),
				"shmSize must be a positive quantity, such as 32Gi; omit it for the 16Gi default"))
		}
	}
	// A rule that reads an InstanceType declines while the deployment is being deleted: an absent
	// type must not block the update that clears the deployment's finalizer.
	if md.DeletionTimestamp == nil && c.InstanceTypes != nil {
		errs = append(errs, validateInstanceTypes(md, roles, c)...)
		errs = append(errs, validateAscendLeg(md, old, roles, c)...)
	}
	// Only once every other rule passed, as upstream orders it: a refusal names one thing to fix.
	if len(errs) == 0 {
		errs = append(errs, validateBindingTransport(md, old, c)...)
	}
	return errs
}

// withDefaults is a shallow copy of md whose roles have the schema's defaults applied: every rule
// judges a role as the API server would have stored it.
func withDefaults(md *workerv1.ModelDeployment) *workerv1.ModelDeployment {
	out := *md
	out.Spec.Roles = make([]workerv1.ModelDeploymentRole, len(md.Spec.Roles))
	for i, r := range md.Spec.Roles {
		out.Spec.Roles[i] = r.WithDefaults()
	}
	return &out
}

// validateModelName: the model name reaches documents mdplane writes as YAML (llm-d-router's
// EndpointPickerConfig names it), which cannot carry a control character, so a name with one would
// fail the render; no hub spells a model so. A stored name is judged again only when an edit
// changes it.
func validateModelName(md, old *workerv1.ModelDeployment) field.ErrorList {
	name := md.Spec.Model.Name
	if old != nil && old.Spec.Model.Name == name {
		return nil
	}
	for i, r := range name {
		if !unicode.IsPrint(r) {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "model", "name"), name, fmt.Sprintf(
				"the model name holds %U at byte %d, which is not a printable character; name the model as its hub spells it", r, i))}
		}
	}
	return nil
}

// validateKinds: a server serves whole requests by itself, and only servers may come in several.
func validateKinds(md *workerv1.ModelDeployment, roles *field.Path) field.ErrorList {
	var errs field.ErrorList
	first := map[workerv1.RoleKind]string{}
	var server, other string
	for i, role := range md.Spec.Roles {
		if role.Kind == workerv1.RoleKindServer {
			if server == "" {
				server = role.Name
			}
		} else if other == "" {
			other = role.Name
		}
		if role.Kind != workerv1.RoleKindServer {
			if prev, dup := first[role.Kind]; dup {
				errs = append(errs, field.Invalid(roles.Index(i).Child("kind"), string(role.Kind), fmt.Sprintf(
					"roles %q and %q are both %s: only Server roles may share a kind, since nothing consuming these roles expresses a second %s; merge them into one role with more replicas",
					prev, role.Name, role.Kind, strings.ToLower(string(role.Kind)))))
			} else {
				first[role.Kind] = role.Name
			}
		}
	}
	if server != "" && other != "" {
		errs = append(errs, field.Invalid(roles, server, fmt.Sprintf(
			"role %q is a Server beside role %q of another kind: a server serves whole requests by itself, so the combination describes no arrangement; use Server roles alone, or Prefill and Decode roles",
			server, other)))
	}
	return errs
}

// validateRenderingTerm: a managed role's kind is one its engine has a rendering term for
// (engine.RendersKind). A take-over role renders nothing of its kind but the label, so its argv may
// declare what mdplane has no term for. Judged when a role is new or moves between managed and
// take-over, so a stored role is not stranded.
func validateRenderingTerm(e workerv1.Engine, role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	if role.TakesOver() || engine.RendersKind(e, role.Kind) {
		return nil
	}
	return field.ErrorList{field.Invalid(path.Child("kind"), string(role.Kind), fmt.Sprintf(
		"engine %s has no rendering term for kind %s: mdplane renders %s for it; write the role's whole command line in %s, or use another kind",
		e, role.Kind, strings.Join(engine.RenderedKinds(e), ", "), path.Child("command")))}
}

// serviceClaim is one Service name a role (or, with no role, the router) derives.
type serviceClaim struct {
	role, what string
}

// validateServiceNames: <md>-<role> must be a DNS-1035 label, and no two roles may derive the same
// Service name (a role "x-r0" beside a multi-member role "x", whose instance 0 is <md>-x-r0).
func validateServiceNames(md *workerv1.ModelDeployment, roles *field.Path, had map[string]workerv1.ModelDeploymentRole) field.ErrorList {
	var errs field.ErrorList
	claims := map[string][]serviceClaim{}
	for i, role := range md.Spec.Roles {
		name := naming.RoleServiceName(md.Name, role.Name)
		if _, stored := had[role.Name]; !stored {
			if reasons := k8svalidation.IsDNS1035Label(name); len(reasons) > 0 {
				errs = append(errs, field.Invalid(roles.Index(i).Child("name"), role.Name, fmt.Sprintf(
					"the role's Service would be named %q (%d characters), which is not a DNS-1035 label: %s; shorten the role name or the deployment name",
					name, len(name), strings.Join(reasons, "; "))))
			}
		}
		claims[name] = append(claims[name], serviceClaim{role.Name, "its Service"})
		if role.Size > 1 {
			for n := range role.Replicas {
				instance := naming.InstanceName(md.Name, role.Name, n)
				claims[instance] = append(claims[instance], serviceClaim{role.Name, fmt.Sprintf("the Service of its instance %d", n)})
			}
		}
	}
	if md.Spec.Router != nil {
		// Every object of the router, its Service included, is named <md>-router.
		router := naming.RouterName(md.Name)
		claims[router] = append(claims[router], serviceClaim{"", "spec.router"})
	}
	names := make([]string, 0, len(claims))
	for n := range claims {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := claims[n]
		switch {
		case len(c) < 2:
		case c[1].role == "": // the router's claim comes last
			errs = append(errs, field.Invalid(roles, n, fmt.Sprintf(
				"role %q (%s) and spec.router (its Service and every router object) would both own the name %q; rename the role",
				c[0].role, c[0].what, n)))
		default:
			errs = append(errs, field.Invalid(roles, n, fmt.Sprintf(
				"roles %q (%s) and %q (%s) would both own the Service %q; rename one of the roles",
				c[0].role, c[0].what, c[1].role, c[1].what, n)))
		}
	}
	return errs
}

// validateMemberNames: above size 1 every member is named <md>-<role>-r<N>-m<M> and must be a
// hostname; the longest name the declared replicas and size produce is the one that matters.
func validateMemberNames(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	if role.Size <= 1 {
		return nil
	}
	longest := naming.MemberName(md.Name, role.Name, role.Replicas-1, role.Size-1)
	reasons := k8svalidation.IsDNS1123Label(longest)
	if len(reasons) == 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(path.Child("name"), role.Name, fmt.Sprintf(
		"the role's members could not be named: the longest name its %d replicas of %d members produce is %q (%d characters), which is not a hostname: %s; shorten the role name, shorten the deployment name, or declare fewer replicas",
		role.Replicas, role.Size, longest, len(longest), strings.Join(reasons, "; ")))}
}

// validateOwnedKeys: a key mdplane renders may not be supplied a second time, in any spelling the
// engine reads as it. A take-over command owns its whole argv, so extraArgs beside it is inert.
// With the Setting model-deployment-kv-cache-dtype-owned off (dtypeOwned false), --kv-cache-dtype is
// the user's: nothing renders it, so nothing refuses it.
func validateOwnedKeys(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path, dtypeOwned bool) field.ErrorList {
	var errs field.ErrorList
	e := md.Spec.Engine.Name
	kvCache := md.Spec.KVCache != nil && dtypeOwned
	if !role.TakesOver() {
		for j, arg := range role.ExtraArgs {
			flag, owned := engine.OwnedArg(e, kvCache, arg)
			if !owned {
				continue
			}
			msg := fmt.Sprintf("%s is owned by mdplane on %s, which renders it; to set it yourself, take the whole command line over with %s",
				flag, e, path.Child("command"))
			if flag == engine.KVCacheDtypeFlag {
				msg = fmt.Sprintf("%s carries the KVCachePoolBinding's dtype while spec.kvCache is set; declare a Binding with the dtype you need, or take the whole command line over with %s",
					flag, path.Child("command"))
			}
			errs = append(errs, field.Invalid(path.Child("extraArgs").Index(j), arg, msg))
		}
	}
	for j, env := range role.Env {
		if engine.OwnedEnvName(e, env.Name) {
			errs = append(errs, field.Invalid(path.Child("env").Index(j).Child("name"), env.Name, fmt.Sprintf(
				"%s is owned by mdplane on %s, which renders it; to set it yourself, take the whole command line over with %s",
				env.Name, e, path.Child("command"))))
		}
	}
	return errs
}

// validateArtifactKeys: on a managed role --served-model-name must be spec.model.name, the name the
// router and the clients address (with an artifact the model argument is a path or a repository).
// While an artifact delivers the weights, a managed role may not name or fetch them itself (the hub
// flags, in any spelling) nor set the delivery's variables, and no role may mount a volume at,
// inside or around the weights' or the download cache's path.
func validateArtifactKeys(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	e := md.Spec.Engine.Name
	if !role.TakesOver() {
		if v, set := engine.FlagValue(e, role.ExtraArgs, "--served-model-name"); set && v != md.Spec.Model.Name {
			errs = append(errs, field.Invalid(path.Child("extraArgs"), v, fmt.Sprintf(
				"--served-model-name must be spec.model.name (%q), the name clients and the router address; drop it and mdplane renders it", md.Spec.Model.Name)))
		}
	}
	if md.Spec.Model.ArtifactRef == nil {
		return errs
	}
	if !role.TakesOver() {
		errs = append(errs, validateServedAliases(md, role, path)...)
		for j, arg := range role.ExtraArgs {
			if flag, hub := engine.HubArg(e, arg); hub {
				errs = append(errs, field.Invalid(path.Child("extraArgs").Index(j), arg, fmt.Sprintf(
					"%s names or fetches the weights, which spec.model.artifactRef delivers: mdplane renders the model argument and its revision; remove it", flag)))
			}
		}
		for j, env := range role.Env {
			if engine.ArtifactOwnsEnv(e, env.Name) {
				errs = append(errs, field.Invalid(path.Child("env").Index(j).Child("name"), env.Name, fmt.Sprintf(
					"%s is owned by the delivery of spec.model.artifactRef; remove it (the artifact's secretRef carries the hub token, the Settings the endpoint)", env.Name)))
			}
		}
	}
	for j, v := range role.AdditionalVolumes {
		if !namesVolumeSource(v) {
			continue
		}
		for _, p := range engine.ArtifactPaths {
			if overlaps(v.MountPath, p) {
				errs = append(errs, field.Invalid(path.Child("additionalVolumes").Index(j).Child("mountPath"), v.MountPath, fmt.Sprintf(
					"%s is where spec.model.artifactRef's delivery mounts; mount this volume elsewhere", p)))
				break
			}
		}
	}
	return errs
}

// overlaps reports whether one path is the other, inside it or around it.
func overlaps(a, b string) bool {
	a, b = posixpath.Clean("/"+a), posixpath.Clean("/"+b)
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/")
}

// validateDegrees: a parallel degree the role declares is read, so one that cannot be read is refused
// rather than silently taken as 1.
func validateDegrees(e workerv1.Engine, role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	argsField, args := path.Child(role.EngineArgsField()), role.EngineArgs()
	bounds := map[string]int{}
	for _, flag := range engine.DegreeFlags(e) {
		bounds[flag] = 1
	}
	maps.Copy(bounds, engine.WidthFlagBounds(e))
	for _, flag := range append(engine.DegreeFlags(e), slices.Sorted(maps.Keys(engine.WidthFlagBounds(e)))...) {
		v, set := engine.FlagValue(e, args, flag)
		if !set {
			continue
		}
		if why := unreadableDegree(v, bounds[flag]); why != "" {
			errs = append(errs, field.Invalid(argsField, v, fmt.Sprintf("role %q passes %s %q, %s; %s", role.Name, flag, v, why, degreeWayOut(role, path))))
		}
	}
	// A malformed VLLM_DP_SIZE leaves the degree unreadable, unless the command line drives data
	// parallelism: the engine then ignores it and the degree is the flag's. (An edit dropping the
	// flag makes it the degree, and is refused then.)
	if e == workerv1.EngineVLLM && !engine.ShadowsDPSizeEnv(e, role) {
		for j, env := range role.Env {
			if env.Name != "VLLM_DP_SIZE" {
				continue
			}
			if why := unreadableDegree(env.Value, 1); why != "" {
				errs = append(errs, field.Invalid(path.Child("env").Index(j).Child("value"), env.Value, fmt.Sprintf(
					"role %q sets VLLM_DP_SIZE to %q, %s; %s", role.Name, env.Value, why, degreeWayOut(role, path))))
			}
		}
	}
	// A managed role refuses the multi-port external balance: its ranks
	// serve on several ports of one member, which the role's Services and routers cannot reach.
	if !role.TakesOver() && engine.ReadParallelism(e, role).LoadBalance == workerv1.LoadBalanceMultiPort {
		errs = append(errs, field.Invalid(argsField, "--data-parallel-multi-port-external-lb", fmt.Sprintf(
			"role %q balances its data-parallel ranks over several ports of one member, which mdplane's Services and routers cannot reach; give each member one rank with --data-parallel-rank $(GPUSTACK_MEMBER_INDEX), or take the whole command line over with %s",
			role.Name, path.Child("command"))))
	}
	return errs
}

// degreeWayOut is the way out of an unreadable degree: fix the value, or, for a role mdplane
// renders the command line of, take it over (a take-over role's degrees are read from its command
// too, so it has only the first).
func degreeWayOut(role workerv1.ModelDeploymentRole, path *field.Path) string {
	if role.TakesOver() {
		return "mdplane reads the parallel degrees, so fix the value"
	}
	return fmt.Sprintf("mdplane reads the parallel degrees, so fix the value or take the whole command line over with %s", path.Child("command"))
}

// unreadableDegree says why a degree's value is not one mdplane reads, "" when it is: a whole number
// from the flag's lower bound to 2147483647, the 32 bits status.roles[].parallelism reports a degree
// in (engine.ReadParallelism reads a larger one as unreadable).
func unreadableDegree(v string, least int) string {
	n, err := strconv.ParseInt(v, 10, 32)
	if errors.Is(err, strconv.ErrRange) && n > 0 {
		return fmt.Sprintf("which is over %d, the largest degree mdplane reads", math.MaxInt32)
	}
	if err != nil || n < int64(least) {
		return fmt.Sprintf("which is not a whole number of at least %d", least)
	}
	return ""
}

// routerChanged: adding, removing or renaming the router moves which roles sit behind the routing
// proxy, so their --port is judged again.
func routerChanged(md, old *workerv1.ModelDeployment) bool {
	if old == nil {
		return false
	}
	name := func(d *workerv1.ModelDeployment) workerv1.RouterName {
		if d.Spec.Router == nil {
			return ""
		}
		return d.Spec.Router.Name
	}
	return name(md) != name(old)
}

func portsOrArgsChanged(role, stored workerv1.ModelDeploymentRole) bool {
	return !slices.Equal(role.Ports, stored.Ports) || !slices.Equal(role.ExtraArgs, stored.ExtraArgs) ||
		!slices.Equal(role.Command, stored.Command)
}

// validatePortArg: a --port the engine reads, in any spelling it accepts, must agree with the first
// declared port; a managed decoder behind llm-d-router's routing proxy is exempt (the proxy owns the
// serving port and the engine keeps its own --port behind it), but its --port may not be one the
// proxy or a declared port takes.
func validatePortArg(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	argsField := path.Child(role.EngineArgsField())
	e := md.Spec.Engine.Name
	portArg, hasPort := engine.PortArg(e, role)
	proxied := engine.BehindRoutingProxy(md.Spec.Router, role)
	if hasPort && len(role.Ports) > 0 && !proxied && portArg != strconv.Itoa(int(role.Ports[0].Port)) {
		return field.ErrorList{field.Invalid(argsField, "--port "+portArg, fmt.Sprintf(
			"--port %s in %s names another port than %s, the first declared port, %d; make them agree",
			portArg, argsField, path.Child("ports").Index(0).Child("port"), role.Ports[0].Port))}
	}
	if own, ok := engine.OwnPort(e, role); ok && proxied {
		service, _ := engine.ServingPorts(e, md.Spec.Router, role)
		taken := []int32{service} // the proxy's, when the role declares none
		if len(role.Ports) > 0 {
			taken = taken[:0]
			for _, p := range role.Ports {
				taken = append(taken, p.Port)
			}
		}
		if slices.Contains(taken, own) {
			errs = append(errs, field.Invalid(argsField, "--port "+portArg, fmt.Sprintf(
				"decoder %q's engine --port %s would share a port llm-d-router's routing proxy (on %d) or a declared port takes (%v); pass another --port, or none and mdplane puts the engine on %d",
				role.Name, portArg, service, taken, engine.PortBehindProxy(taken))))
		}
	}
	return errs
}

// reservedPortArg is the --port a role passes when it lands on a port mdplane reserves on the role:
// the engine reads it only when the role declares no ports, and a replaced command reserves nothing.
func reservedPortArg(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole) (string, bool) {
	portArg, hasPort := engine.PortArg(md.Spec.Engine.Name, role)
	if !hasPort || len(role.Ports) > 0 || role.TakesOver() {
		return "", false
	}
	for _, r := range engine.ReservedPorts(md, role) {
		if portArg == strconv.Itoa(int(r)) {
			return portArg, true
		}
	}
	return "", false
}

// storedCollision is the reserved --port the stored role already passed, if any: the spec leaves a
// stored collision alone until an edit changes it.
func storedCollision(old *workerv1.ModelDeployment, stored workerv1.ModelDeploymentRole, had bool) string {
	if !had {
		return ""
	}
	port, _ := reservedPortArg(old, stored)
	return port
}

// validateReservedPorts: no declared port, and no --port of a role declaring none, may be one
// mdplane synthesizes a listener on. A --port collision the stored object already had is left alone
// until an edit changes it; one an edit creates (another port, or a router added) is refused.
func validateReservedPorts(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path, stored string) field.ErrorList {
	reserved := engine.ReservedPorts(md, role)
	if len(reserved) == 0 {
		return nil
	}
	var errs field.ErrorList
	set := fmt.Sprint(reserved)
	where := ""
	if md.Spec.Router != nil {
		where = fmt.Sprintf("; spec.router names %s", md.Spec.Router.Name)
	}
	for k, p := range role.Ports {
		if slices.Contains(reserved, p.Port) {
			errs = append(errs, field.Invalid(path.Child("ports").Index(k).Child("port"), p.Port, fmt.Sprintf(
				"port %d is reserved for a listener mdplane synthesizes onto role %q (reserved: %s%s); declare another port",
				p.Port, role.Name, set, where)))
		}
	}
	if portArg, collides := reservedPortArg(md, role); collides && portArg != stored {
		errs = append(errs, field.Invalid(path.Child(role.EngineArgsField()), "--port "+portArg, fmt.Sprintf(
			"port %s is reserved for a listener mdplane synthesizes onto role %q (reserved: %s%s); pass another port",
			portArg, role.Name, set, where)))
	}
	return errs
}

// validateHostAccess: a privileged engine container and a hostPath volume reach the node, so each is
// admitted only while an administrator allows it with a Setting (instance-privileged-allowed,
// instance-host-path-volume-allowed; both off by default). On an update, what the stored role
// already had is kept: turning a Setting off refuses new host access without stranding the
// deployments that were admitted with it (their edits and their deletion still go through).
func validateHostAccess(role, stored workerv1.ModelDeploymentRole, had bool, path *field.Path, s settings.Settings) field.ErrorList {
	var errs field.ErrorList
	if role.Privileged && !s.InstancePrivilegedAllowed && (!had || !stored.Privileged) {
		errs = append(errs, field.Forbidden(path.Child("privileged"), fmt.Sprintf(
			"role %q asks for a privileged engine container, which this cluster does not allow: the Setting %s is false; remove privileged (or set it false), or have an administrator set %s: \"true\" in the data of EnvironmentConfig %s",
			role.Name, settings.InstancePrivilegedAllowed, settings.InstancePrivilegedAllowed, settings.EnvironmentConfigName)))
	}
	if s.InstanceHostPathVolumeAllowed {
		return errs
	}
	for j, v := range role.AdditionalVolumes {
		if v.HostPath == nil || had && storedHostPath(stored, v) {
			continue
		}
		errs = append(errs, field.Forbidden(path.Child("additionalVolumes").Index(j).Child("hostPath"), fmt.Sprintf(
			"role %q mounts host path %q at %s, which this cluster does not allow: the Setting %s is false; use another volume source (emptyDir, persistentVolumeClaim, configMap, secret), or have an administrator set %s: \"true\" in the data of EnvironmentConfig %s",
			role.Name, v.HostPath.Path, v.MountPath, settings.InstanceHostPathVolumeAllowed, settings.InstanceHostPathVolumeAllowed, settings.EnvironmentConfigName)))
	}
	return errs
}

// storedHostPath reports whether the stored role already mounted the same host path at the same place.
func storedHostPath(stored workerv1.ModelDeploymentRole, v workerv1.ModelDeploymentAdditionalVolume) bool {
	for _, o := range stored.AdditionalVolumes {
		if o.HostPath != nil && o.MountPath == v.MountPath && o.HostPath.Path == v.HostPath.Path {
			return true
		}
	}
	return false
}

// validateVolumes: two volumes mounted at one path make a Pod the API server refuses, so the render
// could never create the role's replicas. Entries naming no source are not mounted.
func validateVolumes(role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	first := map[string]int{}
	for j, v := range role.AdditionalVolumes {
		if !namesVolumeSource(v) {
			continue
		}
		if k, dup := first[v.MountPath]; dup {
			errs = append(errs, field.Duplicate(path.Child("additionalVolumes").Index(j).Child("mountPath"), v.MountPath))
			errs[len(errs)-1].Detail = fmt.Sprintf("%s is already mounted by %s; a container mounts one volume per path, so mount this one elsewhere or remove one of them",
				v.MountPath, path.Child("additionalVolumes").Index(k))
			continue
		}
		first[v.MountPath] = j
	}
	return errs
}

func namesVolumeSource(v workerv1.ModelDeploymentAdditionalVolume) bool {
	return v.ConfigMap != nil || v.Secret != nil || v.HostPath != nil || v.EmptyDir != nil || v.PersistentVolumeClaim != nil
}

// validateRoutedPorts: a router dials every role it fronts over HTTP on one serving port (the
// render fails otherwise), so a routed role serves over TCP, and all routed roles on the same port.
func validateRoutedPorts(md *workerv1.ModelDeployment, roles *field.Path) field.ErrorList {
	if md.Spec.Router == nil {
		return nil
	}
	var errs field.ErrorList
	router := md.Spec.Router.Name
	for i, role := range md.Spec.Roles {
		if len(role.Ports) > 0 && role.Ports[0].Protocol != "" && role.Ports[0].Protocol != corev1.ProtocolTCP {
			errs = append(errs, field.Invalid(roles.Index(i).Child("ports").Index(0).Child("protocol"), string(role.Ports[0].Protocol), fmt.Sprintf(
				"role %q serves on %s port %d, but spec.router (%s) reaches its roles over HTTP on TCP; declare a TCP serving port first, or remove the router",
				role.Name, role.Ports[0].Protocol, role.Ports[0].Port, router)))
		}
	}
	firstRole, firstPort := -1, int32(0)
	for i, role := range md.Spec.Roles {
		_, port := engine.ServingPorts(md.Spec.Engine.Name, md.Spec.Router, role)
		if firstRole < 0 {
			firstRole, firstPort = i, port
			continue
		}
		if port != firstPort {
			errs = append(errs, field.Invalid(servingPortField(md, role, roles.Index(i)), port, fmt.Sprintf(
				"role %q serves on port %d and role %q on port %d, but spec.router (%s) reaches every role on one serving port; serve all roles on one port (ports[0] or --port), or remove the router",
				role.Name, port, md.Spec.Roles[firstRole].Name, firstPort, router)))
		}
	}
	return errs
}

// servingPortField is where a role's serving port comes from: its first declared port, the --port
// its engine reads, else the role itself, which serves on the default port (a role with neither
// has no field to name).
func servingPortField(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path) *field.Path {
	if len(role.Ports) > 0 {
		return path.Child("ports").Index(0).Child("port")
	}
	if _, own := engine.OwnPort(md.Spec.Engine.Name, role); own && !engine.BehindRoutingProxy(md.Spec.Router, role) {
		return path.Child(role.EngineArgsField())
	}
	return path
}

// validateResources: a fabric interface count is a whole, non-negative number; one accelerator cannot
// serve a partition profile and a slice at once.
func validateResources(role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	res := role.Resources
	if res == nil {
		return nil
	}
	var errs field.ErrorList
	p := path.Child("resources")
	if res.Interface != nil {
		if res.Interface.Sign() < 0 || res.Interface.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(p.Child("interface"), res.Interface.String(),
				"interface is a whole, non-negative number of fabric interfaces per Pod"))
		}
	}
	if sharesOneCard(res) && res.Accelerator != nil && res.Accelerator.Cmp(resource.MustParse("1")) > 0 {
		errs = append(errs, field.Invalid(p.Child("accelerator"), res.Accelerator.String(), fmt.Sprintf(
			"a logical slice or a partition profile is a share of one accelerator, not of %s; request accelerator: 1 with the slice or partition, or whole accelerators without one",
			res.Accelerator.String())))
	}
	if res.AcceleratorPartitionedProfile != "" && (res.AcceleratorSlicedMemoryPercentage != nil || res.AcceleratorSlicedCoresPercentage != nil) {
		errs = append(errs, field.Invalid(p.Child("acceleratorPartitionedProfile"), res.AcceleratorPartitionedProfile, fmt.Sprintf(
			"a partition profile together with %s or %s: one accelerator cannot serve both; request a partition or a slice",
			p.Child("acceleratorSlicedMemoryPercentage"), p.Child("acceleratorSlicedCoresPercentage"))))
	}
	return errs
}

// sharesOneCard reports a request for a logical slice or a partition: one card's share, never whole
// cards.
func sharesOneCard(res *workerv1.ModelDeploymentRoleResources) bool {
	return res != nil && (res.AcceleratorPartitionedProfile != "" || res.AcceleratorSlicedMemoryPercentage != nil || res.AcceleratorSlicedCoresPercentage != nil)
}

// fabricPath is the transport a role's fabric interfaces would serve. The direct prefill/decode
// transfer speaks the deployment's spec.kvTransfer.protocol (unset is TCP). The cache client speaks
// the transport it is rendered on: the first group protocol of the pool's backend its engine accepts
// (engine.MatchTransport), or, when the backend was not read, spec.kvTransfer.protocol. A replaced
// command is given neither.
type fabricPath struct {
	leg, client                 bool
	legProtocol, clientProtocol workerv1.TransferProtocol
	// clientSource names where clientProtocol was read, for the message.
	clientSource string
	// unresolved is the named refusal of a cache chain that does not resolve; conflict lists the
	// backend's distinct group protocols when they disagree for an engine that speaks one.
	unresolved, conflict string
	// ascend is true on vLLM-Ascend (vLLM on an InstanceType reporting manufacturer ascend): its leg
	// takes no protocol of ours and its client speaks only CANN, so it has no fabric path.
	ascend bool
}

func fabricPathOf(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, c Cluster) fabricPath {
	manufacturer := manufacturerOf(c, role.InstanceType)
	p := fabricPath{
		leg:          engine.RendersDirectLeg(md.Spec.Engine.Name, md.Spec.Router, manufacturer, md.Spec.Roles, role),
		client:       md.Spec.KVCache != nil && !role.TakesOver(),
		legProtocol:  engine.DirectLegProtocol(&md.Spec, manufacturer),
		clientSource: "spec.kvTransfer.protocol",
		ascend:       engine.ClientEngineOf(md.Spec.Engine.Name, manufacturer) == engine.ClientVLLMAscend,
	}
	p.clientProtocol = p.legProtocol
	if p.ascend {
		// Whatever the backend offers, vLLM-Ascend's client speaks CANN or the render fails.
		p.clientProtocol, p.clientSource = workerv1.TransportCANN, "vLLM-Ascend's cache client"
	}
	if !p.client || c.KVCache == nil {
		return p
	}
	if p.unresolved = c.KVCache.unresolved(); p.unresolved != "" {
		p.clientProtocol = ""
		return p
	}
	offers := engine.BackendOffers(c.KVCache.Backend)
	e := engine.ClientEngineOf(md.Spec.Engine.Name, manufacturerOf(c, role.InstanceType))
	if engine.ValidateBindingTransport(e, offers) != nil {
		p.conflict = strings.Join(engine.DistinctOffers(offers), ", ")
	}
	matched, _ := engine.MatchTransport(e, offers) // a vLLM-Ascend mismatch fails the render
	p.clientProtocol = engine.APIProtocol(matched)
	p.clientSource = fmt.Sprintf("KVCacheBackend %q", c.KVCache.Backend.Name)
	return p
}

// allocates reports whether the path has a fabric to allocate interfaces for: RDMA or EFA.
func (p fabricPath) allocates() bool {
	return (p.leg && engine.IsFabric(p.legProtocol)) || (p.client && engine.IsFabric(p.clientProtocol))
}

// sameFabricPath: the interface check re-runs only for a role whose own interface request, type or
// command presence moved, or whose rendered transfer path an edit changed — a drifted store is
// repaired at the pool, not refused at the next unrelated edit.
func sameFabricPath(md, old *workerv1.ModelDeployment, role, stored workerv1.ModelDeploymentRole) bool {
	var a, b *resource.Quantity
	if role.Resources != nil {
		a = role.Resources.Interface
	}
	if stored.Resources != nil {
		b = stored.Resources.Interface
	}
	return (a == nil) == (b == nil) && (a == nil || a.Cmp(*b) == 0) &&
		role.InstanceType == stored.InstanceType && role.TakesOver() == stored.TakesOver() &&
		equality.Semantic.DeepEqual(md.Spec.KVCache, old.Spec.KVCache) &&
		fabricPathOf(md, role, Cluster{}) == fabricPathOf(old, stored, Cluster{})
}

// validateInterface: a positive fabric interface count must have one RDMA or EFA path to allocate
// for: a direct transfer or a cache client the role is actually given, on RDMA or EFA, and not two
// paths on different fabrics (one interface resource serves one). A TCP client would hold the
// device and never use it.
func validateInterface(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path, c Cluster) field.ErrorList {
	if role.Resources == nil || role.Resources.Interface == nil || role.Resources.Interface.Sign() <= 0 {
		return nil
	}
	at := path.Child("resources", "interface")
	count := role.Resources.Interface.String()
	p := fabricPathOf(md, role, c)
	switch {
	case p.unresolved != "":
		return field.ErrorList{field.Forbidden(at, fmt.Sprintf(
			"%s: role %q requests %s fabric interface(s) for its cache client, whose transport is read from KVCachePoolBinding %q, its KVCachePool and that pool's KVCacheBackend; create the missing object or remove the interface request",
			p.unresolved, role.Name, count, md.Spec.KVCache.PoolRef.Name))}
	case p.conflict != "":
		return field.ErrorList{field.Invalid(at, count, fmt.Sprintf(
			"cache member groups use conflicting protocols: %s, so role %q cannot be given interfaces for one of them; set one common protocol on %s and every group that overrides it, or remove the interface request",
			p.conflict, role.Name, p.clientSource))}
	case p.leg && p.client && engine.IsFabric(p.legProtocol) && engine.IsFabric(p.clientProtocol) && p.legProtocol != p.clientProtocol:
		return field.ErrorList{field.Invalid(at, count, fmt.Sprintf(
			"cache and direct-transfer legs use %s and %s: role %q's interfaces serve one fabric; set spec.kvTransfer.protocol to %s, or bind a pool whose backend uses %s",
			p.clientProtocol, p.legProtocol, role.Name, p.clientProtocol, p.legProtocol))}
	case p.allocates():
		return nil
	}
	return field.ErrorList{field.Invalid(at, count, fmt.Sprintf(
		"no effective RDMA or EFA transfer leg uses the requested interfaces (role %q): %s",
		role.Name, noFabricPath(p, role)))}
}

// noFabricPath says why a role has no fabric for its interfaces, and the ways out.
func noFabricPath(p fabricPath, role workerv1.ModelDeploymentRole) string {
	var why string
	clientUses := fmt.Sprintf("protocol %s (%s)", p.clientProtocol, p.clientSource)
	legUses := fmt.Sprintf("protocol %s (spec.kvTransfer.protocol)", p.legProtocol)
	if p.ascend {
		return fmt.Sprintf("vLLM-Ascend (InstanceType %q) picks its own transfer transport and its cache client speaks only CANN; "+
			"remove the interface request, or move the role to an InstanceType whose engine transfers over RDMA or EFA", role.InstanceType)
	}
	switch {
	case p.leg && p.client && p.clientProtocol == p.legProtocol && p.clientSource == "spec.kvTransfer.protocol":
		why = "its direct prefill/decode transfer and its cache pool client both use " + legUses
	case p.leg && p.client:
		why = "its prefill/decode transfer uses " + legUses + " and its cache client uses " + clientUses
	case p.leg:
		why = "its direct prefill/decode transfer uses " + legUses
	case p.client:
		why = "its only transfer path is its cache pool client, which uses " + clientUses
	case role.TakesOver():
		// A protocol is no way out here: it reaches no replaced command.
		return "its replaced command is given no transfer and no cache client; remove the interface request"
	default:
		// Nor for a role with neither leg: a protocol needs a transfer or a client to apply to.
		return "it is given no direct prefill/decode transfer and binds no cache pool; remove the interface request, or bind a cache pool with spec.kvCache and set spec.kvTransfer.protocol to RDMA or EFA"
	}
	fix := "set spec.kvTransfer.protocol to RDMA or EFA for its transfer or cache client"
	if p.client && p.clientSource != "spec.kvTransfer.protocol" {
		fix = fmt.Sprintf("set spec.kvTransfer.protocol to RDMA or EFA for its transfer, or %s's spec.transport.protocol (and its groups') for its cache client", p.clientSource)
	}
	return why + "; " + fix + ", or remove the interface request"
}

// sameWidthInputs: a stored role's width is judged again only when its arguments, environment
// (VLLM_DP_SIZE) or card request move.
func sameWidthInputs(role, stored workerv1.ModelDeploymentRole) bool {
	return slices.Equal(role.ExtraArgs, stored.ExtraArgs) && slices.Equal(role.Command, stored.Command) &&
		slices.Equal(role.Env, stored.Env) && equality.Semantic.DeepEqual(role.Resources, stored.Resources) && role.InstanceType == stored.InstanceType
}

// validateWidth: the tensor × pipeline ranks a role declares run on one member's own cards. A slice or
// a partition is one card's share; an unset count is what the mutating half defaults (one card on an
// acceleratable type). CPU-only roles are not judged.
func validateWidth(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path, c Cluster) field.ErrorList {
	var cards int64
	res := role.Resources
	switch {
	case sharesOneCard(res):
		cards = 1
	case res != nil && res.Accelerator != nil:
		cards = res.Accelerator.Value()
	default:
		if it := c.InstanceTypes[role.InstanceType]; md.DeletionTimestamp == nil && it != nil && it.Spec.Acceleratable {
			cards = 1
		}
	}
	width := engine.MemberWidth(md.Spec.Engine.Name, role.EngineArgs(), role.Env)
	if cards == 0 || width.Cards.Cmp(big.NewInt(cards)) <= 0 {
		return nil
	}
	return field.ErrorList{field.Invalid(widthField(role, path), width.Cards.String(), fmt.Sprintf(
		"role %q declares a parallel width of %s (%s) per member, over its %d accelerator(s) per Pod (size does not rescue it: each member has its own cards); request at least %s in %s, declare smaller degrees, or spread one engine over hosts with the engine's --nnodes",
		role.Name, width.Cards, width.Degrees, cards, width.Cards, path.Child("resources", "accelerator")))}
}

// widthField is where a role's width is declared: its command line, or with none its VLLM_DP_SIZE
// (the only other term of the width), so the refusal names a field the role has.
func widthField(role workerv1.ModelDeploymentRole, path *field.Path) *field.Path {
	if len(role.EngineArgs()) > 0 {
		return path.Child(role.EngineArgsField())
	}
	for j, env := range role.Env {
		if env.Name == "VLLM_DP_SIZE" {
			return path.Child("env").Index(j).Child("value")
		}
	}
	return path
}

// validateTopology: requiredLevel names a node label key; the host level is implicit.
func validateTopology(role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	if role.Topology == nil || role.Topology.RequiredLevel == "" {
		return nil
	}
	level := role.Topology.RequiredLevel
	p := path.Child("topology", "requiredLevel")
	if level == "kubernetes.io/hostname" {
		return field.ErrorList{field.Invalid(p, level,
			"kubernetes.io/hostname is implicit and cannot be required; name a wider level such as a rack or zone label, or omit requiredLevel")}
	}
	if reasons := k8svalidation.IsQualifiedName(level); len(reasons) > 0 {
		return field.ErrorList{field.Invalid(p, level, "requiredLevel must be a node label key naming a topology level: "+strings.Join(reasons, "; "))}
	}
	return nil
}

// validateInstanceTypes: the modes and capacity an InstanceType offers, read from the type.
func validateInstanceTypes(md *workerv1.ModelDeployment, roles *field.Path, c Cluster) field.ErrorList {
	var errs field.ErrorList
	users := map[string][]string{}
	for _, r := range md.Spec.Roles {
		users[r.InstanceType] = append(users[r.InstanceType], r.Name)
	}
	slicers := map[workerv1.RoleKind]slicer{} // the Prefill or Decode role slicing, and its group
	for i, role := range md.Spec.Roles {
		path := roles.Index(i)
		it, ok := c.InstanceTypes[role.InstanceType]
		if !ok || it == nil {
			errs = append(errs, field.Invalid(path.Child("instanceType"), role.InstanceType, fmt.Sprintf(
				"InstanceType %q does not exist; create it, or name one that does (kubectl get instancetypes)", role.InstanceType)))
			continue
		}
		res := role.Resources
		if res == nil {
			continue
		}
		rp := path.Child("resources")
		if res.AcceleratorSlicedMemoryPercentage != nil || res.AcceleratorSlicedCoresPercentage != nil {
			if !it.OffersSlicing() {
				errs = append(errs, field.Invalid(rp, "logical slice", fmt.Sprintf("InstanceType %q offers no logical slicing; request whole accelerators or name a type that slices", it.Name)))
			}
			slicers[role.Kind] = slicer{role: role.Name, group: it.Spec.AcceleratorGroup, field: rp.Child(slicedField(res))}
		}
		errs = append(errs, validatePartitionProfile(it, res.AcceleratorPartitionedProfile, rp.Child("acceleratorPartitionedProfile"))...)
		if !sharesOneCard(res) {
			// A slice's or a partition's count is no whole-card request: the whole-card capacity does
			// not bound it (a type may offer partitions and no whole card at all).
			errs = append(errs, validateCards(it, res.Accelerator, users[role.InstanceType], rp.Child("accelerator"))...)
		}
	}
	prefill, pOK := slicers[workerv1.RoleKindPrefill]
	decode, dOK := slicers[workerv1.RoleKindDecode]
	if pOK && dOK && prefill.group != "" && prefill.group == decode.group {
		errs = append(errs, field.Invalid(decode.field, "logical slice", fmt.Sprintf(
			"the Prefill role %q (%s) and the Decode role %q (%s) both request a logical slice of accelerator group %q; give one of them whole accelerators or a partition profile",
			prefill.role, prefill.field, decode.role, decode.field, prefill.group)))
	}
	return errs
}

// slicer is a role requesting a logical slice: its name, the accelerator group its type draws on and
// the slice field it set.
type slicer struct {
	role, group string
	field       *field.Path
}

// slicedField names the slice field a request sets, memory first.
func slicedField(res *workerv1.ModelDeploymentRoleResources) string {
	if res.AcceleratorSlicedMemoryPercentage != nil {
		return "acceleratorSlicedMemoryPercentage"
	}
	return "acceleratorSlicedCoresPercentage"
}

// validatePartitionProfile: a requested partition profile is one the InstanceType offers.
func validatePartitionProfile(it *workerv1.InstanceType, profile string, path *field.Path) field.ErrorList {
	if profile == "" {
		return nil
	}
	profiles := it.PartitionProfiles()
	if len(profiles) == 0 {
		return field.ErrorList{field.Invalid(path, profile, fmt.Sprintf("InstanceType %q cannot partition its accelerators", it.Name))}
	}
	// A type may report profiles its manufacturer publishes under no partition kind: no device
	// plugin serves a key for them, so the Pod could never be scheduled.
	if vendor, known := workerv1.LookupAcceleratorVendor(it.Status.Detail.Manufacturer); known && vendor.PartitionKind == "" {
		return field.ErrorList{field.Invalid(path, profile, fmt.Sprintf(
			"InstanceType %q reports manufacturer %q, which has no partition kind, so no device plugin serves a partition of it; request whole accelerators or a slice, or name a type of a manufacturer that partitions (%s)",
			it.Name, it.Status.Detail.Manufacturer, strings.Join(workerv1.PartitioningManufacturers(), ", ")))}
	}
	offered := make([]string, 0, len(profiles))
	for _, pc := range profiles {
		if pc.Name == profile {
			return nil
		}
		offered = append(offered, pc.Name)
	}
	return field.ErrorList{field.Invalid(path, profile, fmt.Sprintf(
		"InstanceType %q offers no partition profile %q; request one it offers (%s) or name a type that offers it",
		it.Name, profile, strings.Join(offered, ", ")))}
}

// validateCards: a Pod's whole accelerators fit the InstanceType, and a CPU-only role does not
// share an acceleratable type with other roles (users are the roles on the type).
func validateCards(it *workerv1.InstanceType, accelerator *resource.Quantity, users []string, path *field.Path) field.ErrorList {
	if accelerator == nil {
		return nil
	}
	var errs field.ErrorList
	cards := accelerator.Value()
	// A type with no capacity in any view has no nodes yet (or none schedulable): that is not a
	// limit, the deployment waits for them and says so; a type whose nodes give none of it whole
	// (partitions only) is.
	view := it.Status.Accelerator
	overNodes := view != nil && view.Capacity != nil && cards > view.Capacity.Value()
	switch grows, autoscaled, _ := it.AutoscaledCapacity(); {
	case autoscaled && cards > grows && (overNodes || view == nil || view.Capacity == nil):
		// An autoscaled type has what its node pool grows to, or its nodes' capacity where more.
		errs = append(errs, field.Invalid(path, cards, fmt.Sprintf(
			"InstanceType %q grows to %d whole accelerators in all (annotation %s); request at most that many per Pod", it.Name, grows, workerv1.AnnotationAutoscaledCapacity)))
	case !autoscaled && overNodes && hasCapacity(it):
		errs = append(errs, field.Invalid(path, cards, fmt.Sprintf(
			"InstanceType %q has %d whole accelerators in all; request at most that many per Pod", it.Name, view.Capacity.Value())))
	}
	if cards == 0 && it.Spec.Acceleratable && len(users) > 1 {
		errs = append(errs, field.Invalid(path, 0, fmt.Sprintf(
			"accelerator: 0 on acceleratable InstanceType %q, which roles %s share; request at least one accelerator, or move the CPU-only role to a type without accelerators",
			it.Name, strings.Join(users, ", "))))
	}
	return errs
}

// hasCapacity reports whether any of an InstanceType's views counts some capacity.
func hasCapacity(it *workerv1.InstanceType) bool {
	for _, c := range []*resource.Quantity{viewCapacity(it.Status.Accelerator), viewCapacity(it.Status.AcceleratorShared), viewCapacity(it.Status.AcceleratorSliced)} {
		if c != nil && c.Sign() > 0 {
			return true
		}
	}
	p := it.Status.AcceleratorPartitioned
	return p != nil && p.Capacity != nil && p.Capacity.Sign() > 0
}

func viewCapacity(v *workerv1.CapacityView) *resource.Quantity {
	if v == nil {
		return nil
	}
	return v.Capacity
}

// routerEngines are the engines each router can front.
var routerEngines = map[workerv1.RouterName][]workerv1.Engine{
	workerv1.RouterLLMD:          {workerv1.EngineVLLM, workerv1.EngineSGLang},
	workerv1.RouterVLLM:          {workerv1.EngineVLLM},
	workerv1.RouterSGLangGateway: {workerv1.EngineSGLang},
}

// routerOwnedArgs are the flags mdplane renders on each router, so a user may not pass them again.
var routerOwnedArgs = map[workerv1.RouterName][]string{
	workerv1.RouterLLMD: {"--endpoint-selector", "--endpoint-target-ports", "--config-file", "--secure-serving",
		"--grpc-health-port", "--metrics-endpoint-auth"},
	workerv1.RouterVLLM: {"--host", "--port", "--prometheus-host", "--prometheus-port", "--kv-connector", "--service-discovery",
		"--service-discovery-namespace", "--service-discovery-port", "--selector", "--prefill-selector", "--decode-selector",
		"--vllm-pd-disaggregation"},
	workerv1.RouterSGLangGateway: {"--host", "--port", "--prometheus-host", "--prometheus-port", "--service-discovery",
		"--service-discovery-namespace", "--service-discovery-port", "--selector", "--prefill-selector", "--decode-selector",
		"--pd-disaggregation"},
}

// validateRouter: a router fronts the engines it speaks to, its own flags are mdplane's, and the
// disaggregation threshold is llm-d-router's alone.
func validateRouter(md *workerv1.ModelDeployment) field.ErrorList {
	r := md.Spec.Router
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "router")
	engines := routerEngines[r.Name]
	supported := false
	for _, e := range engines {
		supported = supported || e == md.Spec.Engine.Name
	}
	if !supported && len(engines) > 0 {
		errs = append(errs, field.Invalid(path.Child("name"), string(r.Name), fmt.Sprintf(
			"%s fronts %v, not %s; choose a router for %s (llm-d-router fronts both engines)", r.Name, engines, md.Spec.Engine.Name, md.Spec.Engine.Name)))
	}
	for j, arg := range r.ExtraArgs {
		name, _, _ := strings.Cut(arg, "=")
		if r.Name == workerv1.RouterLLMD && !strings.HasPrefix(name, "--") && strings.HasPrefix(name, "-") {
			name = "-" + name // the EPP parses Go flags, where -config-file is --config-file
		}
		for _, owned := range routerOwnedArgs[r.Name] {
			if name == owned {
				errs = append(errs, field.Invalid(path.Child("extraArgs").Index(j), arg, fmt.Sprintf(
					"%s is rendered by mdplane on %s and cannot be passed again; remove it from spec.router.extraArgs (mdplane sets it from the deployment)", owned, r.Name)))
			}
		}
	}
	if r.DisaggregationThresholdTokens != nil && r.Name != workerv1.RouterLLMD {
		errs = append(errs, field.Invalid(path.Child("disaggregationThresholdTokens"), *r.DisaggregationThresholdTokens, fmt.Sprintf(
			"only llm-d-router splits requests by prompt length; remove it for %s", r.Name)))
	}
	return errs
}

// validateCadence refuses a rollout cadence annotation naming no cadence, when it is new or changed:
// read as the default, a misspelt capacity-preserving would roll a role with no Ready gate.
func validateCadence(md, old *workerv1.ModelDeployment) field.ErrorList {
	v, set := md.Annotations[workerv1.AnnotationRolloutCadence]
	if !set || v == string(workerv1.RolloutCadenceAdmission) || v == string(workerv1.RolloutCadenceCapacity) {
		return nil
	}
	if old != nil && old.Annotations[workerv1.AnnotationRolloutCadence] == v {
		return nil
	}
	return field.ErrorList{field.NotSupported(field.NewPath("metadata", "annotations").Key(workerv1.AnnotationRolloutCadence), v,
		[]string{string(workerv1.RolloutCadenceAdmission) + " (the default: the next old replica leaves once the replacement is admitted)",
			string(workerv1.RolloutCadenceCapacity) + " (once the replacement is Ready)"})}
}

// validatePriorityClass keeps the Kueue priority class a deployment was created with, and refuses
// a new deployment naming a WorkloadPriorityClass that does not exist (when c read them). The label
// reaches a group's Pods when they are created, and Kueue refuses it added to or removed from a
// running Pod: an edit would leave one deployment's replicas at different priorities.
func validatePriorityClass(md, old *workerv1.ModelDeployment, c Cluster) field.ErrorList {
	path := field.NewPath("metadata", "labels").Key(workerv1.LabelPriorityClass)
	v, set := md.Labels[workerv1.LabelPriorityClass]
	if old != nil {
		was, had := old.Labels[workerv1.LabelPriorityClass]
		if v == was && set == had {
			return nil
		}
		way := fmt.Sprintf("put back %q", was)
		if !had {
			way = "remove it"
		}
		return field.ErrorList{field.Invalid(path, v, fmt.Sprintf(
			"a deployment keeps the priority class it was created with; %s, or delete and recreate the deployment to change it", way))}
	}
	if !set || c.PriorityClasses == nil || c.PriorityClasses[v] {
		return nil
	}
	return field.ErrorList{field.Invalid(path, v, fmt.Sprintf(
		"no Kueue WorkloadPriorityClass %q exists; create it (kubectl get workloadpriorityclasses lists them) or remove the label for the default priority", v))}
}

// validateServedAliases: while an artifact delivers the weights, the model is served under
// spec.model.name alone. vLLM's --served-model-name takes several names; an alias beside the name
// is refused, since clients and the router address the one name.
func validateServedAliases(md *workerv1.ModelDeployment, role workerv1.ModelDeploymentRole, path *field.Path) field.ErrorList {
	if md.Spec.Engine.Name != workerv1.EngineVLLM {
		return nil // SGLang's --served-model-name takes one name
	}
	var errs field.ErrorList
	for _, j := range servedAliasIndexes(role.ExtraArgs) {
		errs = append(errs, field.Invalid(path.Child("extraArgs").Index(j), role.ExtraArgs[j], fmt.Sprintf(
			"with spec.model.artifactRef the model is served as spec.model.name (%q) alone, and --served-model-name here also serves %q; remove the alias (or the flag: mdplane renders it)",
			md.Spec.Model.Name, role.ExtraArgs[j])))
	}
	return errs
}

// servedAliasIndexes are the indexes of the names after the first that vLLM's last
// --served-model-name reads: a spelling with = takes one name, a bare one every following
// argument up to the next option.
func servedAliasIndexes(args []string) []int {
	var out []int
	for i := 0; i < len(args) && args[i] != "--"; i++ {
		name, ok := engine.OptionName(workerv1.EngineVLLM, args[i])
		if !ok || name != "--served-model-name" {
			continue
		}
		out = nil
		if strings.Contains(args[i], "=") {
			continue
		}
		for k := i + 2; k < len(args) && !strings.HasPrefix(args[k], "-"); k++ {
			out = append(out, k)
		}
	}
	return out
}
