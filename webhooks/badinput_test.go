package webhooks_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/mdplane/mdplane/webhooks"
)

// review wraps an object's raw JSON in an AdmissionReview of a ModelDeployment create.
func review(object string) string {
	return `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE",` +
		`"kind":{"group":"worker.gpustack.ai","version":"v1","kind":"ModelDeployment"},` +
		`"resource":{"group":"worker.gpustack.ai","version":"v1","resource":"modeldeployments"},"object":` + object + `}}`
}

var badReviews = []struct {
	rule, body, says string
}{
	{"a truncated review", review(deployment)[:200], "unexpected end of JSON input"},
	{"a body over the 7 MiB an admission server reads", review(`{"spec":{"model":{"name":"` + strings.Repeat("m", 8<<20) + `"}}}`), "request entity is too large"},
	{"deeply nested JSON", review(strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000)), "exceeded max depth"},
	{"an object of an unknown kind", review(`{"apiVersion":"example.com/v9","kind":"Nope","metadata":{"name":"a"},"spec":[1,2]}`), "cannot unmarshal array"},
	// The API server's decoder reads invalid UTF-8 in a string as U+FFFD; so does the webhook, which
	// then judges the object as usual.
	{"non-UTF-8 bytes in a string", review(strings.Replace(deployment, `"name":"m"`, "\"name\":\"\xff\xfe\"", 1)), `InstanceType "cpu" does not exist`},
}

// TestBadReviewsAnswerWithOneClearError: the ModelDeployment webhook, served as the API server calls
// it, answers a malformed or hostile review with one refusal (never a panic, never an admission of
// what it could not read), within its budget.
func TestBadReviewsAnswerWithOneClearError(t *testing.T) {
	server := &webhook.Admission{Handler: webhooks.Budgeted{Handler: &webhooks.Validator{Reader: reader(t, gpuType())}, Budget: webhooks.ReadBudget}}
	for _, in := range badReviews {
		t.Run(in.rule, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, webhooks.ValidatePath, bytes.NewBufferString(in.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			start := time.Now()
			server.ServeHTTP(rec, req)
			t.Logf("answered in %s", time.Since(start))
			got := admissionv1.AdmissionReview{}
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), rec.Body.String())
			require.NotNil(t, got.Response)
			assert.False(t, got.Response.Allowed, "what could not be read is not admitted")
			require.NotNil(t, got.Response.Result)
			assert.Contains(t, got.Response.Result.Message, in.says)
		})
	}
}
