package webhooks_test

import (
	"context"
	"encoding/json"
	"testing"

	xpv1beta1 "github.com/crossplane/crossplane/apis/v2/apiextensions/v1beta1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	storagev1 "k8s.io/api/storage/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/mdplane/mdplane/apis/settings"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/webhooks"
)

// settingsReader is a fake API server that also serves EnvironmentConfigs and CSIDrivers.
func settingsReader(t *testing.T, objs ...client.Object) webhooks.Reader {
	s := runtime.NewScheme()
	require.NoError(t, workerv1.AddToScheme(s))
	require.NoError(t, xpv1beta1.AddToScheme(s))
	require.NoError(t, storagev1.AddToScheme(s))
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func environmentConfig(name string, data map[string]string) *xpv1beta1.EnvironmentConfig {
	ec := &xpv1beta1.EnvironmentConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: settings.APIVersion, Kind: settings.Kind},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       map[string]extv1.JSON{},
	}
	for k, v := range data {
		raw, _ := json.Marshal(v)
		ec.Data[k] = extv1.JSON{Raw: raw}
	}
	return ec
}

func TestSettingsValidator(t *testing.T) {
	v := &webhooks.SettingsValidator{Reader: settingsReader(t)}
	ctx := context.Background()

	rsp := v.Handle(ctx, request(t, admissionv1.Create, environmentConfig(settings.EnvironmentConfigName,
		map[string]string{settings.ArtifactDeliveryMode: "node", "model-deployment-router-imag": "x"})))
	require.False(t, rsp.Allowed)
	assert.Equal(t, metav1.StatusReasonInvalid, rsp.Result.Reason)
	require.Len(t, rsp.Result.Details.Causes, 1)
	assert.Equal(t, "data[model-artifact-delivery-mode]", rsp.Result.Details.Causes[0].Field)
	assert.Contains(t, rsp.Result.Message, `want Engine or Node, got "node", or remove the key for the default Engine`)
	require.Len(t, rsp.Warnings, 1)
	assert.Contains(t, rsp.Warnings[0], `"model-deployment-router-imag" is not a Setting mdplane reads`)

	rsp = v.Handle(ctx, request(t, admissionv1.Create, environmentConfig(settings.EnvironmentConfigName,
		map[string]string{settings.TCPTWReuse: "true", settings.ContainerRegistry: "registry.local:5000"})))
	assert.True(t, rsp.Allowed)
	assert.Empty(t, rsp.Warnings)

	// Near miss: any other EnvironmentConfig is not mdplane's, whatever its keys hold.
	rsp = v.Handle(ctx, request(t, admissionv1.Create, environmentConfig("other", map[string]string{settings.ArtifactDeliveryMode: "node"})))
	assert.True(t, rsp.Allowed)
	assert.Empty(t, rsp.Warnings)
}

func TestSettingsValidatorNodeDeliveryNeedsTheCSIDriver(t *testing.T) {
	ctx := context.Background()
	node := environmentConfig(settings.EnvironmentConfigName, map[string]string{settings.ArtifactDeliveryMode: "Node"})

	rsp := (&webhooks.SettingsValidator{Reader: settingsReader(t)}).Handle(ctx, request(t, admissionv1.Create, node))
	require.False(t, rsp.Allowed)
	assert.Contains(t, rsp.Result.Message, "the CSIDriver model.csi.gpustack.ai does not exist: install the model-manager plugin (chart value modelManager.enabled) before choosing Node delivery")

	driver := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: settings.CSIDriverName}}
	rsp = (&webhooks.SettingsValidator{Reader: settingsReader(t, driver)}).Handle(ctx, request(t, admissionv1.Create, node))
	assert.True(t, rsp.Allowed)

	// An edit of an object already on Node is not refused because the driver went away since.
	req := request(t, admissionv1.Update, node)
	old, err := json.Marshal(node)
	require.NoError(t, err)
	req.OldObject = runtime.RawExtension{Raw: old}
	rsp = (&webhooks.SettingsValidator{Reader: settingsReader(t)}).Handle(ctx, req)
	assert.True(t, rsp.Allowed)
}

func TestValidatorFollowsTheSettings(t *testing.T) {
	ctx := context.Background()
	var md map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"apiVersion":"worker.gpustack.ai/v1","kind":"ModelDeployment",
 "metadata":{"name":"qwen","namespace":"team-a"},
 "spec":{"model":{"name":"m"},"engine":{"name":"vLLM","image":"i"},
  "roles":[{"name":"server","instanceType":"h100","privileged":true}]}}`), &md))

	rsp := (&webhooks.Validator{Reader: settingsReader(t, gpuType())}).Handle(ctx, request(t, admissionv1.Create, md))
	require.False(t, rsp.Allowed)
	assert.Contains(t, rsp.Result.Message, "instance-privileged-allowed is false")

	allowed := environmentConfig(settings.EnvironmentConfigName, map[string]string{settings.InstancePrivilegedAllowed: "true"})
	rsp = (&webhooks.Validator{Reader: settingsReader(t, gpuType(), allowed)}).Handle(ctx, request(t, admissionv1.Create, md))
	assert.True(t, rsp.Allowed, "%v", rsp.Result)

	bad := environmentConfig(settings.EnvironmentConfigName, map[string]string{settings.InstancePrivilegedAllowed: "yes"})
	rsp = (&webhooks.Validator{Reader: settingsReader(t, gpuType(), bad)}).Handle(ctx, request(t, admissionv1.Create, md))
	require.False(t, rsp.Allowed)
	assert.Contains(t, rsp.Result.Message, `EnvironmentConfig mdplane-settings: data[instance-privileged-allowed]: Invalid value: "yes": want true or false`)
}
