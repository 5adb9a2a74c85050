package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/webhooks"
)

// TestValidatorReadsThePriorityClass: a new deployment labelled with a Kueue priority class is
// admitted only while that WorkloadPriorityClass exists; without the label nothing is read.
func TestValidatorReadsThePriorityClass(t *testing.T) {
	ctx := context.Background()
	labelled := func(pc string) map[string]any {
		var md map[string]any
		require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a"},
 "spec":{"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},"roles":[{"name":"server","instanceType":"h100"}]}}`), &md))
		if pc != "" {
			md["metadata"].(map[string]any)["labels"] = map[string]any{workerv1.LabelPriorityClass: pc}
		}
		return md
	}
	withKueue := func(objs ...client.Object) webhooks.Reader {
		s := runtime.NewScheme()
		require.NoError(t, workerv1.AddToScheme(s))
		require.NoError(t, kueue.AddToScheme(s))
		return fake.NewClientBuilder().WithScheme(s).WithObjects(append(objs, gpuType())...).Build()
	}
	high := &kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "serving-high"}, Value: 1000}

	rsp := (&webhooks.Validator{Reader: withKueue(high)}).Handle(ctx, request(t, admissionv1.Create, labelled("serving-high")))
	assert.True(t, rsp.Allowed, "%v", rsp.Result)

	rsp = (&webhooks.Validator{Reader: withKueue(high)}).Handle(ctx, request(t, admissionv1.Create, labelled("serving-hgh")))
	require.False(t, rsp.Allowed)
	assert.Contains(t, rsp.Result.Message, `metadata.labels[kueue.x-k8s.io/priority-class]: Invalid value: "serving-hgh": no Kueue WorkloadPriorityClass "serving-hgh" exists`)

	rsp = (&webhooks.Validator{Reader: reader(t, gpuType())}).Handle(ctx, request(t, admissionv1.Create, labelled("serving-high")))
	require.False(t, rsp.Allowed, "a cluster that serves no WorkloadPriorityClass has none")
	assert.Contains(t, rsp.Result.Message, `no Kueue WorkloadPriorityClass "serving-high" exists`)

	rsp = (&webhooks.Validator{Reader: reader(t, gpuType())}).Handle(ctx, request(t, admissionv1.Create, labelled("")))
	assert.True(t, rsp.Allowed, "near miss: without the label nothing is read: %v", rsp.Result)
}
