package v1

// Labels and annotations of the spec's "Pod labels and annotations" table and of the
// ModelDeployment itself. The keys are contracts: Kueue, Services, routers and runbooks select on
// them.
const (
	LabelPodGroupName            = "kueue.x-k8s.io/pod-group-name"
	LabelQueueName               = "kueue.x-k8s.io/queue-name"
	AnnotationPodGroupTotalCount = "kueue.x-k8s.io/pod-group-total-count"
	AnnotationRoleHash           = "kueue.x-k8s.io/role-hash"
	AnnotationPodGroupServing    = "kueue.x-k8s.io/pod-group-serving"
	AnnotationRequiredTopology   = "kueue.x-k8s.io/podset-required-topology"

	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"

	LabelRoleKind              = "modeldeployment.gpustack.ai/role-kind"
	LabelPodOrdinal            = "modeldeployment.gpustack.ai/pod-ordinal"
	LabelMemberIndex           = "modeldeployment.gpustack.ai/member-index"
	AnnotationPodSpecHash      = "modeldeployment.gpustack.ai/pod-spec-hash"
	AnnotationRenderVersion    = "modeldeployment.gpustack.ai/render-version"
	AnnotationMinRenderVersion = "modeldeployment.gpustack.ai/min-render-version"

	// NameModelDeployment is the app.kubernetes.io/name value on every replica Pod.
	NameModelDeployment = "model-deployment"
)
