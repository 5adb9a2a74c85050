package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/mdplane/mdplane/webhooks"
)

// TestASlowReadIsRefusedWithinTheBudget: an API server that does not answer the webhook's reads
// makes the review a refusal once the budget is spent, saying so, well before the API server's own
// webhook timeout would.
func TestASlowReadIsRefusedWithinTheBudget(t *testing.T) {
	slow := interceptor.NewClient(reader(t, gpuType()).(client.WithWatch), interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, _ client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			<-ctx.Done() // an API server that never answers
			return ctx.Err()
		},
	})
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(deployment), &md))
	h := webhooks.Budgeted{Handler: &webhooks.Validator{Reader: slow}, Budget: 50 * time.Millisecond}
	answered := make(chan struct{})
	var rsp struct {
		allowed bool
		code    int32
		message string
	}
	go func() {
		defer close(answered)
		r := h.Handle(context.Background(), request(t, admissionv1.Create, md))
		rsp.allowed, rsp.code, rsp.message = r.Allowed, r.Result.Code, r.Result.Message
	}()
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("the review did not end with its budget")
	}
	assert.False(t, rsp.allowed, "fail closed")
	assert.EqualValues(t, http.StatusGatewayTimeout, rsp.code)
	assert.Contains(t, rsp.message, "took longer than 50ms")
	assert.Contains(t, rsp.message, "nothing is admitted unjudged")
}

func TestAnAnsweredReviewIsLeftAsItIs(t *testing.T) {
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(deployment), &md))
	h := webhooks.Budgeted{Handler: &webhooks.Validator{Reader: reader(t, gpuType())}, Budget: time.Minute}
	rsp := h.Handle(context.Background(), request(t, admissionv1.Create, md))
	assert.EqualValues(t, http.StatusUnprocessableEntity, rsp.Result.Code, "the rules' own refusal")
}
