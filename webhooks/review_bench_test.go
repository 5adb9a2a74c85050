package webhooks_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/webhooks"
)

// exampleObjects are the worker.gpustack.ai objects of an example file, typed.
func exampleObjects(b *testing.B, file string) []client.Object {
	raw, err := os.ReadFile("../examples/" + file)
	require.NoError(b, err)
	s := runtime.NewScheme()
	require.NoError(b, workerv1.AddToScheme(s))
	var out []client.Object
	for _, doc := range strings.Split(string(raw), "\n---") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.GetKind() == "" || u.GroupVersionKind().Group != workerv1.SchemeGroupVersion.Group {
			continue
		}
		obj, err := s.New(u.GroupVersionKind())
		require.NoError(b, err)
		require.NoError(b, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj))
		out = append(out, obj.(client.Object))
	}
	return out
}

// BenchmarkReviewOfTheQuickstart is the CPU one review of examples/qwen-chat.yaml costs the
// webhooks, the mutating and the validating one, their reads answered from memory: what bounds the
// reviews a second a webhook replica answers once its reads are cheap.
func BenchmarkReviewOfTheQuickstart(b *testing.B) {
	r := reader(&testing.T{}, exampleObjects(b, "cluster.yaml")...)
	raw, err := os.ReadFile("../examples/qwen-chat.yaml")
	require.NoError(b, err)
	var md map[string]any
	require.NoError(b, yaml.Unmarshal(raw, &md))
	req := request(&testing.T{}, admissionv1.Create, md)
	mutate, validate := &webhooks.Defaulter{Reader: r}, &webhooks.Validator{Reader: r}
	require.True(b, validate.Handle(context.Background(), req).Allowed, "the quickstart is admitted")
	b.ReportAllocs()
	for b.Loop() {
		mutate.Handle(context.Background(), req)
		validate.Handle(context.Background(), req)
	}
}
