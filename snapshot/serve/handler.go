package serve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/snapshot"
)

// Scraper reads the selected Pods.
type Scraper interface {
	Scrape(ctx context.Context, targets []snapshot.Target) []snapshot.Read
}

// Handler serves metrics.worker.gpustack.ai/v1, roles.worker.gpustack.ai/v1 and the roles' custom
// metrics (custom.metrics.k8s.io/v1beta2).
type Handler struct {
	// Reader reads uncached: the deployment, its Pods and their owners.
	Reader client.Reader
	// Reviews creates SubjectAccessReviews.
	Reviews client.Client
	// Writer patches a deployment's role count, for a scale of a role.
	Writer  client.Client
	Proxy   *FrontProxy
	Scraper Scraper
	Now     func() time.Time

	mu      sync.Mutex
	samples snapshot.Samples
}

var (
	groupPath   = "/apis/" + metricsv1.Group
	versionPath = groupPath + "/" + metricsv1.SchemeGroupVersion.Version
	// deploymentsResource is what RBAC grants the snapshot on: get modeldeployments/metrics.
	deploymentsResource = schema.GroupResource{Group: workerv1.Group, Resource: metricsv1.Resource}
)

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	user, err := h.Proxy.Authenticate(r.Context(), r)
	if err != nil {
		writeStatus(w, apierrors.NewUnauthorized(err.Error()))
		return
	}
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case path == rolesGroupPath || strings.HasPrefix(path, rolesGroupPath+"/"):
		h.serveRoles(w, r, path)
		return
	case path == customGroupPath || strings.HasPrefix(path, customGroupPath+"/"):
		h.serveCustomMetrics(w, r, path)
		return
	}
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(deploymentsResource, r.Method))
		return
	}
	switch path {
	case "/apis":
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups: []metav1.APIGroup{group(), rolesGroup(), customGroupDiscovery()}})
		return
	case groupPath:
		g := group()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		writeJSON(w, http.StatusOK, &g)
		return
	case versionPath:
		writeJSON(w, http.StatusOK, resources())
		return
	}
	namespace, name, ok := snapshotPath(path)
	if !ok {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: metricsv1.Group}, path))
		return
	}
	if err := h.authorize(r.Context(), user, namespace, name); err != nil {
		writeStatus(w, err)
		return
	}
	m, err := h.snapshot(r.Context(), namespace, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// snapshotPath reads /apis/<group>/v1/namespaces/<ns>/modeldeployments/<name>/metrics.
func snapshotPath(path string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(path, versionPath+"/namespaces/")
	parts := strings.Split(rest, "/")
	if !found || len(parts) != 4 || parts[0] == "" || parts[1] != metricsv1.Resource || parts[2] == "" || parts[3] != metricsv1.Subresource {
		return "", "", false
	}
	return parts[0], parts[2], true
}

// authorize asks the API server whether the user may get modeldeployments/metrics in
// worker.gpustack.ai: the spec's RBAC rule is the one that grants the snapshot.
func (h *Handler) authorize(ctx context.Context, u User, namespace, name string) error {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Name, Groups: u.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Group: workerv1.Group,
			Resource: metricsv1.Resource, Subresource: metricsv1.Subresource, Name: name},
	}}
	if len(u.Extra) > 0 {
		sar.Spec.Extra = map[string]authorizationv1.ExtraValue{}
		for k, v := range u.Extra {
			sar.Spec.Extra[k] = v
		}
	}
	if err := h.Reviews.Create(ctx, sar); err != nil {
		return apierrors.NewInternalError(fmt.Errorf("authorizing the request: %w", err))
	}
	if !sar.Status.Allowed {
		return apierrors.NewForbidden(deploymentsResource, name, fmt.Errorf("User %q cannot get resource %q in API group %q in the namespace %q%s",
			u.Name, metricsv1.Resource+"/"+metricsv1.Subresource, workerv1.Group, namespace, reasonSuffix(sar.Status.Reason)))
	}
	return nil
}

func reasonSuffix(reason string) string {
	if reason == "" {
		return ""
	}
	return ": " + reason
}

// snapshot reads the deployment, selects and scrapes its Pods and assembles the snapshot.
func (h *Handler) snapshot(ctx context.Context, namespace, name string) (*metricsv1.ModelDeploymentMetrics, error) {
	var md workerv1.ModelDeployment
	if err := h.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &md); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, apierrors.NewNotFound(schema.GroupResource{Group: workerv1.Group, Resource: metricsv1.Resource}, name)
		}
		return nil, apierrors.NewInternalError(fmt.Errorf("reading ModelDeployment %s/%s: %w", namespace, name, err))
	}
	pods, owners, err := h.world(ctx, &md)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	sel := snapshot.Select(&md, pods, owners)
	var reads []snapshot.Read
	if len(sel.Targets) > 0 {
		reads = h.Scraper.Scrape(ctx, sel.Targets)
	}
	if reason, unavailable := snapshot.Unavailable(sel, reads); unavailable {
		return nil, apierrors.NewServiceUnavailable(reason)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m, next := snapshot.Assemble(&md, sel, reads, h.samples, h.Now())
	h.samples = next
	return m, nil
}

// world lists the deployment's Pods and the controllers between them and the deployment.
func (h *Handler) world(ctx context.Context, md *workerv1.ModelDeployment) ([]corev1.Pod, snapshot.Owners, error) {
	in, labels := client.InNamespace(md.Namespace), client.MatchingLabels(naming.DeploymentLabels(md.Name))
	var pods corev1.PodList
	if err := h.Reader.List(ctx, &pods, in, labels); err != nil {
		return nil, nil, fmt.Errorf("listing the Pods of %s/%s: %w", md.Namespace, md.Name, err)
	}
	owners := snapshot.Owners{}
	add := func(o metav1.Object) {
		if ref := metav1.GetControllerOf(o); ref != nil {
			owners[o.GetUID()] = *ref
		}
	}
	var replicas v1alpha1.ModelReplicaList
	var roles v1alpha1.ModelRoleList
	var sets appsv1.ReplicaSetList
	for _, l := range []client.ObjectList{&replicas, &roles, &sets} {
		if err := h.Reader.List(ctx, l, in, labels); err != nil {
			return nil, nil, fmt.Errorf("listing the owners of %s/%s's Pods: %w", md.Namespace, md.Name, err)
		}
	}
	for i := range replicas.Items {
		add(&replicas.Items[i])
	}
	for i := range roles.Items {
		add(&roles.Items[i])
	}
	for i := range sets.Items {
		add(&sets.Items[i])
	}
	if md.Spec.Router != nil {
		var router appsv1.Deployment
		err := h.Reader.Get(ctx, types.NamespacedName{Namespace: md.Namespace, Name: naming.RouterName(md.Name)}, &router)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, nil, fmt.Errorf("reading the router Deployment of %s/%s: %w", md.Namespace, md.Name, err)
		}
		if err == nil {
			add(&router)
		}
	}
	return pods.Items, owners, nil
}

func group() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: metricsv1.SchemeGroupVersion.String(), Version: metricsv1.SchemeGroupVersion.Version}
	return metav1.APIGroup{Name: metricsv1.Group, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func resources() *metav1.APIResourceList {
	return &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: metricsv1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: metricsv1.Resource + "/" + metricsv1.Subresource, Namespaced: true,
			Kind: metricsv1.Kind, Verbs: metav1.Verbs{"get"}}},
	}
}

func writeStatus(w http.ResponseWriter, err error) {
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		status = apierrors.NewInternalError(err)
	}
	s := status.Status()
	s.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	writeJSON(w, int(s.Code), &s)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
