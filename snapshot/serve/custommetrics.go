package serve

import (
	"fmt"
	"math"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	rolesv1 "github.com/mdplane/mdplane/apis/roles/v1"
)

// The custom metrics API's paths: it describes the roles' load, for a HorizontalPodAutoscaler's
// Object metrics.
var (
	customGroup       = "custom.metrics.k8s.io"
	customVersion     = "v1beta2"
	customGroupPath   = "/apis/" + customGroup
	customVersionPath = customGroupPath + "/" + customVersion
	// customResource is how the custom metrics API names the roles: <resource>.<group>.
	customResource = rolesv1.Resource + "." + rolesv1.Group
	customMetrics  = schema.GroupResource{Group: customGroup, Resource: customResource}
)

// roleMetrics are the custom metrics of a role: the snapshot's gauge each sums over the role's
// engine Pods.
var roleMetrics = map[string]struct {
	gauges func(*metricsv1.ModelDeploymentMetrics) []metricsv1.Gauge
	name   string
}{
	rolesv1.MetricWaitingRequests: {func(m *metricsv1.ModelDeploymentMetrics) []metricsv1.Gauge { return m.Queueing }, "waiting"},
	rolesv1.MetricRunningRequests: {func(m *metricsv1.ModelDeploymentMetrics) []metricsv1.Gauge { return m.Processing }, "running"},
}

// metricValueList is custom.metrics.k8s.io/v1beta2's MetricValueList, as the autoscaler reads it.
type metricValueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []metricValue `json:"items"`
}

type metricValue struct {
	DescribedObject describedObject   `json:"describedObject"`
	Metric          metricIdentifier  `json:"metric"`
	Timestamp       metav1.Time       `json:"timestamp"`
	WindowSeconds   *int64            `json:"windowSeconds,omitempty"`
	Value           resource.Quantity `json:"value"`
}

type describedObject struct {
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion"`
}

type metricIdentifier struct {
	Name string `json:"name"`
}

// serveCustomMetrics serves custom.metrics.k8s.io/v1beta2 for the roles: discovery, and a role's
// metric read from a fresh snapshot of its deployment. The kube-apiserver has authorized the request
// (get on the metric's resource in custom.metrics.k8s.io).
func (h *Handler) serveCustomMetrics(w http.ResponseWriter, r *http.Request, path string) {
	if r.Method != http.MethodGet {
		writeStatus(w, apierrors.NewMethodNotSupported(customMetrics, r.Method))
		return
	}
	switch path {
	case customGroupPath:
		g := customGroupDiscovery()
		g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		writeJSON(w, http.StatusOK, &g)
		return
	case customVersionPath:
		writeJSON(w, http.StatusOK, customResources())
		return
	}
	rest, _ := strings.CutPrefix(path, customVersionPath+"/namespaces/")
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != customResource {
		writeStatus(w, apierrors.NewNotFound(customMetrics, path))
		return
	}
	namespace, name, metric := parts[0], parts[2], parts[3]
	m, known := roleMetrics[metric]
	if !known {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Group: customGroup, Resource: customResource + "/" + metric}, name))
		return
	}
	md, i, err := h.role(r.Context(), namespace, name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	snap, err := h.snapshot(r.Context(), namespace, md.Name)
	if err != nil {
		writeStatus(w, err)
		return
	}
	value := RoleGauge(m.gauges(snap), m.name, md.Spec.Roles[i].Name)
	writeJSON(w, http.StatusOK, &metricValueList{
		TypeMeta: metav1.TypeMeta{Kind: "MetricValueList", APIVersion: customGroup + "/" + customVersion},
		Items: []metricValue{{
			DescribedObject: describedObject{Kind: rolesv1.Kind, Namespace: namespace, Name: name, APIVersion: rolesv1.SchemeGroupVersion.String()},
			Metric:          metricIdentifier{Name: metric},
			Timestamp:       snap.Timestamp,
			Value:           *resource.NewMilliQuantity(int64(math.Round(value*1000)), resource.DecimalSI),
		}},
	})
}

// RoleGauge sums the snapshot's gauges of the name over the role's engine Pods (scope engine/<role>).
func RoleGauge(gauges []metricsv1.Gauge, name, role string) float64 {
	sum := 0.0
	for _, g := range gauges {
		if g.Name == name && g.Scope == "engine/"+role {
			sum += g.Value
		}
	}
	return sum
}

func customGroupDiscovery() metav1.APIGroup {
	v := metav1.GroupVersionForDiscovery{GroupVersion: customGroup + "/" + customVersion, Version: customVersion}
	return metav1.APIGroup{Name: customGroup, Versions: []metav1.GroupVersionForDiscovery{v}, PreferredVersion: v}
}

func customResources() *metav1.APIResourceList {
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: customGroup + "/" + customVersion}
	for _, metric := range []string{rolesv1.MetricRunningRequests, rolesv1.MetricWaitingRequests} {
		list.APIResources = append(list.APIResources, metav1.APIResource{Name: fmt.Sprintf("%s/%s", customResource, metric),
			Namespaced: true, Kind: "MetricValueList", Verbs: metav1.Verbs{"get"}})
	}
	return list
}
