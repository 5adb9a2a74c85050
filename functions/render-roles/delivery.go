package renderroles

import (
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/xfn"
)

// Model artifact delivery: how a ModelArtifact's weights reach
// a role's Pods.

// DeliveryMode is how the weights reach the Pods: the status.model.delivery enum.
type DeliveryMode string

// The delivery modes.
const (
	DeliveryPVC    DeliveryMode = "PVC"
	DeliveryEngine DeliveryMode = "Engine"
	DeliveryNode   DeliveryMode = "Node"
	DeliveryImage  DeliveryMode = "Image"
)

// Delivery rendering constants.
const (
	ModelPath        = "/var/lib/gpustack/model"
	ModelCachePath   = "/var/lib/gpustack/model-cache"
	modelCacheVolume = "gpustack-model-cache"
	revisionFlag     = "--revision"
	tokenKey         = "token"
	// ModelCSIDriver is the CSIDriver of Node delivery.
	ModelCSIDriver = "model.csi.gpustack.ai"
	noProvisioner  = "kubernetes.io/no-provisioner"
)

// The WeightsReady reasons the render produces. The blocking ones are also the
// rollout-held reason's detail.
const (
	WeightsNotApplicable    = "NotApplicable"
	ArtifactNotFound        = "ArtifactNotFound"
	ArtifactNotResolved     = "ArtifactNotResolved"
	ClaimNotBound           = "ClaimNotBound"
	AccessModeConflict      = "AccessModeConflict"
	NodeDeliveryUnavailable = "NodeDeliveryUnavailable"
	FilterNeedsNodeDelivery = "FilterNeedsNodeDelivery"
	AnchorNeedsNodeDelivery = "AnchorNeedsNodeDelivery"
	WeightsDownloading      = "Downloading"
	WeightsNotMounted       = "WeightsNotMounted"
	WeightsDownloaded       = "Downloaded"
	WeightsMounted          = "Mounted"
	weightsConditionType    = "WeightsReady"
)

// RolloutHeldByWeights is the reason a role's new Pods wait while its weights cannot be delivered:
// written on the ModelRole's rollout-held annotation (a reason, a colon, a message), it stops the
// rollout controller from replacing outdated replicas and from filling empty slots.
const RolloutHeldByWeights = workerv1.ReasonRolloutHeldByWeights

// HeldByWeights reports whether a rollout-held annotation value is a weights hold.
func HeldByWeights(held string) bool {
	return workerv1.RolloutHeldBy(held, RolloutHeldByWeights)
}

// DeliverySettings are the worker Settings delivery reads, from the mdplane-settings
// EnvironmentConfig (deliverySettingsOf).
type DeliverySettings struct {
	// Mode is Engine or Node; it governs hub sources only.
	Mode DeliveryMode
	// HuggingFaceEndpoint is HF_ENDPOINT under Engine delivery.
	HuggingFaceEndpoint string
	// ModelScopeEndpoint's bare host is MODELSCOPE_DOMAIN under Engine delivery.
	ModelScopeEndpoint string
	// HTTPSProxy and NoProxy are defaulted HTTPS_PROXY and NO_PROXY under Engine delivery, when set.
	HTTPSProxy, NoProxy string
}

// DefaultDeliverySettings are what delivery reads of the Settings' defaults.
func DefaultDeliverySettings() DeliverySettings {
	return deliverySettingsOf(settings.Defaults())
}

// deliverySettingsOf is what delivery reads of the worker Settings.
func deliverySettingsOf(s settings.Settings) DeliverySettings {
	return DeliverySettings{Mode: DeliveryMode(s.ArtifactDeliveryMode), HuggingFaceEndpoint: s.ArtifactHuggingFaceEndpoint,
		ModelScopeEndpoint: s.ArtifactModelScopeEndpoint, HTTPSProxy: s.ArtifactHTTPSProxy, NoProxy: s.ArtifactNoProxy}
}

// Delivery is how a deployment's artifact reaches its Pods, decided once per deployment.
type Delivery struct {
	// Artifact is the ModelArtifact, nil when it does not exist.
	Artifact *workerv1.ModelArtifact
	// Name is spec.model.artifactRef.name.
	Name string
	// Mode is the delivery, "" before the artifact is resolved.
	Mode DeliveryMode
	// Blocked is the reason no new Pod may be created, "" when none; Message says why.
	Blocked, Message string
	// CSIDriver is true when the Node delivery's CSIDriver exists: only then is its volume rendered.
	CSIDriver bool
	// NodeAffinity is the bound PV's required node affinity, applied at Pod creation, outside the
	// configuration digest.
	NodeAffinity *corev1.NodeSelector
	// Settings are the Settings the render reads.
	Settings DeliverySettings
}

// DeliveryObjects are the cluster objects the delivery is decided from, nil for one that does not
// exist (or that the delivery does not read).
type DeliveryObjects struct {
	Artifact     *workerv1.ModelArtifact
	Claim        *corev1.PersistentVolumeClaim
	Volume       *corev1.PersistentVolume
	StorageClass *storagev1.StorageClass
	// CSIDriver is true when the Node delivery's CSIDriver exists.
	CSIDriver bool
}

// readDeliveryInputs requires the objects the delivery needs beyond the artifact: the claim of a
// PVC source, its bound PV or its StorageClass; the CSIDriver under Node delivery.
func readDeliveryInputs(r *xfn.Requirements, md *workerv1.ModelDeployment, in *DeliveryObjects, settings DeliverySettings) error {
	a := in.Artifact
	if a == nil || a.Status.Resolved == nil {
		return nil
	}
	src := a.Spec.Source
	switch {
	case src.PersistentVolumeClaim != nil:
		obj, err := r.ByName("artifact-claim", "v1", "PersistentVolumeClaim", md.Namespace, src.PersistentVolumeClaim.ClaimName)
		if err := decodeInto(obj, err, &in.Claim); err != nil || in.Claim == nil {
			return err
		}
		if in.Claim.Status.Phase == corev1.ClaimBound && in.Claim.Spec.VolumeName != "" {
			obj, err := r.ByName("artifact-volume", "v1", "PersistentVolume", "", in.Claim.Spec.VolumeName)
			return decodeInto(obj, err, &in.Volume)
		}
		if sc := ptr.Deref(in.Claim.Spec.StorageClassName, ""); sc != "" {
			obj, err := r.ByName("artifact-storageclass", "storage.k8s.io/v1", "StorageClass", "", sc)
			return decodeInto(obj, err, &in.StorageClass)
		}
	case src.HuggingFace != nil || src.ModelScope != nil:
		if settings.Mode != DeliveryNode {
			return nil
		}
		obj, err := r.ByName("csidriver", "storage.k8s.io/v1", "CSIDriver", "", ModelCSIDriver)
		if err != nil {
			return err
		}
		in.CSIDriver = obj != nil
	}
	return nil
}

// ChooseDelivery decides the delivery; nil when the deployment names no artifact. A claim
// source under more than one Pod (Σ replicas×size over every role, take-over roles included) needs
// a shared access mode.
func ChooseDelivery(md *workerv1.ModelDeployment, in DeliveryObjects, settings DeliverySettings) *Delivery {
	pods := podCount(md)
	ref := md.Spec.Model.ArtifactRef
	if ref == nil {
		return nil
	}
	d := &Delivery{Artifact: in.Artifact, Name: ref.Name, Settings: settings}
	a := in.Artifact
	if a == nil {
		return d.block(ArtifactNotFound, "ModelArtifact %s/%s does not exist; no Pod is created until it does, and running replicas are left alone", md.Namespace, ref.Name)
	}
	if a.Status.Resolved == nil {
		return d.block(ArtifactNotResolved, "ModelArtifact %s has not resolved yet; no Pod is created until it does, and running replicas are left alone", ref.Name)
	}
	src := a.Spec.Source
	switch {
	case src.PersistentVolumeClaim != nil:
		d.Mode = DeliveryPVC
	case src.Image != nil:
		d.Mode = DeliveryImage
	case settings.Mode == DeliveryNode:
		d.Mode = DeliveryNode
		d.CSIDriver = in.CSIDriver
	default:
		d.Mode = DeliveryEngine
	}
	if c := apimeta.FindStatusCondition(a.Status.Conditions, "Resolved"); c == nil || c.Status != metav1.ConditionTrue {
		why := "its Resolved condition is not True"
		if c != nil {
			why = fmt.Sprintf("it is not resolved (%s: %s)", c.Reason, c.Message)
		}
		return d.block(ArtifactNotResolved, "ModelArtifact %s: %s; running replicas are left alone", ref.Name, why)
	}
	switch d.Mode {
	case DeliveryPVC:
		return d.placeClaim(in, src.PersistentVolumeClaim.ClaimName, pods)
	case DeliveryNode:
		if !in.CSIDriver {
			return d.block(NodeDeliveryUnavailable, "the delivery mode is Node but CSIDriver %s does not exist; deploy the model plugin or set the delivery mode to Engine", ModelCSIDriver)
		}
	case DeliveryEngine:
		if len(a.Spec.AllowPatterns) > 0 || len(a.Spec.IgnorePatterns) > 0 {
			return d.block(FilterNeedsNodeDelivery, "ModelArtifact %s filters files (allowPatterns/ignorePatterns), which only Node delivery applies; the engine would download the whole repository", ref.Name)
		}
		if a.Spec.ExpectedDigest != "" {
			return d.block(AnchorNeedsNodeDelivery, "ModelArtifact %s anchors its files to expectedDigest, which only Node delivery verifies", ref.Name)
		}
	}
	return d
}

// placeClaim checks a claim source can be mounted by every Pod and captures its PV's node affinity.
func (d *Delivery) placeClaim(in DeliveryObjects, claimName string, pods int64) *Delivery {
	c := in.Claim
	if c == nil {
		return d.block(ArtifactNotResolved, "PersistentVolumeClaim %s of ModelArtifact %s does not exist", claimName, d.Name)
	}
	if pods > 1 && !shareable(c.Spec.AccessModes) {
		return d.block(AccessModeConflict, "PersistentVolumeClaim %s is not ReadOnlyMany or ReadWriteMany, and the deployment runs %d Pods", claimName, pods)
	}
	switch {
	case c.Status.Phase == corev1.ClaimBound:
		if v := in.Volume; v != nil && v.Spec.NodeAffinity != nil && v.Spec.NodeAffinity.Required != nil {
			d.NodeAffinity = v.Spec.NodeAffinity.Required.DeepCopy()
		}
		return d
	case c.Status.Phase == corev1.ClaimPending && in.StorageClass != nil &&
		ptr.Deref(in.StorageClass.VolumeBindingMode, "") == storagev1.VolumeBindingWaitForFirstConsumer &&
		in.StorageClass.Provisioner != noProvisioner:
		return d // the first Pod binds it
	}
	return d.block(ClaimNotBound, "PersistentVolumeClaim %s is %s and no Pod would bind it", claimName, phaseOf(c))
}

func phaseOf(c *corev1.PersistentVolumeClaim) string {
	if c.Status.Phase == "" {
		return "not bound"
	}
	return string(c.Status.Phase)
}

func shareable(modes []corev1.PersistentVolumeAccessMode) bool {
	for _, m := range modes {
		if m == corev1.ReadOnlyMany || m == corev1.ReadWriteMany {
			return true
		}
	}
	return false
}

func (d *Delivery) block(reason, format string, args ...any) *Delivery {
	d.Blocked, d.Message = reason, fmt.Sprintf(format, args...)
	return d
}

// Held is the rollout-held annotation value of a blocked delivery, "" when it is not blocked.
func (d *Delivery) Held() string {
	if d == nil || d.Blocked == "" {
		return ""
	}
	return RolloutHeldByWeights + ": " + d.Blocked + ": " + d.Message
}

// podCount is the deployment's Pods, Σ replicas×size over every role, take-over roles included.
func podCount(md *workerv1.ModelDeployment) int64 {
	var n int64
	for _, role := range md.Spec.Roles {
		role = role.WithDefaults()
		n += int64(role.Replicas) * int64(role.Size)
	}
	return n
}

// resolved is the artifact's resolution; nil before it.
func (d *Delivery) resolved() *workerv1.ResolvedArtifact {
	if d == nil || d.Artifact == nil {
		return nil
	}
	return d.Artifact.Status.Resolved
}

// ModelStatus is status.model: nil without an artifact and before its first resolution.
func (d *Delivery) ModelStatus() *workerv1.ModelStatus {
	r := d.resolved()
	if r == nil || d.Mode == "" {
		return nil
	}
	return &workerv1.ModelStatus{Artifact: d.Name, Revision: r.Revision, ManifestDigest: r.ManifestDigest, Delivery: string(d.Mode)}
}

// cacheSize is S = sizeBytes + max(sizeBytes/10, 1Gi), BinarySI.
func cacheSize(sizeBytes int64) resource.Quantity {
	extra := max(sizeBytes/10, int64(1)<<30)
	return *resource.NewQuantity(sizeBytes+extra, resource.BinarySI)
}

// modelArg is <MODEL> of the base command: the mount path, the repository under Engine delivery,
// else spec.model.name.
func (d *Delivery) modelArg(served string) string {
	if d == nil || d.resolved() == nil {
		return served
	}
	switch d.Mode {
	case DeliveryPVC, DeliveryNode, DeliveryImage:
		return ModelPath
	case DeliveryEngine:
		if hub := d.hub(); hub != nil {
			return hub.Repository
		}
	}
	return served
}

// hub is the artifact's hub source, nil for a claim or an image.
func (d *Delivery) hub() *workerv1.HubSource {
	if d.Artifact == nil {
		return nil
	}
	if s := d.Artifact.Spec.Source; s.HuggingFace != nil {
		return s.HuggingFace
	} else if s.ModelScope != nil {
		return s.ModelScope
	}
	return nil
}

// engineArgs are the arguments Engine delivery appends right after the base command.
func (d *Delivery) engineArgs() []string {
	r := d.resolved()
	if r == nil || d.Mode != DeliveryEngine || r.Revision == "" {
		return nil
	}
	return []string{revisionFlag, r.Revision}
}

// volume is the delivery's volume and the main container's mount; ok is false when it renders none.
// A take-over role gets the weights mount only (no engine cache).
func (d *Delivery) volume(takesOver bool) (corev1.Volume, corev1.VolumeMount, bool) {
	r := d.resolved()
	if r == nil {
		return corev1.Volume{}, corev1.VolumeMount{}, false
	}
	a := d.Artifact
	weights := corev1.VolumeMount{Name: naming.ModelVolume, MountPath: ModelPath, ReadOnly: true}
	switch d.Mode {
	case DeliveryPVC:
		c := a.Spec.Source.PersistentVolumeClaim
		weights.SubPath = c.Path
		return corev1.Volume{Name: naming.ModelVolume, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: c.ClaimName, ReadOnly: true,
		}}}, weights, true
	case DeliveryImage:
		return corev1.Volume{Name: naming.ModelVolume, VolumeSource: corev1.VolumeSource{Image: &corev1.ImageVolumeSource{
			Reference: a.Spec.Source.Image.Reference,
		}}}, weights, true
	case DeliveryNode:
		if !d.CSIDriver {
			return corev1.Volume{}, corev1.VolumeMount{}, false
		}
		csi := &corev1.CSIVolumeSource{Driver: ModelCSIDriver, ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{
			"artifact": a.Name, "artifactUID": string(a.UID), "manifestDigest": r.ManifestDigest,
		}}
		if hub := d.hub(); hub != nil && hub.SecretRef != nil {
			csi.NodePublishSecretRef = &corev1.LocalObjectReference{Name: hub.SecretRef.Name}
		}
		return corev1.Volume{Name: naming.ModelVolume, VolumeSource: corev1.VolumeSource{CSI: csi}}, weights, true
	case DeliveryEngine:
		if takesOver {
			return corev1.Volume{}, corev1.VolumeMount{}, false
		}
		size := cacheSize(r.SizeBytes)
		return corev1.Volume{Name: modelCacheVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &size}}},
			corev1.VolumeMount{Name: modelCacheVolume, MountPath: ModelCachePath}, true
	}
	return corev1.Volume{}, corev1.VolumeMount{}, false
}

// ownedEnv are the variables Engine delivery owns on the main container.
func (d *Delivery) ownedEnv(e workerv1.Engine) []corev1.EnvVar {
	if d.resolved() == nil || d.Mode != DeliveryEngine {
		return nil
	}
	token := func(name string, ref *workerv1.LocalReference) []corev1.EnvVar {
		if ref == nil {
			return nil
		}
		return []corev1.EnvVar{{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: ref.Name}, Key: tokenKey,
		}}}}
	}
	s := d.Artifact.Spec.Source
	switch {
	case s.HuggingFace != nil:
		env := []corev1.EnvVar{{Name: "HF_HOME", Value: ModelCachePath}, {Name: "HF_ENDPOINT", Value: d.Settings.HuggingFaceEndpoint}}
		return append(env, token("HF_TOKEN", s.HuggingFace.SecretRef)...)
	case s.ModelScope != nil:
		env := []corev1.EnvVar{{Name: "MODELSCOPE_CACHE", Value: ModelCachePath}, {Name: "MODELSCOPE_DOMAIN", Value: bareHost(d.Settings.ModelScopeEndpoint)}}
		env = append(env, token("MODELSCOPE_API_TOKEN", s.ModelScope.SecretRef)...)
		use := "VLLM_USE_MODELSCOPE"
		if e == workerv1.EngineSGLang {
			use = "SGLANG_USE_MODELSCOPE"
		}
		return append(env, corev1.EnvVar{Name: use, Value: "true"})
	}
	return nil
}

// defaultedEnv are the proxy variables Engine delivery gives the main container unless the role
// sets them.
func (d *Delivery) defaultedEnv() []corev1.EnvVar {
	if d.resolved() == nil || d.Mode != DeliveryEngine {
		return nil
	}
	var env []corev1.EnvVar
	if d.Settings.HTTPSProxy != "" {
		env = append(env, corev1.EnvVar{Name: "HTTPS_PROXY", Value: d.Settings.HTTPSProxy})
	}
	if d.Settings.NoProxy != "" {
		env = append(env, corev1.EnvVar{Name: "NO_PROXY", Value: d.Settings.NoProxy})
	}
	return env
}

// bareHost is an endpoint's host: https://www.modelscope.cn ⇒ www.modelscope.cn.
func bareHost(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		return u.Host
	}
	return strings.TrimSuffix(endpoint, "/")
}

// growEphemeralLimit raises the main container's ephemeral-storage limit by the engine cache's size
// under Engine delivery; a container without a limit keeps none.
func (d *Delivery) growEphemeralLimit(c *corev1.Container) {
	r := d.resolved()
	if r == nil || d.Mode != DeliveryEngine {
		return
	}
	limit, ok := c.Resources.Limits[corev1.ResourceEphemeralStorage]
	if !ok {
		return
	}
	limit.Add(cacheSize(r.SizeBytes))
	c.Resources.Limits[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(limit.Value(), resource.BinarySI)
}

// digestKey is what of the delivery the configuration digest covers: every input of the rendered
// template (the mode, the Settings Engine delivery renders, the CSI volume's presence, the resolved
// revision, size and UID). The PV's node affinity is applied at Pod creation and is left out.
type digestKey struct {
	Mode       DeliveryMode `json:"mode,omitempty"`
	Revision   string       `json:"revision,omitempty"`
	SizeBytes  int64        `json:"sizeBytes,omitempty"`
	UID        string       `json:"uid,omitempty"`
	CSIDriver  bool         `json:"csiDriver,omitempty"`
	Unresolved bool         `json:"unresolved,omitempty"`
}

func (d *Delivery) digestKey() *digestKey {
	if d == nil {
		return nil
	}
	r := d.resolved()
	if r == nil {
		return &digestKey{Unresolved: true}
	}
	k := &digestKey{Mode: d.Mode, Revision: r.Revision, SizeBytes: r.SizeBytes, CSIDriver: d.CSIDriver}
	// The UID is the CSI volume's artifactUID and, for a claim or an image under a KV cache, the
	// cache prefix kv-cache renders.
	k.UID = string(d.Artifact.UID)
	// The endpoints and proxies Engine delivery writes are Settings: under the render version, so
	// they reach new and replaced Pods (the revision is keyed by the Settings) without rolling.
	// The delivery mode is the one Setting that rolls (through Mode above).
	return k
}

// WeightsCondition is the WeightsReady condition the render can tell: NotApplicable without
// an artifact, the blocking reason, else from the live Pods.
func WeightsCondition(d *Delivery, pods v1alpha1.MemberCounts) Condition {
	switch {
	case d == nil:
		return Condition{"True", WeightsNotApplicable, "the deployment names no model artifact"}
	case d.Blocked != "":
		return Condition{"False", d.Blocked, d.Message}
	case d.Mode == DeliveryEngine && pods.MainReady < pods.Live:
		return Condition{"False", WeightsDownloading, fmt.Sprintf("%d of %d Pods' engines are not Ready: they download the weights of %s", pods.Live-pods.MainReady, pods.Live, d.Name)}
	case d.Mode == DeliveryEngine:
		return Condition{"True", WeightsDownloaded, fmt.Sprintf("every Pod's engine has the weights of %s", d.Name)}
	case pods.Started < pods.Live:
		return Condition{"False", WeightsNotMounted, fmt.Sprintf("%d of %d Pods have not mounted the weights of %s", pods.Live-pods.Started, pods.Live, d.Name)}
	}
	return Condition{"True", WeightsMounted, fmt.Sprintf("every Pod has mounted the weights of %s", d.Name)}
}
