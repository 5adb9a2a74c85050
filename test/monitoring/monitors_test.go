package monitoring

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// documents are the YAML documents of the files matching pattern, relative to the repository root.
func documents(t *testing.T, pattern string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", pattern))
	if err != nil || len(files) == 0 {
		t.Fatalf("no file matches %s: %v", pattern, err)
	}
	var docs [][]byte
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range bytes.Split(raw, []byte("\n---\n")) {
			if len(bytes.TrimSpace(d)) > 0 {
				docs = append(docs, d)
			}
		}
	}
	return docs
}

func kindOf(doc []byte) string {
	var meta metav1.TypeMeta
	_ = yaml.Unmarshal(doc, &meta)
	return meta.Kind
}

// monitors decodes package/monitoring strictly: a field the operator's types do not have fails.
func monitors(t *testing.T) (map[string]monitoringv1.ServiceMonitor, map[string]monitoringv1.PodMonitor) {
	t.Helper()
	services, pods := map[string]monitoringv1.ServiceMonitor{}, map[string]monitoringv1.PodMonitor{}
	for _, doc := range documents(t, "package/monitoring/monitors.yaml") {
		switch kindOf(doc) {
		case monitoringv1.ServiceMonitorsKind:
			var m monitoringv1.ServiceMonitor
			if err := yaml.UnmarshalStrict(doc, &m); err != nil {
				t.Fatalf("ServiceMonitor: %v", err)
			}
			services[m.Name] = m
		case monitoringv1.PodMonitorsKind:
			var m monitoringv1.PodMonitor
			if err := yaml.UnmarshalStrict(doc, &m); err != nil {
				t.Fatalf("PodMonitor: %v", err)
			}
			pods[m.Name] = m
		default:
			t.Fatalf("package/monitoring holds a %q", kindOf(doc))
		}
	}
	return services, pods
}

func selects(t *testing.T, s metav1.LabelSelector, l map[string]string) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(&s)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(labels.Set(l))
}

// renderedPods are the Pod templates of the golden renders: the engines' (in ModelRoles) and the
// routers' (in Deployments).
func renderedPods(t *testing.T) (engines, routers []corev1.PodTemplateSpec) {
	t.Helper()
	for _, doc := range documents(t, "functions/testdata/golden/*.yaml") {
		switch kindOf(doc) {
		case "ModelRole":
			var role struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &role); err != nil {
				t.Fatal(err)
			}
			engines = append(engines, role.Spec.Template)
		case "Deployment":
			var d appsv1.Deployment
			if err := yaml.Unmarshal(doc, &d); err != nil {
				t.Fatal(err)
			}
			routers = append(routers, d.Spec.Template)
		}
	}
	return engines, routers
}

// The controllers' ServiceMonitor selects the mdplane-metrics Service the install base ships, by a
// port it has.
func TestTheControllersServiceMonitorSelectsTheMetricsService(t *testing.T) {
	services, _ := monitors(t)
	m, ok := services["mdplane"]
	if !ok {
		t.Fatal("no ServiceMonitor mdplane")
	}
	found := false
	for _, doc := range documents(t, "package/install/controllers.yaml") {
		if kindOf(doc) != "Service" {
			continue
		}
		var svc corev1.Service
		if err := yaml.Unmarshal(doc, &svc); err != nil {
			t.Fatal(err)
		}
		if svc.Name != "mdplane-metrics" {
			if selects(t, m.Spec.Selector, svc.Labels) {
				t.Errorf("the ServiceMonitor also selects Service %s", svc.Name)
			}
			continue
		}
		found = true
		if svc.Namespace != m.Namespace || !selects(t, m.Spec.Selector, svc.Labels) {
			t.Errorf("the ServiceMonitor does not select Service %s/%s", svc.Namespace, svc.Name)
		}
		for _, e := range m.Spec.Endpoints {
			ok := false
			for _, p := range svc.Spec.Ports {
				ok = ok || p.Name == e.Port
			}
			if !ok {
				t.Errorf("Service mdplane-metrics has no port %q", e.Port)
			}
		}
	}
	if !found {
		t.Fatal("package/install/controllers.yaml has no Service mdplane-metrics")
	}
}

// The PodMonitor selects every Pod mdplane renders, engines' and routers', in every namespace, and
// keeps a target where the Pod's prometheus.io annotations point: a container port of the Pod (a
// routing proxy's Pods serve the engine's metrics on its own port). Pods without the annotations
// (a role that takes its command line over) are dropped by the keep rule.
func TestThePodMonitorScrapesWhereEveryRenderedPodSays(t *testing.T) {
	_, pods := monitors(t)
	m, ok := pods["mdplane-deployments"]
	if !ok || len(pods) != 1 {
		t.Fatalf("PodMonitors %v, want mdplane-deployments", pods)
	}
	if !m.Spec.NamespaceSelector.Any {
		t.Error("the PodMonitor reads only its own namespace; deployments run in every namespace")
	}
	engines, routers := renderedPods(t)
	if len(engines) == 0 || len(routers) == 0 {
		t.Fatalf("golden renders hold %d engine and %d router Pod templates", len(engines), len(routers))
	}
	scraped := 0
	for _, p := range append(engines, routers...) {
		if !selects(t, m.Spec.Selector, p.Labels) {
			t.Errorf("the PodMonitor does not select Pods labelled %v", p.Labels)
		}
		port, annotated := p.Annotations["prometheus.io/port"]
		if p.Annotations["prometheus.io/scrape"] != "true" || !annotated {
			continue
		}
		scraped++
		if !hasPortNumber(p, port) {
			t.Errorf("Pods labelled %v are annotated prometheus.io/port %s, which no container of theirs opens", p.Labels, port)
		}
	}
	if scraped == 0 {
		t.Fatal("no rendered Pod is annotated for scraping")
	}
}

// The PodMonitor keeps only Pods annotated prometheus.io/scrape=true, keeps the container port the
// annotation names, and takes the path and scheme from the annotations mdplane renders.
func TestThePodMonitorFollowsThePodsAnnotations(t *testing.T) {
	_, pods := monitors(t)
	for name, m := range pods {
		if len(m.Spec.PodMetricsEndpoints) != 1 {
			t.Fatalf("%s has %d endpoints, want one", name, len(m.Spec.PodMetricsEndpoints))
		}
		e := m.Spec.PodMetricsEndpoints[0]
		if e.Port != nil || e.PortNumber != nil {
			t.Errorf("%s names a port; the annotation does", name)
		}
		rules := map[string]string{}
		for _, r := range e.RelabelConfigs {
			for _, l := range r.SourceLabels {
				rules[string(l)] = strings.ToLower(r.Action) + " " + r.TargetLabel
			}
		}
		for source, want := range map[string]string{
			"__meta_kubernetes_pod_annotation_prometheus_io_scrape": "keep ",
			"__meta_kubernetes_pod_container_port_number":           "keepequal __meta_kubernetes_pod_annotation_prometheus_io_port",
			"__meta_kubernetes_pod_annotation_prometheus_io_path":   "replace __metrics_path__",
			"__meta_kubernetes_pod_annotation_prometheus_io_scheme": "replace __scheme__",
		} {
			if rules[source] != want {
				t.Errorf("%s: the rule reading %s is %q, want %q", name, source, rules[source], want)
			}
		}
	}
}

func hasPortNumber(p corev1.PodTemplateSpec, port string) bool {
	for _, c := range append(p.Spec.Containers, p.Spec.InitContainers...) {
		for _, cp := range c.Ports {
			if strconv.Itoa(int(cp.ContainerPort)) == port {
				return true
			}
		}
	}
	return false
}
