package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/naming"
	rolesv1 "github.com/mdplane/mdplane/apis/roles/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// The roles group's paths.
var (
	rolesGroupPath   = "/apis/" + rolesv1.Group
	rolesVersionPath = rolesGroupPath + "/" + rolesv1.Version
	rolesResource    = schema.GroupResource{Group: rolesv1.Group, Resource: rolesv1.Resource}
)

// maxScaleBody bounds a scale request's body: a Scale is a few hundred bytes.
const maxScaleBody = 64 << 10

// serveRoles serves roles.worker.gpustack.ai/v1: discovery, the roles of a namespace, one role, and
// its scale subresource. The kube-apiserver has authorized the request before it proxies it (get,
// list on modeldeploymentroles; get, update, patch on modeldeploymentroles/scale).
func (h *Handler) serveRoles(w http.ResponseWriter, r *http.Request, path string) {
	switch path {
	case rolesGroupPath:
		g := rolesGroup()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		writeJSON(w, http.StatusOK, &g)
		return
	case rolesVersionPath:
		writeJSON(w, http.StatusOK, rolesResources())
		return
	}
	namespace, name, sub, ok := rolePath(path)
	if !ok {
		writeStatus(w, apierrors.NewNotFound(rolesResource, path))
		return
	}
	ctx := r.Context()
	switch {
	case name == "" && r.Method == http.MethodGet:
		list, err := h.roles(ctx, namespace)
		if err != nil {
			writeStatus(w, err)
			return
		}
		if wantsTable(r) {
			writeJSON(w, http.StatusOK, roleTable(list.Items, h.Now()))
			return
		}
		writeJSON(w, http.StatusOK, list)
	case name == "" || (sub == "" && r.Method != http.MethodGet):
		writeStatus(w, apierrors.NewMethodNotSupported(rolesResource, r.Method))
	case sub == "":
		md, i, err := h.role(ctx, namespace, name)
		if err != nil {
			writeStatus(w, err)
			return
		}
		if wantsTable(r) {
			writeJSON(w, http.StatusOK, roleTable([]rolesv1.ModelDeploymentRole{*roleObject(md, i)}, h.Now()))
			return
		}
		writeJSON(w, http.StatusOK, roleObject(md, i))
	case r.Method == http.MethodGet:
		md, i, err := h.role(ctx, namespace, name)
		if err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, http.StatusOK, roleScale(md, i))
	case r.Method == http.MethodPut || r.Method == http.MethodPatch:
		replicas, err := requestedReplicas(r)
		if err != nil {
			writeStatus(w, err)
			return
		}
		scale, err := h.scale(ctx, namespace, name, replicas)
		if err != nil {
			writeStatus(w, err)
			return
		}
		writeJSON(w, http.StatusOK, scale)
	default:
		writeStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Group: rolesv1.Group, Resource: rolesv1.Resource + "/" + rolesv1.Subresource}, r.Method))
	}
}

// rolePath reads /apis/<group>/v1/namespaces/<ns>/modeldeploymentroles[/<name>[/scale]].
func rolePath(path string) (namespace, name, sub string, ok bool) {
	rest, found := strings.CutPrefix(path, rolesVersionPath+"/namespaces/")
	parts := strings.Split(rest, "/")
	if !found || len(parts) < 2 || len(parts) > 4 || parts[0] == "" || parts[1] != rolesv1.Resource {
		return "", "", "", false
	}
	if len(parts) >= 3 {
		if name = parts[2]; name == "" {
			return "", "", "", false
		}
	}
	if len(parts) == 4 {
		if sub = parts[3]; sub != rolesv1.Subresource {
			return "", "", "", false
		}
	}
	return parts[0], name, sub, true
}

// roles lists every role of every deployment of the namespace.
func (h *Handler) roles(ctx context.Context, namespace string) (*rolesv1.ModelDeploymentRoleList, error) {
	var mds workerv1.ModelDeploymentList
	if err := h.Reader.List(ctx, &mds, client.InNamespace(namespace)); err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("listing the ModelDeployments of %s: %w", namespace, err))
	}
	list := &rolesv1.ModelDeploymentRoleList{TypeMeta: metav1.TypeMeta{Kind: rolesv1.Kind + "List", APIVersion: rolesv1.SchemeGroupVersion.String()},
		Items: []rolesv1.ModelDeploymentRole{}}
	for i := range mds.Items {
		for j := range mds.Items[i].Spec.Roles {
			list.Items = append(list.Items, *roleObject(&mds.Items[i], j))
		}
	}
	return list, nil
}

// role reads the deployment a role's name names and the role's index in it.
func (h *Handler) role(ctx context.Context, namespace, name string) (*workerv1.ModelDeployment, int, error) {
	deployment, role, ok := rolesv1.SplitName(name)
	if !ok {
		return nil, 0, apierrors.NewNotFound(rolesResource, name)
	}
	md := &workerv1.ModelDeployment{}
	if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: deployment}, md); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, 0, apierrors.NewNotFound(rolesResource, name)
		}
		return nil, 0, apierrors.NewInternalError(fmt.Errorf("reading ModelDeployment %s/%s: %w", namespace, deployment, err))
	}
	for i, r := range md.Spec.Roles {
		if r.Name == role {
			return md, i, nil
		}
	}
	return nil, 0, apierrors.NewNotFound(rolesResource, name)
}

// scale writes the role's replica count to its deployment's spec.roles[i].replicas, the one field
// that holds it, as a JSON patch that first tests the index still holds the role; the deployment's
// admission (webhooks, schema) judges it as any edit. It answers the Scale as it then stands.
func (h *Handler) scale(ctx context.Context, namespace, name string, replicas int32) (*autoscalingv1.Scale, error) {
	md, i, err := h.role(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if md.Spec.Roles[i].Replicas == replicas {
		return roleScale(md, i), nil
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": fmt.Sprintf("/spec/roles/%d/name", i), "value": md.Spec.Roles[i].Name},
		{"op": "add", "path": fmt.Sprintf("/spec/roles/%d/replicas", i), "value": replicas},
	})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	if err := h.Writer.Patch(ctx, md, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		if _, ok := err.(apierrors.APIStatus); ok {
			return nil, err
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("scaling role %s of ModelDeployment %s/%s: %w", md.Spec.Roles[i].Name, namespace, md.Name, err))
	}
	return roleScale(md, i), nil
}

// requestedReplicas reads spec.replicas from a scale update (a Scale) or patch (a merge or strategic
// merge patch of one); a JSON patch is not taken.
func requestedReplicas(r *http.Request) (int32, error) {
	if r.Method == http.MethodPatch && strings.HasPrefix(r.Header.Get("Content-Type"), string(types.JSONPatchType)) {
		return 0, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
			Reason:  metav1.StatusReasonUnsupportedMediaType,
			Message: "a scale of a ModelDeploymentRole takes a Scale, a merge patch or a strategic merge patch of spec.replicas, not a JSON patch"}}
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxScaleBody))
	if err != nil {
		return 0, apierrors.NewBadRequest(err.Error())
	}
	var s struct {
		Spec struct {
			Replicas *int32 `json:"replicas"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, apierrors.NewBadRequest(fmt.Sprintf("the body is not a Scale: %v", err))
	}
	if s.Spec.Replicas == nil || *s.Spec.Replicas < 0 {
		return 0, apierrors.NewBadRequest("spec.replicas: a scale of a ModelDeploymentRole sets spec.replicas to a count of 0 or more")
	}
	return *s.Spec.Replicas, nil
}

// roleObject is the deployment's role i as a ModelDeploymentRole.
func roleObject(md *workerv1.ModelDeployment, i int) *rolesv1.ModelDeploymentRole {
	role := md.Spec.Roles[i]
	return &rolesv1.ModelDeploymentRole{
		TypeMeta:   metav1.TypeMeta{Kind: rolesv1.Kind, APIVersion: rolesv1.SchemeGroupVersion.String()},
		ObjectMeta: roleMeta(md, i),
		Spec: rolesv1.ModelDeploymentRoleSpec{Deployment: md.Name, Role: role.Name, Kind: string(role.Kind),
			Replicas: role.Replicas},
		Status: rolesv1.ModelDeploymentRoleStatus{Ready: readyOf(md, role.Name), Selector: roleSelector(md.Name, role.Name)},
	}
}

// roleScale is the deployment's role i as a Scale: the declared count, the Ready count and the
// selector of the role's Pods (what an autoscaler reads Pod metrics by).
func roleScale(md *workerv1.ModelDeployment, i int) *autoscalingv1.Scale {
	role := md.Spec.Roles[i]
	return &autoscalingv1.Scale{
		TypeMeta:   metav1.TypeMeta{Kind: "Scale", APIVersion: autoscalingv1.SchemeGroupVersion.String()},
		ObjectMeta: roleMeta(md, i),
		Spec:       autoscalingv1.ScaleSpec{Replicas: role.Replicas},
		Status:     autoscalingv1.ScaleStatus{Replicas: readyOf(md, role.Name), Selector: roleSelector(md.Name, role.Name)},
	}
}

// roleMeta is a role's metadata: its deployment's, under the role's name. The resource version is
// the deployment's, which every change of the role changes.
func roleMeta(md *workerv1.ModelDeployment, i int) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: rolesv1.Name(md.Name, md.Spec.Roles[i].Name), Namespace: md.Namespace,
		UID: md.UID, ResourceVersion: md.ResourceVersion, CreationTimestamp: md.CreationTimestamp}
}

func readyOf(md *workerv1.ModelDeployment, role string) int32 {
	for _, s := range md.Status.Roles {
		if s.Name == role {
			return ptr.Deref(s.Ready, 0)
		}
	}
	return 0
}

func roleSelector(deployment, role string) string {
	return labels.SelectorFromSet(naming.RoleLabels(deployment, role)).String()
}

func rolesGroup() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: rolesv1.SchemeGroupVersion.String(), Version: rolesv1.Version}
	return metav1.APIGroup{Name: rolesv1.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func rolesResources() *metav1.APIResourceList {
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: rolesv1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{
			{Name: rolesv1.Resource, SingularName: "modeldeploymentrole", Namespaced: true, Kind: rolesv1.Kind,
				Verbs: metav1.Verbs{"get", "list"}, ShortNames: []string{"mdrole"}, Categories: []string{"gpustack"}},
			{Name: rolesv1.Resource + "/" + rolesv1.Subresource, Namespaced: true, Group: "autoscaling", Version: "v1", Kind: "Scale",
				Verbs: metav1.Verbs{"get", "update", "patch"}},
		},
	}
}

// wantsTable is true when the client (kubectl get) asks for a meta.k8s.io/v1 Table.
func wantsTable(r *http.Request) bool {
	for _, accept := range strings.Split(r.Header.Get("Accept"), ",") {
		if strings.Contains(accept, "as=Table") && strings.Contains(accept, "v=v1;") && strings.Contains(accept, "g=meta.k8s.io") {
			return true
		}
	}
	return false
}

// roleTable is what kubectl get prints of roles: the deployment, the role, its kind, the declared
// and Ready counts.
func roleTable(roles []rolesv1.ModelDeploymentRole, now time.Time) *metav1.Table {
	t := &metav1.Table{
		TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"},
		ColumnDefinitions: []metav1.TableColumnDefinition{
			{Name: "Name", Type: "string", Format: "name"}, {Name: "Deployment", Type: "string"}, {Name: "Role", Type: "string"},
			{Name: "Kind", Type: "string"}, {Name: "Replicas", Type: "integer"}, {Name: "Ready", Type: "integer"}, {Name: "Age", Type: "string"},
		},
		Rows: []metav1.TableRow{},
	}
	for i := range roles {
		r := &roles[i]
		kind := r.Spec.Kind
		if kind == "" {
			kind = string(workerv1.RoleKindServer)
		}
		meta := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"}, ObjectMeta: r.ObjectMeta}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{r.Name, r.Spec.Deployment, r.Spec.Role, kind, r.Spec.Replicas, r.Status.Ready, duration.HumanDuration(now.Sub(r.CreationTimestamp.Time))},
			Object: runtime.RawExtension{Object: meta},
		})
	}
	return t
}
