package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/mdplane/mdplane/apis/settings"
)

// ValidateSettingsPath is where the Settings webhook is served; package/webhooks registers it for
// EnvironmentConfigs, with a match condition on the name mdplane-settings.
const ValidateSettingsPath = "/validate-apiextensions-crossplane-io-v1beta1-environmentconfig"

// SettingsValidator refuses a bad value in the mdplane-settings EnvironmentConfig when it is written,
// so the functions' refusal at render time is only a backstop, and warns of keys mdplane does not
// read. Every other EnvironmentConfig is admitted untouched (the registration's match condition
// keeps them from reaching it at all).
type SettingsValidator struct {
	Reader Reader
}

// Handle answers one admission review of an EnvironmentConfig.
func (v *SettingsValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(req.Object.Raw, &u.Object); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if !settings.IsSettings(u) {
		return admission.Allowed("")
	}
	s, warnings, errs := settings.FromObject(u)
	if len(errs) == 0 && s.ArtifactDeliveryMode == settings.DeliveryNode && !wasNode(req) {
		refusal, err := nodeDeliveryRefusal(ctx, v.Reader)
		if err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		if refusal != "" {
			errs = append(errs, field.Forbidden(field.NewPath("data").Key(settings.ArtifactDeliveryMode), refusal))
		}
	}
	if len(errs) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	status := apierrors.NewInvalid(settings.GroupVersionKind.GroupKind(), u.GetName(), errs).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}}
}

// wasNode reports an update of an object whose delivery mode was Node already: an unrelated edit is
// not refused because the CSIDriver went away since.
func wasNode(req admission.Request) bool {
	if req.Operation != admissionv1.Update {
		return false
	}
	old := &unstructured.Unstructured{}
	if err := json.Unmarshal(req.OldObject.Raw, &old.Object); err != nil {
		return false
	}
	s, _, errs := settings.FromObject(old)
	return len(errs) == 0 && s.ArtifactDeliveryMode == settings.DeliveryNode
}

// nodeDeliveryRefusal is the spec's refusal of Node delivery while the CSIDriver does not exist, ""
// when it does.
func nodeDeliveryRefusal(ctx context.Context, r Reader) (string, error) {
	found, err := get(ctx, r, client.ObjectKey{Name: settings.CSIDriverName}, &storagev1.CSIDriver{})
	if err != nil || found {
		return "", err
	}
	return fmt.Sprintf(settings.NodeDeliveryRefusal, settings.CSIDriverName), nil
}
