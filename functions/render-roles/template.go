package renderroles

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// Rendering constants of the spec.
const (
	shmVolume         = "dshm"
	shmPath           = "/dev/shm"
	compileCache      = "gpustack-compile-cache"
	compileCachePath  = "/var/lib/gpustack/cache"
	readinessFailures = 3
)

// Role is everything one role's Pod template is rendered from: the deployment, the role with its
// defaults applied, and the external objects it binds (the InstanceType always; the cache Binding,
// its pool and the ModelArtifact when the deployment names them and they exist; the RuntimeClass of
// the type's manufacturer when the cluster has it).
type Role struct {
	Namespace    string
	Deployment   string
	Spec         *workerv1.ModelDeploymentSpec
	Role         workerv1.ModelDeploymentRole
	InstanceType *workerv1.InstanceType
	Binding      *workerv1.KVCachePoolBinding
	Pool         *workerv1.KVCachePool
	Backend      *workerv1.KVCacheBackend
	Artifact     *workerv1.ModelArtifact
	// RuntimeClassName is the RuntimeClass the Pods run with: the InstanceType's
	// (InstanceType.RuntimeClassName) when a RuntimeClass of that name exists, else empty, for none.
	RuntimeClassName string
	// Delivery is how the artifact's weights reach the Pods, nil when the deployment names none.
	Delivery *Delivery
	// Settings are the worker Settings; nil is the defaults. They reach the template (so new and
	// replaced Pods, under the render version), not the digest, except the dtype ownership.
	Settings *settings.Settings
	// PriorityClass is the Kueue WorkloadPriorityClass the deployment's label names, "" for none;
	// every Pod of the role carries it.
	PriorityClass string
}

// settings are the role's Settings, the defaults when none were read.
func (in Role) settings() settings.Settings {
	return settings.OrDefaults(in.Settings)
}

// RenderedRole is a role's resolved Pod template and what Services and status need of it.
type RenderedRole struct {
	// Role is the role as rendered, with its defaults applied: the render's callers read it from
	// here rather than defaulting the role again.
	Role workerv1.ModelDeploymentRole
	// Template is the Pod template every replica of the current revision is stamped from.
	Template corev1.PodTemplateSpec
	// ConfigDigest is the SHA-256 of the role's explicit configuration and resolved bindings.
	ConfigDigest string
	// Revision keys the configuration and the render baseline.
	Revision string
	// ServicePort is the port the role's Service and the deployment's endpoint publish.
	ServicePort int32
	// TargetPort is the container port the engine listens on.
	TargetPort int32
	// Unmanaged is true when the role takes its command line over.
	Unmanaged bool
	// Scheme is https when the engine serves TLS (it is passed a certificate or key file), else http.
	Scheme string
	// ServesEveryMember is true when every member of a replica serves HTTP (an External-DP Server
	// role): every member is labelled to serve, and the role's Services select them all.
	ServesEveryMember bool
	// Elastic is the Elastic EP part the role renders, nil on an ordinary role.
	Elastic *v1alpha1.ElasticRole
}

// RenderRole resolves one role's Pod template. It fails, rather than guessing, when the InstanceType
// has not published what the render needs.
func RenderRole(in Role) (*RenderedRole, error) {
	role := canonicalQuantities(in.Role.WithDefaults())
	it := in.InstanceType
	if it == nil {
		return nil, fmt.Errorf("role %q: spec.roles[].instanceType names InstanceType %q, which does not exist; create it or name another", role.Name, role.InstanceType)
	}
	if it.Status.Entrance == "" {
		return nil, fmt.Errorf("role %q: InstanceType %q publishes no status.entrance yet, so the Kueue queue of its Pods cannot be named; the render waits for the InstanceType to converge", role.Name, it.Name)
	}
	digest, err := configDigest(in, role)
	if err != nil {
		return nil, err
	}
	out := &RenderedRole{Role: role, ConfigDigest: digest, Revision: revisionOf(digest, in.settings()), Unmanaged: role.TakesOver(),
		ServesEveryMember: engine.ServesEveryMember(in.Spec.Engine.Name, role)}

	ports := rolePorts(in.Spec, role)
	out.ServicePort, out.TargetPort, out.Scheme = ports.service, ports.target, ports.scheme

	main := mainContainer(in, role, ports)
	grace := terminationGrace(role)
	if !role.TakesOver() {
		main.Lifecycle = DrainHook(in.Spec.Engine.Name, ports.scheme, ports.metrics, *grace)
	}
	resources, err := podResources(it, role.Resources, engine.FabricTransport(in.Spec, manufacturerOf(in.InstanceType), role, cacheClientTransport(in, role)))
	if err != nil {
		return nil, fmt.Errorf("role %q: %w", role.Name, err)
	}
	main.Resources = resources
	if !role.TakesOver() {
		in.Delivery.growEphemeralLimit(&main)
	}

	volumes, mounts := roleVolumes(in, role)
	main.VolumeMounts = mounts

	pod := corev1.PodSpec{
		Containers:                    []corev1.Container{main},
		Volumes:                       volumes,
		RestartPolicy:                 corev1.RestartPolicyAlways,
		AutomountServiceAccountToken:  ptr.To(false),
		EnableServiceLinks:            ptr.To(false),
		ImagePullSecrets:              role.ImagePullSecrets,
		TerminationGracePeriodSeconds: grace,
	}
	if needsWaitForWorker(role) {
		pod.InitContainers = []corev1.Container{waitForWorker(main.Image, main.ImagePullPolicy)}
	}
	if in.RuntimeClassName != "" {
		pod.RuntimeClassName = ptr.To(in.RuntimeClassName)
	}
	if tcpTWReuse(in, role) {
		pod.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: tcpTWReuseSysctl, Value: "1"}}}
	}
	out.Template = corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: roleLabels(in, role, out.ServesEveryMember), Annotations: roleAnnotations(role, ports, digest)},
		Spec:       pod,
	}
	return out, nil
}

// tcpTWReuseSysctl is what the Setting model-deployment-tcp-tw-reuse turns on.
const tcpTWReuseSysctl = "net.ipv4.tcp_tw_reuse"

// tcpTWReuse reports whether the role's Pods get net.ipv4.tcp_tw_reuse=1: with the Setting on, the
// prefill half of an SGLang prefill/decode pair only (the kubelet must allow the sysctl, or the Pod
// fails with SysctlForbidden). A Setting, so it reaches new and replaced Pods only.
func tcpTWReuse(in Role, role workerv1.ModelDeploymentRole) bool {
	return in.settings().TCPTWReuse && in.Spec.Engine.Name == workerv1.EngineSGLang &&
		role.Kind == workerv1.RoleKindPrefill && engine.DeclaresPair(in.Spec.Roles)
}

// roleLabels are the labels every Pod of the role carries, the serving label when every member
// serves; the replica step adds the group name, ordinal and member index, and the leader's serving
// label.
func roleLabels(in Role, role workerv1.ModelDeploymentRole, servesEveryMember bool) map[string]string {
	l := naming.RoleLabels(in.Deployment, role.Name)
	if servesEveryMember {
		l[workerv1.LabelServes] = "true"
	}
	l[workerv1.LabelRoleKind] = role.Kind.RouterSpelling()
	l[workerv1.LabelQueueName] = in.InstanceType.Status.Entrance
	if in.PriorityClass != "" {
		l[workerv1.LabelPriorityClass] = in.PriorityClass
	}
	return l
}

func roleAnnotations(role workerv1.ModelDeploymentRole, ports portPlan, digest string) map[string]string {
	a := map[string]string{
		workerv1.AnnotationPodGroupTotalCount: strconv.Itoa(int(role.Size)),
		workerv1.AnnotationRoleHash:           role.Name,
		workerv1.AnnotationPodGroupServing:    "true",
		workerv1.AnnotationRenderVersion:      strconv.Itoa(RenderVersion),
		workerv1.AnnotationPodSpecHash:        digest,
	}
	if role.Topology != nil && role.Topology.RequiredLevel != "" {
		a[workerv1.AnnotationRequiredTopology] = role.Topology.RequiredLevel
	}
	if !role.TakesOver() {
		a[workerv1.AnnotationScrape] = "true"
		a[workerv1.AnnotationScrapePath] = "/metrics"
		a[workerv1.AnnotationScrapePort] = strconv.Itoa(int(ports.metrics))
		a[workerv1.AnnotationScrapeScheme] = ports.scheme
	}
	return a
}

// portPlan is where a role serves: the Service's port, the container port behind it, and the
// container ports to declare.
type portPlan struct {
	service, target int32
	declared        []corev1.ContainerPort
	probed          bool
	// scheme is what the engine speaks on the serving port: https when it serves TLS.
	scheme string
	// metrics is the port the engine itself listens on, where the scrape annotations and the drain
	// hook read it: the target port, or on a decoder behind the routing proxy the port the proxy
	// moves the engine to (engine.ListenerBehindProxy, the rule the proxy applies).
	metrics int32
}

// rolePorts applies the port rules: the first declared port is the serving port; with none declared
// the engine's own --port moves only the container side, and the Service stays on 8000.
func rolePorts(spec *workerv1.ModelDeploymentSpec, role workerv1.ModelDeploymentRole) portPlan {
	e := spec.Engine.Name
	p := portsOf(spec, role)
	p.scheme, p.probed = "http", p.probed && probeable(e, role)
	if servesTLS(e, role) {
		p.scheme = "https"
	}
	p.metrics = p.target
	if engine.BehindRoutingProxy(spec.Router, role) {
		declared := make([]int32, len(p.declared))
		for i, port := range p.declared {
			declared[i] = port.ContainerPort
		}
		p.metrics, _ = engine.ListenerBehindProxy(e, role, declared)
	}
	return p
}

// servesTLS reports whether the engine is given a certificate or a key, in a spelling it accepts,
// and so serves HTTPS.
func servesTLS(e workerv1.Engine, role workerv1.ModelDeploymentRole) bool {
	return engine.HasFlag(e, role.EngineArgs(), "--ssl-certfile", "--ssl-keyfile")
}

// probeable reports whether a probe can reach the engine. A role binding its own --host may listen
// where the kubelet cannot reach, so it gets no probes. With TLS on, the engine must not require
// client certificates (--ssl-cert-reqs 0 or 1, or unset), which a probe cannot present.
func probeable(e workerv1.Engine, role workerv1.ModelDeploymentRole) bool {
	if engine.HasFlag(e, role.EngineArgs(), "--host") {
		return false
	}
	if !servesTLS(e, role) {
		return true
	}
	v, set := engine.FlagValue(e, role.EngineArgs(), "--ssl-cert-reqs")
	return !set || v == "0" || v == "1"
}

func portsOf(spec *workerv1.ModelDeploymentSpec, role workerv1.ModelDeploymentRole) portPlan {
	service, target := engine.ServingPorts(spec.Engine.Name, spec.Router, role)
	if len(role.Ports) > 0 {
		p := portPlan{service: service, target: target}
		for _, port := range role.Ports {
			protocol := port.Protocol
			if protocol == "" {
				protocol = corev1.ProtocolTCP
			}
			p.declared = append(p.declared, corev1.ContainerPort{
				Name:          strings.ToLower(fmt.Sprintf("%s-%d", protocol, port.Port)),
				ContainerPort: port.Port,
				Protocol:      protocol,
			})
		}
		// Probes speak HTTP over TCP; a UDP or SCTP serving port cannot be probed.
		p.probed = p.declared[0].Protocol == corev1.ProtocolTCP
		return p
	}
	return portPlan{
		service:  service,
		target:   target,
		declared: []corev1.ContainerPort{{Name: "http", ContainerPort: target, Protocol: corev1.ProtocolTCP}},
		probed:   true,
	}
}

// baseCommand is the engine's own launch line for a model.
func baseCommand(engine workerv1.Engine, model string) []string {
	if engine == workerv1.EngineSGLang {
		// SGLang serves /metrics only when asked: the scrape annotations and the drain hook read it.
		return []string{"python3", "-m", "sglang.launch_server", "--model-path", model, "--enable-metrics"}
	}
	return []string{"vllm", "serve", model}
}

func mainContainer(in Role, role workerv1.ModelDeploymentRole, ports portPlan) corev1.Container {
	name := in.Spec.Engine.Name
	image := in.Spec.Engine.Image
	if role.Image != "" {
		image = role.Image
	}
	c := corev1.Container{
		Name:            naming.MainContainer,
		Image:           image,
		ImagePullPolicy: role.ImagePullPolicy,
		Ports:           ports.declared,
	}
	managed := !role.TakesOver()
	if !managed {
		// Take-over: the user's argv is the whole command; nothing is synthesized onto it.
		c.Command = append([]string(nil), role.Command...)
	} else {
		// Engine delivery pins the hub revision right after the base command: on the launch line
		// itself, so the flags the cache step puts right after it follow the revision.
		c.Command = append(baseCommand(name, in.Delivery.modelArg(in.Spec.Model.Name)), in.Delivery.engineArgs()...)
		// Filled, not owned: each of the rest only when the user's arguments do not already pass
		// it, in any spelling the engine accepts. The served name is synthesized (with an artifact the model argument
		// is a path or a repository, so it is what names the model; without one it restates it),
		// so it goes before the user's extraArgs (the append tier); --host and --port follow them
		// as the line's fallbacks.
		var args []string
		if !engine.HasFlag(name, role.ExtraArgs, "--served-model-name") {
			args = append(args, "--served-model-name", in.Spec.Model.Name)
		}
		args = append(args, role.ExtraArgs...)
		if !engine.HasFlag(name, role.ExtraArgs, "--host") {
			args = append(args, "--host", "0.0.0.0")
		}
		if !engine.HasFlag(name, role.ExtraArgs, "--port") {
			args = append(args, "--port", strconv.Itoa(int(ports.target)))
		}
		c.Args = args
	}
	c.Env = roleEnv(name, role, managed, in.Delivery)
	if managed && ports.probed {
		c.StartupProbe, c.ReadinessProbe, c.LivenessProbe = probes(ports.target, ports.scheme, *role.StartupTimeoutSeconds)
	}
	switch {
	case role.Privileged:
		c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	case engine.EngramEnabled(name, role.EngineArgs(), role.Env):
		// Pinning host DRAM needs these two capabilities, not a privileged Pod.
		c.SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
			Add: []corev1.Capability{"IPC_LOCK", "SYS_RESOURCE"},
		}}
	}
	return c
}

// roleEnv merges the environment: the entries the render owns first (Engine delivery's), then the
// defaulted ones, each skipped when the user sets its name, then the user's own variables, less any
// that names an owned entry. The GPUSTACK_* variables of a multi-member replica are added per
// replica.
func roleEnv(engine workerv1.Engine, role workerv1.ModelDeploymentRole, managed bool, d *Delivery) []corev1.EnvVar {
	var env, defaulted []corev1.EnvVar
	if managed {
		env = d.ownedEnv(engine)
		name := "VLLM_CACHE_ROOT"
		if engine == workerv1.EngineSGLang {
			name = "SGLANG_CACHE_DIR"
		}
		defaulted = append([]corev1.EnvVar{{Name: name, Value: compileCachePath}}, d.defaultedEnv()...)
	}
	owned := map[string]bool{}
	for _, e := range env {
		owned[e.Name] = true
	}
	for _, e := range defaulted {
		if !userSets(role.Env, e.Name) {
			env = append(env, e)
		}
	}
	for _, e := range role.Env {
		if !owned[e.Name] {
			env = append(env, corev1.EnvVar{Name: e.Name, Value: e.Value})
		}
	}
	return env
}

func userSets(env []workerv1.ModelDeploymentEnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// probes follow the engine's own listener. The startup budget scales the startup probe's failure
// threshold so cold-start compilation is not killed by the liveness probe.
func probes(port int32, scheme string, startupTimeoutSeconds int32) (startup, readiness, liveness *corev1.Probe) {
	uriScheme := corev1.URISchemeHTTP
	if scheme == "https" {
		uriScheme = corev1.URISchemeHTTPS
	}
	probe := func(failures int32) *corev1.Probe {
		return &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
				Path: replicas.HealthPath, Port: intstr.FromInt32(port), Scheme: uriScheme,
			}},
			PeriodSeconds:    replicas.ProbePeriodSeconds,
			TimeoutSeconds:   replicas.ProbeTimeoutSeconds,
			FailureThreshold: failures,
		}
	}
	startupFailures := int32(math.Ceil(float64(startupTimeoutSeconds) / replicas.ProbePeriodSeconds))
	return probe(startupFailures), probe(readinessFailures), probe(replicas.LivenessFailures)
}

// roleVolumes renders /dev/shm, the compile cache of a managed role and the role's own volumes. An
// explicit mount of /dev/shm or of the cache path replaces the rendered one.
func roleVolumes(in Role, role workerv1.ModelDeploymentRole) ([]corev1.Volume, []corev1.VolumeMount) {
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if !mountsPath(role, shmPath) {
		size := resource.MustParse(workerv1.DefaultShmSize)
		if role.ShmSize != nil {
			size = *role.ShmSize
		}
		volumes = append(volumes, corev1.Volume{Name: shmVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &size},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: shmVolume, MountPath: shmPath})
	}
	if !role.TakesOver() && !mountsPath(role, compileCachePath) {
		volumes = append(volumes, corev1.Volume{Name: compileCache, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: compileCacheNodePath(in, role), Type: ptr.To(corev1.HostPathDirectoryOrCreate)},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: compileCache, MountPath: compileCachePath})
	}
	if v, m, ok := in.Delivery.volume(role.TakesOver()); ok {
		volumes = append(volumes, v)
		mounts = append(mounts, m)
	}
	for i, v := range role.AdditionalVolumes {
		source, ok := volumeSource(v)
		if !ok {
			continue // an entry naming no source is skipped
		}
		name := fmt.Sprintf("extra-%d", i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: source})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: v.MountPath, SubPath: v.SubPath, ReadOnly: v.ReadOnly})
	}
	return volumes, mounts
}

func mountsPath(role workerv1.ModelDeploymentRole, path string) bool {
	for _, v := range role.AdditionalVolumes {
		if _, ok := volumeSource(v); ok && strings.TrimRight(v.MountPath, "/") == path {
			return true
		}
	}
	return false
}

func volumeSource(v workerv1.ModelDeploymentAdditionalVolume) (corev1.VolumeSource, bool) {
	switch {
	case v.ConfigMap != nil:
		return corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: *v.ConfigMap}}, true
	case v.Secret != nil:
		return corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.Secret.Name}}, true
	case v.HostPath != nil:
		return corev1.VolumeSource{HostPath: v.HostPath.DeepCopy()}, true
	case v.EmptyDir != nil:
		return corev1.VolumeSource{EmptyDir: v.EmptyDir.DeepCopy()}, true
	case v.PersistentVolumeClaim != nil:
		return corev1.VolumeSource{PersistentVolumeClaim: v.PersistentVolumeClaim.DeepCopy()}, true
	}
	return corev1.VolumeSource{}, false
}

// compileCacheNodePath is the node directory of a role's compilation cache:
// /var/lib/gpustack/cache/<manufacturer>-<engine>/<model-identity>/tp<TP>-pp<PP>-dp<DP>-ep<EP>-cp<PCP>_<DCP>-<hash8>.
// The hash keeps builds of different images or arguments apart.
func compileCacheNodePath(in Role, role workerv1.ModelDeploymentRole) string {
	manufacturer := "cpu"
	if d := in.InstanceType.Status.Detail; in.InstanceType.Spec.Acceleratable && d != nil && d.Manufacturer != "" {
		manufacturer = d.Manufacturer
	}
	image := in.Spec.Engine.Image
	if role.Image != "" {
		image = role.Image
	}
	engineName := strings.ToLower(string(in.Spec.Engine.Name))
	d := engine.ReadDegrees(in.Spec.Engine.Name, role.ExtraArgs)
	key, _ := json.Marshal([]any{image, in.Spec.Model.Name, role.ExtraArgs})
	return fmt.Sprintf("%s/%s-%s/%s/tp%d-pp%d-dp%d-ep%d-cp%d_%d-%s", compileCachePath, manufacturer, engineName,
		strings.ReplaceAll(in.Spec.Model.Name, "/", "--"), d.TP, d.PP, d.DP, d.EP, d.PCP, d.DCP, sha256Hex(key)[:8])
}

// canonicalQuantities is role with its quantities in canonical form. apimachinery keeps some spellings
// as written ("02", "+2") and canonicalizes others ("2000m" is "2"), so the same amount written two
// ways would render two Pod texts and two pod-spec-hashes, and rolling every replica to restate a
// value is pure loss. A value already canonical is unchanged, so no stored digest moves.
func canonicalQuantities(role workerv1.ModelDeploymentRole) workerv1.ModelDeploymentRole {
	canonical := func(q *resource.Quantity) *resource.Quantity {
		if q == nil {
			return nil
		}
		c := q.DeepCopy()
		c.Add(resource.Quantity{}) // arithmetic drops the spelling apimachinery kept
		return &c
	}
	role.ShmSize = canonical(role.ShmSize)
	if r := role.Resources; r != nil {
		c := *r
		c.Accelerator, c.Interface = canonical(r.Accelerator), canonical(r.Interface)
		role.Resources = &c
	}
	return role
}

// configDigest is the SHA-256 of what a replica's Pods are a function of: the explicit deployment
// fields, the role's configuration (its replica count excluded: scaling restarts nothing) and the
// resolved external bindings.
func configDigest(in Role, role workerv1.ModelDeploymentRole) (string, error) {
	role.Replicas = 0
	if role.ElasticEP != nil {
		// Width plays the part of replicas: growing it adds members and restarts none.
		ep := *role.ElasticEP
		ep.Width = 0
		role.ElasticEP = &ep
	}
	role.TerminationGracePeriodSeconds = configuredGrace(role)
	type bindings struct {
		InstanceType  string                             `json:"instanceType"`
		Entrance      string                             `json:"entrance"`
		Acceleratable bool                               `json:"acceleratable"`
		Manufacturer  string                             `json:"manufacturer,omitempty"`
		Unit          workerv1.InstanceTypeUnitResources `json:"unitResources"`
		LocalStorage  string                             `json:"localStorage,omitempty"`
		Binding       *workerv1.KVCachePoolBindingSpec   `json:"binding,omitempty"`
		PoolEndpoint  string                             `json:"poolEndpoint,omitempty"`
		Artifact      *workerv1.ModelArtifactSpec        `json:"artifact,omitempty"`
		ArtifactFrom  string                             `json:"artifactDigest,omitempty"`
		Delivery      *digestKey                         `json:"delivery,omitempty"`
		// RuntimeClass is left out when empty, so a role on a type without one keeps its digest.
		RuntimeClass string `json:"runtimeClassName,omitempty"`
		// StoreTransport is the backend group transport the cache client speaks: a backend whose
		// matched transport moves rewrites the client's configuration, so it rolls the role.
		StoreTransport workerv1.TransferProtocol `json:"storeTransport,omitempty"`
		// AscendLeg is both halves' tensor and data-parallel degrees on vLLM-Ascend's leg, whose
		// document each half carries: a degree edit on one half rolls the pair.
		AscendLeg *ascendLegDegrees `json:"ascendLeg,omitempty"`
		// KVCacheDtypeUnowned is the Setting model-deployment-kv-cache-dtype-owned turned off on a
		// cached role: flipping it moves the digest (the spec), and its default, owned, is left out
		// so no stored digest moves. The only Setting in the digest: the others reach new and
		// replaced Pods under the render version.
		KVCacheDtypeUnowned bool `json:"kvCacheDtypeUnowned,omitempty"`
	}
	b := bindings{
		InstanceType:  in.InstanceType.Name,
		Entrance:      in.InstanceType.Status.Entrance,
		Acceleratable: in.InstanceType.Spec.Acceleratable,
		Unit:          in.InstanceType.Spec.UnitResources,
		LocalStorage:  in.InstanceType.Spec.LocalStorage,
		RuntimeClass:  in.RuntimeClassName,
	}
	if d := in.InstanceType.Status.Detail; d != nil {
		b.Manufacturer = d.Manufacturer
	}
	if in.Binding != nil {
		b.Binding = &in.Binding.Spec
	}
	if in.Backend != nil {
		b.StoreTransport = cacheClientTransport(in, role)
	}
	if m := manufacturerOf(in.InstanceType); engine.ClientEngineOf(in.Spec.Engine.Name, m) == engine.ClientVLLMAscend &&
		engine.RendersDirectLeg(in.Spec.Engine.Name, in.Spec.Router, m, in.Spec.Roles, role) {
		d := engine.PairDegreesOf(in.Spec.Engine.Name, in.Spec.Roles)
		b.AscendLeg = &ascendLegDegrees{PrefillTP: d.Prefill.TP, PrefillDP: d.Prefill.DP, DecodeTP: d.Decode.TP, DecodeDP: d.Decode.DP}
	}
	if in.Pool != nil {
		b.PoolEndpoint = in.Pool.Status.ClientEndpoint
	}
	if in.Spec.KVCache != nil && !role.TakesOver() && role.Kind != workerv1.RoleKindEncode {
		b.KVCacheDtypeUnowned = !in.settings().KVCacheDtypeOwned
	}
	if in.Artifact != nil {
		b.Artifact = &in.Artifact.Spec
		if r := in.Artifact.Status.Resolved; r != nil {
			b.ArtifactFrom = r.ManifestDigest
		}
	}
	b.Delivery = in.Delivery.digestKey()
	var router workerv1.RouterName
	if in.Spec.Router != nil {
		router = in.Spec.Router.Name
	}
	doc, err := json.Marshal(struct {
		Model      workerv1.ModelDeploymentModel       `json:"model"`
		Engine     workerv1.ModelDeploymentEngine      `json:"engine"`
		Router     workerv1.RouterName                 `json:"router,omitempty"`
		KVCache    *workerv1.ModelDeploymentKVCache    `json:"kvCache,omitempty"`
		KVTransfer *workerv1.ModelDeploymentKVTransfer `json:"kvTransfer,omitempty"`
		Role       workerv1.ModelDeploymentRole        `json:"role"`
		Bindings   bindings                            `json:"bindings"`
	}{in.Spec.Model, in.Spec.Engine, router, in.Spec.KVCache, in.Spec.KVTransfer, role, b})
	if err != nil {
		return "", err
	}
	return sha256Hex(doc), nil
}

// ascendLegDegrees are the degrees vLLM-Ascend's leg document carries, each half's.
type ascendLegDegrees struct {
	PrefillTP int `json:"prefillTP"`
	PrefillDP int `json:"prefillDP"`
	DecodeTP  int `json:"decodeTP"`
	DecodeDP  int `json:"decodeDP"`
}

// cacheClientTransport is the protocol a role's cache client speaks, "" when it is given none: the
// backend's group transport its engine accepts (the kv-cache step renders the client on the same
// one), or spec.kvTransfer's while the backend has not been read.
func cacheClientTransport(in Role, role workerv1.ModelDeploymentRole) workerv1.TransferProtocol {
	if in.Binding == nil || role.TakesOver() {
		return ""
	}
	if in.Backend == nil {
		return engine.TransferProtocolOf(in.Spec)
	}
	return engine.ClientTransport(in.Spec.Engine.Name, manufacturerOf(in.InstanceType), in.Backend)
}

// manufacturerOf is the accelerator manufacturer an InstanceType reports, "" before it converges.
func manufacturerOf(it *workerv1.InstanceType) string {
	if it == nil || it.Status.Detail == nil {
		return ""
	}
	return it.Status.Detail.Manufacturer
}
