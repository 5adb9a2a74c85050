package elastic

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The operation record ConfigMap's label and key: one record per deployment, the resize it asked.
const (
	LabelOperation = "gpustack.ai/elastic-operation"
	OperationKey   = "operation.json"
)

// OperationName is the ConfigMap holding a deployment's operation record.
func OperationName(deploymentUID string) string { return "elastic-resize-" + deploymentUID }

// The states of an operation mdplane moves through. A narrowing's states (Withdrawn, Released) are
// never entered: admission refuses a width decrease.
const (
	// StateRecorded: the command is written down and not (or no longer) in flight; it is sent next,
	// once any backoff has passed.
	StateRecorded = "Recorded"
	// StateCommandSent: the command left for the engine; its answer is not in. It is never sent
	// again: a record found in this state (the controller restarted mid-request, or the answer was
	// lost) waits for the engine to stop scaling and is then Abandoned, its width unprovable.
	StateCommandSent = "CommandSent"
	// StateCompleted: the engine answered 200 with its message; it runs the target width.
	StateCompleted = "Completed"
	// StateAbandoned: refused MaxAttempts times, or the answer was lost (AnswerLost).
	StateAbandoned = "Abandoned"
)

// Retry of a definite refusal: min(BaseBackoff × 2^(n−1), MaxBackoff) after refusal n, at most
// MaxAttempts commands. An unreachable master is tried again on the same curve, without limit: no
// command reached it.
const (
	MaxAttempts = 5
	BaseBackoff = 15 * time.Second
	MaxBackoff  = 4 * time.Minute
)

// Backoff is the wait after the n-th refusal (n ≥ 1).
func Backoff(n int) time.Duration {
	d := BaseBackoff
	for i := 1; i < n && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

// PodRef names a Pod by name and UID.
type PodRef struct {
	Name string `json:"name"`
	UID  string `json:"uid"`
}

// Widths are the data-parallel sizes an operation moves between.
type Widths struct {
	Old    int `json:"old"`
	Target int `json:"target"`
}

// Operation is the document under operation.json: what was asked of which master, and how far it
// got. It is written before every request to the engine.
type Operation struct {
	Name          string   `json:"name"`
	DeploymentUID string   `json:"deploymentUID"`
	Namespace     string   `json:"namespace"`
	Generation    int64    `json:"generation"`
	Width         Widths   `json:"width"`
	Workers       []PodRef `json:"workers"`
	Master        PodRef   `json:"master"`
	Head          PodRef   `json:"head"`
	Members       []PodRef `json:"members"`
	Release       string   `json:"release"`
	State         string   `json:"state"`
	// CommandIntent is the body sent (or to be sent) to /scale_elastic_ep.
	CommandIntent ScaleCommand `json:"commandIntent"`
	// CommandSent: the current command left for the engine.
	CommandSent bool `json:"commandSent"`
	// ResourceVersion is the deployment's when the operation was recorded.
	ResourceVersion string `json:"resourceVersion"`
	// Attempts counts the engine's definite refusals; Unreachable the tries that reached no engine.
	Attempts    int `json:"attempts"`
	Unreachable int `json:"unreachable"`
	// LastError is the engine's last refusal, or why it was not reached or its answer lost.
	LastError string `json:"lastError,omitempty"`
	// LastAttemptTime is when the last command was sent; NextAttemptTime when a refused or
	// unreachable one may be sent again.
	LastAttemptTime *metav1.Time `json:"lastAttemptTime,omitempty"`
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
	// AnswerLost: the command may have been applied and its answer is unknown.
	AnswerLost bool `json:"answerLost,omitempty"`
	// Message is the engine's answer to the applied command.
	Message string `json:"message,omitempty"`
}

// InFlight reports an operation not yet finished.
func (o *Operation) InFlight() bool {
	return o.State == StateRecorded || o.State == StateCommandSent
}

// EngineWidth is the data-parallel size master runs according to the record, if it tells: the
// target once applied, the old width once refused for good; nothing while in flight, when the
// answer was lost, or when the record is of another master (a new master boots at its boot width).
func (o *Operation) EngineWidth(masterUID string) (int, bool) {
	if o == nil || o.Master.UID != masterUID {
		return 0, false
	}
	switch {
	case o.State == StateCompleted:
		return o.Width.Target, true
	case o.State == StateAbandoned && !o.AnswerLost:
		return o.Width.Old, true
	}
	return 0, false
}

// OperationConfigMap is the ConfigMap elastic-resize-<md UID> holding doc, controlled by the
// deployment.
func OperationConfigMap(md *workerv1.ModelDeployment, doc string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: md.Namespace, Name: OperationName(string(md.UID)),
			Labels: map[string]string{LabelOperation: "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.ModelDeploymentKind,
				Name: md.Name, UID: md.UID, Controller: ptr.To(true)}},
		},
		Data: map[string]string{OperationKey: doc},
	}
}
