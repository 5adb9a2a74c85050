package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// ReadBudget is how long one admission review may spend reading the API server (the Settings, the
// InstanceTypes, the cache chain), well inside the webhook configurations' timeoutSeconds (10): a
// slow read is refused here, with a message saying what was read and what to do, rather than
// running into the API server's own timeout, whose message says neither.
const ReadBudget = 6 * time.Second

// Budgeted answers a review within a read budget: past it the handler's reads fail, and the review
// is refused (fail closed: nothing is admitted unjudged).
type Budgeted struct {
	Handler admission.Handler
	Budget  time.Duration
}

// Handle runs the handler with the budget as its deadline.
func (b Budgeted) Handle(ctx context.Context, req admission.Request) admission.Response {
	ctx, cancel := context.WithTimeout(ctx, b.Budget)
	defer cancel()
	resp := b.Handler.Handle(ctx, req)
	if !resp.Allowed && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why := ""
		if resp.Result != nil {
			why = resp.Result.Message
		}
		return admission.Errored(http.StatusGatewayTimeout, fmt.Errorf(
			"mdplane's admission reads of the API server took longer than %s (%s); nothing is admitted unjudged: apply again once the API server answers", b.Budget, why))
	}
	return resp
}
