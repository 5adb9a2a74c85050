package elastic

import (
	"fmt"
	"strings"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The deployment's ElasticResize condition, written only on a deployment with an elastic role.
const (
	ConditionResize = "ElasticResize"
	// ReasonNoRefusal: no command stands refused; the message says what is in progress or done.
	ReasonNoRefusal = "NoRefusal"
	// ReasonScaleRefused: the engine refused every attempt; the message carries its last refusal.
	ReasonScaleRefused = "ScaleRefused"
	// ReasonWorldUnprovable: a command's answer was lost, so the width the engine runs is unknown.
	ReasonWorldUnprovable = "WorldUnprovable"
	// NoRefusalMessage opens every NoRefusal message.
	NoRefusalMessage = "no elastic scale command stands refused"
)

// ResizeCondition is the ElasticResize condition of a deployment whose operation record is rec
// (nil without one).
func ResizeCondition(rec *Operation) xpv2.Condition {
	c := xpv2.Condition{Type: ConditionResize, Status: corev1.ConditionTrue, Reason: ReasonNoRefusal, Message: NoRefusalMessage}
	if rec == nil {
		return c
	}
	from := fmt.Sprintf("from %d to %d data-parallel engines", rec.Width.Old, rec.Width.Target)
	again := fmt.Sprintf("change the width, or delete ConfigMap %s to ask again", OperationName(rec.DeploymentUID))
	switch {
	case rec.State == StateAbandoned && rec.AnswerLost:
		c.Status, c.Reason = corev1.ConditionUnknown, ReasonWorldUnprovable
		c.Message = fmt.Sprintf("the resize %s was sent and %s; the engine no longer scales, and whether it applied the resize is unknown: it is not sent again; %s",
			from, rec.LastError, again)
	case rec.State == StateAbandoned:
		c.Status, c.Reason = corev1.ConditionFalse, ReasonScaleRefused
		c.Message = fmt.Sprintf("the engine refused the resize %s %d times; its last refusal: %s; %s", from, rec.Attempts, rec.LastError, again)
	case rec.State == StateCompleted:
		c.Message += fmt.Sprintf("; the engine resized %s: %s", from, rec.Message)
	case rec.State == StateCommandSent:
		c.Message += fmt.Sprintf("; resizing %s: the command is sent", from)
	case rec.NextAttemptTime != nil && strings.HasPrefix(rec.LastError, unreachablePrefix):
		c.Message += fmt.Sprintf("; resizing %s: %s; trying again at %s", from, rec.LastError, rec.NextAttemptTime.UTC().Format(time.RFC3339))
	case rec.NextAttemptTime != nil:
		c.Message += fmt.Sprintf("; resizing %s: the engine refused attempt %d of %d: %s; asking again at %s",
			from, rec.Attempts, MaxAttempts, rec.LastError, rec.NextAttemptTime.UTC().Format(time.RFC3339))
	default:
		c.Message += fmt.Sprintf("; resizing %s: the command is recorded", from)
	}
	return c
}

// sameCondition reports whether a stored condition says what c says.
func sameCondition(have xpv2.Condition, c xpv2.Condition) bool {
	return have.Status == c.Status && have.Reason == c.Reason && have.Message == c.Message
}

// stamped is c as written now.
func stamped(c xpv2.Condition, generation int64) xpv2.Condition {
	c.LastTransitionTime, c.ObservedGeneration = metav1.Now(), generation
	return c
}
