package webhooks_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/webhooks"
)

// A fake client stands in for the API server here; the e2e suite proves the webhooks on a real one.
func reader(t *testing.T, objs ...client.Object) client.Reader {
	s := runtime.NewScheme()
	require.NoError(t, workerv1.AddToScheme(s))
	b := fake.NewClientBuilder().WithScheme(s)
	for _, o := range objs {
		b = b.WithObjects(o)
	}
	return b.Build()
}

func request(t *testing.T, op admissionv1.Operation, md any) admission.Request {
	raw, err := json.Marshal(md)
	require.NoError(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Object: runtime.RawExtension{Raw: raw}}}
}

const deployment = `{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a"},
 "spec":{"crossplane":{"compositionRef":{"name":"x"}},"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},
  "roles":[{"name":"server","instanceType":"h100"},{"name":"cpu","instanceType":"cpu","resources":{}}]}}`

func gpuType() *workerv1.InstanceType {
	return &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: workerv1.InstanceTypeSpec{Acceleratable: true}}
}

func TestValidatorAnswersInvalidWithTheFieldErrors(t *testing.T) {
	v := &webhooks.Validator{Reader: reader(t, gpuType())}
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(deployment), &md))
	rsp := v.Handle(context.Background(), request(t, admissionv1.Create, md))
	require.False(t, rsp.Allowed)
	assert.EqualValues(t, http.StatusUnprocessableEntity, rsp.Result.Code)
	assert.Equal(t, metav1.StatusReasonInvalid, rsp.Result.Reason)
	require.NotNil(t, rsp.Result.Details)
	require.Len(t, rsp.Result.Details.Causes, 1)
	assert.Equal(t, "spec.roles[1].instanceType", rsp.Result.Details.Causes[0].Field)
	assert.Contains(t, rsp.Result.Message, `InstanceType "cpu" does not exist`)
}

func TestDefaulterPatchesOnlyTheAcceleratorCount(t *testing.T) {
	d := &webhooks.Defaulter{Reader: reader(t, gpuType())}
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(deployment), &md))
	rsp := d.Handle(context.Background(), request(t, admissionv1.Create, md))
	require.True(t, rsp.Allowed)
	require.Len(t, rsp.Patches, 1, "spec.crossplane and every other field are left alone")
	assert.Equal(t, "add", rsp.Patches[0].Operation)
	assert.Equal(t, "/spec/roles/0/resources", rsp.Patches[0].Path)
	assert.Equal(t, map[string]any{"accelerator": "1"}, rsp.Patches[0].Value)
}

// unreadable fails every read: a review that reads is refused.
type unreadable struct{}

func (unreadable) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("the API server is not answering")
}

// A deployment whose every role declares its card count has nothing to default, and the mutating
// webhook answers it without reading an InstanceType; one role left to the default is read (above).
func TestEveryCountDeclaredIsAnsweredWithoutARead(t *testing.T) {
	const declared = `{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a"},
 "spec":{"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},
  "roles":[{"name":"server","instanceType":"h100","resources":{"accelerator":"2"}},{"name":"sliced","instanceType":"h100","resources":{"acceleratorSlicedMemoryPercentage":50}}]}}`
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(declared), &md))
	rsp := (&webhooks.Defaulter{Reader: unreadable{}}).Handle(context.Background(), request(t, admissionv1.Create, md))
	assert.True(t, rsp.Allowed, "%+v", rsp.Result)
	assert.Empty(t, rsp.Patches)

	md["spec"].(map[string]any)["roles"].([]any)[1].(map[string]any)["resources"] = map[string]any{}
	rsp = (&webhooks.Defaulter{Reader: unreadable{}}).Handle(context.Background(), request(t, admissionv1.Create, md))
	assert.False(t, rsp.Allowed, "a role left to the default reads its InstanceType")
}

// On an Elastic EP role the count defaulted is one card per tensor-parallel rank, and the validator
// reads the head type: a head type that is acceleratable is refused.
func TestElasticRoleDefaultsItsCardsToTheTensorParallelSize(t *testing.T) {
	const elastic = `{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a"},
 "spec":{"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},
  "roles":[{"name":"server","instanceType":"h100","extraArgs":["-tp","4"],"elasticEp":{"width":2,"headInstanceType":"h100"}}]}}`
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(elastic), &md))
	rsp := (&webhooks.Defaulter{Reader: reader(t, gpuType())}).Handle(context.Background(), request(t, admissionv1.Create, md))
	require.True(t, rsp.Allowed)
	require.Len(t, rsp.Patches, 1)
	assert.Equal(t, map[string]any{"accelerator": "4"}, rsp.Patches[0].Value)
	rsp = (&webhooks.Validator{Reader: reader(t, gpuType())}).Handle(context.Background(), request(t, admissionv1.Create, md))
	require.False(t, rsp.Allowed)
	assert.Contains(t, rsp.Result.Message, "the Ray head runs CPU-only")
}

// Crossplane releases a deleted deployment by an update that only drops its finalizer; the stored
// spec, whatever it holds, must not refuse it, and no InstanceType is read for it.
func TestValidatorAdmitsTheFinalizerReleaseOfADeploymentBeingDeleted(t *testing.T) {
	v := &webhooks.Validator{Reader: reader(t)}
	stored := `{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a","deletionTimestamp":"2026-01-01T00:00:00Z","finalizers":%s},
 "spec":{"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},"kvCache":{"poolRef":{"name":"b"}},
  "roles":[{"name":"server","instanceType":"gone","extraArgs":["--kv-cache-dtype=fp8"]%s}]}}`
	review := func(newFinalizers, newRole string) admission.Response {
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
			Object:    runtime.RawExtension{Raw: []byte(fmt.Sprintf(stored, newFinalizers, newRole))},
			OldObject: runtime.RawExtension{Raw: []byte(fmt.Sprintf(stored, `["finalizer.apiextensions.crossplane.io"]`, ""))}}}
		return v.Handle(context.Background(), req)
	}
	assert.True(t, review(`[]`, "").Allowed, "the finalizer release is admitted")
	rsp := review(`[]`, `,"replicas":2`)
	require.False(t, rsp.Allowed, "an edit of the spec in the deletion window is judged")
	assert.Contains(t, rsp.Result.Message, "carries the KVCachePoolBinding's dtype")
}

// The validator reads the Binding, pool and backend a deployment names and refuses a new binding to
// a backend whose groups mix transports; the near miss, one transport, is admitted.
func TestValidatorReadsTheCacheChain(t *testing.T) {
	cached := `{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a"},
 "spec":{"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},"kvCache":{"poolRef":{"name":"team"}},
  "roles":[{"name":"server","instanceType":"h100"}]}}`
	binding := &workerv1.KVCachePoolBinding{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: "team-a"},
		Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: "dram"}}}
	pool := &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: "dram"}, Spec: workerv1.KVCachePoolSpec{Backends: []string{"mooncake"}}}
	backend := func(second string) *workerv1.KVCacheBackend {
		return &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: "mooncake"}, Spec: workerv1.KVCacheBackendSpec{
			Transport: workerv1.KVCacheBackendTransport{Protocol: workerv1.TransportTCP},
			Connection: workerv1.KVCacheBackendConnection{Managed: &workerv1.KVCacheBackendManaged{Members: []workerv1.KVCacheBackendMember{
				{}, {Transport: &workerv1.KVCacheBackendMemberTransport{Protocol: second}},
			}}},
		}}
	}
	review := func(objs ...client.Object) admission.Response {
		v := &webhooks.Validator{Reader: reader(t, objs...)}
		var md map[string]any
		require.NoError(t, json.Unmarshal([]byte(cached), &md))
		return v.Handle(context.Background(), request(t, admissionv1.Create, md))
	}
	rsp := review(gpuType(), binding, pool, backend(workerv1.TransportRDMA))
	require.False(t, rsp.Allowed)
	require.NotNil(t, rsp.Result.Details)
	assert.Equal(t, "spec.kvCache.poolRef.name", rsp.Result.Details.Causes[0].Field)
	assert.Contains(t, rsp.Result.Message, "TransportUnsupported")
	assert.True(t, review(gpuType(), binding, pool, backend(workerv1.TransportTCP)).Allowed, "one transport is admitted")
	assert.True(t, review(gpuType(), binding, pool).Allowed, "a backend that does not exist runs no check")
}

func TestBackendValidatorRefusesAMovedGroupAndWarnsOfUnusedInterfaces(t *testing.T) {
	backend := func(groups string) map[string]any {
		var b map[string]any
		require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"worker.gpustack.ai/v1","kind":"KVCacheBackend","metadata":{"name":"mooncake"},
 "spec":{"connection":{"managed":{"leader":{},"members":[`+groups+`]}}}}`), &b))
		return b
	}
	const a, b = `{"nodeSelector":{"kv":"a"},"medium":"DRAM","capacityPerMember":"8Gi"}`, `{"nodeSelector":{"kv":"b"},"medium":"DRAM","capacityPerMember":"8Gi","fabricInterfaceCount":2}`
	req := request(t, admissionv1.Update, backend(b+","+a))
	old, err := json.Marshal(backend(a + "," + b))
	require.NoError(t, err)
	req.OldObject = runtime.RawExtension{Raw: old}
	rsp := webhooks.BackendValidator{Reader: reader(t)}.Handle(context.Background(), req)
	require.False(t, rsp.Allowed)
	assert.Equal(t, metav1.StatusReasonInvalid, rsp.Result.Reason)
	assert.Contains(t, rsp.Result.Message, "was stored at index 1")

	rsp = webhooks.BackendValidator{Reader: reader(t)}.Handle(context.Background(), request(t, admissionv1.Create, backend(a+","+b)))
	assert.True(t, rsp.Allowed)
	assert.Equal(t, []string{"spec.connection.managed.members[1].fabricInterfaceCount is 2 but the group's protocol is Auto: only RDMA and EFA members request fabric interfaces, so the count requests nothing"}, rsp.Warnings)
}

func TestArtifactValidatorRefusesWithTheField(t *testing.T) {
	a := map[string]any{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact", "metadata": map[string]any{"name": "w", "namespace": "team-a"},
		"spec": map[string]any{"source": map[string]any{"persistentVolumeClaim": map[string]any{"claimName": "weights", "path": "../x"}}}}
	rsp := webhooks.ArtifactValidator{}.Handle(context.Background(), request(t, admissionv1.Create, a))
	require.False(t, rsp.Allowed)
	require.NotNil(t, rsp.Result.Details)
	assert.Equal(t, "spec.source.persistentVolumeClaim.path", rsp.Result.Details.Causes[0].Field)
	a["spec"].(map[string]any)["source"].(map[string]any)["persistentVolumeClaim"].(map[string]any)["path"] = "x"
	assert.True(t, webhooks.ArtifactValidator{}.Handle(context.Background(), request(t, admissionv1.Create, a)).Allowed, "near miss")
}

func TestArtifactDefaulterPatchesTheRevision(t *testing.T) {
	a := map[string]any{"apiVersion": "worker.gpustack.ai/v1", "kind": "ModelArtifact", "metadata": map[string]any{"name": "w", "namespace": "team-a"},
		"spec": map[string]any{"source": map[string]any{"modelScope": map[string]any{"repository": "Qwen/Qwen3-8B"}}}}
	rsp := webhooks.ArtifactDefaulter{}.Handle(context.Background(), request(t, admissionv1.Create, a))
	require.True(t, rsp.Allowed)
	require.Len(t, rsp.Patches, 1)
	assert.Equal(t, "/spec/source/modelScope/revision", rsp.Patches[0].Path)
	assert.Equal(t, "master", rsp.Patches[0].Value)
	a["spec"].(map[string]any)["source"].(map[string]any)["modelScope"].(map[string]any)["revision"] = "v1"
	rsp = webhooks.ArtifactDefaulter{}.Handle(context.Background(), request(t, admissionv1.Create, a))
	assert.True(t, rsp.Allowed)
	assert.Empty(t, rsp.Patches, "near miss: a revision given")
}
