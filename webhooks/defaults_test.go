package webhooks_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	offline "github.com/mdplane/mdplane/internal/admission"
	"github.com/mdplane/mdplane/internal/schemacheck"
	manifests "github.com/mdplane/mdplane/package"
	"github.com/mdplane/mdplane/webhooks"
)

// manifestSets are every example and every golden render input, each with the InstanceTypes it is
// judged with, and this package's manifests that every defaulter has something to write in.
func manifestSets(t *testing.T) [][]string {
	var sets [][]string
	for _, group := range []struct{ glob, cluster string }{
		{"../examples/*.yaml", "../examples/cluster.yaml"},
		{"../examples/edits/*.yaml", "../examples/cluster.yaml"},
		{"../functions/testdata/cases/*.yaml", "../functions/testdata/cluster.yaml"},
		{"testdata/defaults.yaml", "../examples/cluster.yaml"},
	} {
		files, err := filepath.Glob(group.glob)
		require.NoError(t, err)
		require.NotEmpty(t, files, group.glob)
		for _, f := range files {
			if f != group.cluster {
				sets = append(sets, []string{f, group.cluster})
			}
		}
	}
	return sets
}

// TestOfflineDefaultsAreTheWebhooks: `mdplane validate` and `render` store what a cluster stores.
// For every ModelDeployment and ModelArtifact, the schema-defaulted object the API server hands the
// mutating webhook, patched with the webhook's answer, equals the object the offline path judges
// and renders.
func TestOfflineDefaultsAreTheWebhooks(t *testing.T) {
	checker, err := schemacheck.ForPackage(manifests.FS)
	require.NoError(t, err)
	sentToDefaulter := sentTo(t, "mmodeldeployment.worker.gpustack.ai")
	patched := map[string]int{}
	for _, files := range manifestSets(t) {
		t.Run(files[0], func(t *testing.T) {
			docs, err := schemacheck.ReadFiles(files...)
			require.NoError(t, err)
			objects, refusals, err := offline.Judge(checker, docs, nil)
			require.NoError(t, err)
			require.Empty(t, refusals, "every manifest set is admitted")
			r := reader(t, instanceTypes(t, objects)...)
			for i, d := range docs {
				var handler admission.Handler
				switch d.Object.GetKind() {
				case workerv1.ModelDeploymentKind:
					handler = &webhooks.Defaulter{Reader: r}
				case workerv1.ModelArtifactKind:
					handler = webhooks.ArtifactDefaulter{}
				default:
					continue
				}
				cluster, n := applyWebhook(t, handler, checker.Default(d.Object))
				patched[d.Object.GetKind()] += n
				if n > 0 && d.Object.GetKind() == workerv1.ModelDeploymentKind {
					assert.True(t, sentToDefaulter(checker.Default(d.Object).Object), "%s: defaulted, but its match condition would not send it", d.Source)
				}
				assert.Equal(t, cluster, normalized(t, objects[i].Object), "%s: the offline defaults differ from the webhook's", d.Source)
			}
		})
	}
	assert.Positive(t, patched[workerv1.ModelDeploymentKind], "the ModelDeployment defaulter wrote nothing: the comparison proves nothing")
	assert.Positive(t, patched[workerv1.ModelArtifactKind], "the ModelArtifact defaulter wrote nothing: the comparison proves nothing")
}

// applyWebhook sends obj to a mutating webhook as a create and applies its patch as the API server
// does; n is the number of operations.
func applyWebhook(t *testing.T, h admission.Handler, obj *unstructured.Unstructured) (map[string]any, int) {
	raw, err := json.Marshal(obj.Object)
	require.NoError(t, err)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}}
	rsp := h.Handle(context.Background(), req)
	require.True(t, rsp.Allowed, "%v", rsp.Result)
	if len(rsp.Patches) == 0 {
		return normalized(t, obj.Object), 0
	}
	ops, err := json.Marshal(rsp.Patches)
	require.NoError(t, err)
	patch, err := jsonpatch.DecodePatch(ops)
	require.NoError(t, err)
	out, err := patch.Apply(raw)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m, len(rsp.Patches)
}

// normalized is obj as JSON reads it back, so numbers and empty values compare alike.
func normalized(t *testing.T, obj map[string]any) map[string]any {
	raw, err := json.Marshal(obj)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return m
}

// instanceTypes are the InstanceTypes among objects, for the webhook's reader.
func instanceTypes(t *testing.T, objects []*unstructured.Unstructured) []client.Object {
	var out []client.Object
	for _, obj := range objects {
		if obj.GetKind() != workerv1.InstanceTypeKind {
			continue
		}
		it := &workerv1.InstanceType{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, it))
		out = append(out, it)
	}
	return out
}
