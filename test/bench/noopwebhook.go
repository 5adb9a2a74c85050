package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/test/cluster"
)

// The no-op webhook's objects: its namespace, Deployment, Service and webhook configuration share
// the name.
const (
	noopName = "mdplane-bench-noop"
	// NoopWebhook is the no-op webhook's name in its configuration and in the API server's metrics.
	NoopWebhook = "noop.bench.mdplane.io"
	// ModelDeploymentWebhook is mdplane's validating webhook of ModelDeployments.
	ModelDeploymentWebhook = "vmodeldeployment.worker.gpustack.ai"
)

// RegisteredWebhook is mdplane's validating webhook of ModelDeployments as installed.
func RegisteredWebhook(ctx context.Context, s *cluster.Stack) (*admissionregistrationv1.ValidatingWebhook, error) {
	mdplane := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := s.Client.Get(ctx, client.ObjectKey{Name: "mdplane"}, mdplane); err != nil {
		return nil, fmt.Errorf("reading mdplane's validating webhook configuration: %w", err)
	}
	var like *admissionregistrationv1.ValidatingWebhook
	for i := range mdplane.Webhooks {
		if mdplane.Webhooks[i].Name == ModelDeploymentWebhook {
			like = mdplane.Webhooks[i].DeepCopy()
		}
	}
	if like == nil {
		return nil, fmt.Errorf("mdplane's validating webhook configuration has no %s", ModelDeploymentWebhook)
	}
	return like, nil
}

// InstallNoopWebhook runs mdplane-noop-webhook on the stack as mdplane's webhooks run (two replicas
// of a Deployment with the same requests and security context, behind a Service, on a certificate
// of the stack's CA) and registers it for ModelDeployments exactly as like, mdplane's validating
// webhook, is registered (the same rules, failure policy, timeout and match conditions), until the
// returned removal runs.
func InstallNoopWebhook(ctx context.Context, s *cluster.Stack, like *admissionregistrationv1.ValidatingWebhook) (remove func(context.Context) error, err error) {
	image, err := s.PublishCommand("mdplane-noop-webhook")
	if err != nil {
		return nil, err
	}
	like = like.DeepCopy()
	host := noopName + "." + noopName + ".svc"
	ca, cert, key, err := s.ServingCertificate(host)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"app.kubernetes.io/name": noopName}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: noopName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: noopName, Namespace: noopName}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: noopName, Namespace: noopName}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				AutomountServiceAccountToken: ptr.To(false),
				// On the real node, where mdplane's webhooks run (the stack's system namespaces
				// select it): the fake nodes run no container.
				NodeSelector:    map[string]string{corev1.LabelHostname: cluster.RealNodeName},
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "webhook", Image: image,
					Ports:          []corev1.ContainerPort{{Name: "webhook", ContainerPort: 9443}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("webhook")}}},
					// mdplane-webhooks' requests and limit, so the node's CPU shares weigh both alike.
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
					},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
					VolumeMounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs", ReadOnly: true}},
				}},
				Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: noopName}}}},
			}},
		}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: noopName, Namespace: noopName}, Spec: corev1.ServiceSpec{
			Selector: labels, Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromString("webhook")}}}},
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil {
			return nil, fmt.Errorf("creating the no-op webhook's %T: %w", o, err)
		}
	}
	if err := poll(ctx, 3*time.Minute, "the no-op webhook's replicas ready", func() error {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: noopName, Name: noopName}, d); err != nil {
			return err
		}
		if d.Status.ReadyReplicas < 2 {
			return fmt.Errorf("%d of 2 replicas ready", d.Status.ReadyReplicas)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	like.Name = NoopWebhook
	like.ClientConfig = admissionregistrationv1.WebhookClientConfig{CABundle: ca,
		Service: &admissionregistrationv1.ServiceReference{Namespace: noopName, Name: noopName, Path: ptr.To("/validate"), Port: ptr.To[int32](443)}}
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: noopName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{*like}}
	if err := s.Client.Create(ctx, config); err != nil {
		return nil, fmt.Errorf("registering the no-op webhook: %w", err)
	}
	return func(ctx context.Context) error {
		return errors.Join(s.Client.Delete(ctx, config), s.Client.Delete(ctx, objs[0]))
	}, nil
}

// WebhookTime is the time the API server spent calling one webhook: the sum, count and cumulative
// bucket counts (by upper bound, "+Inf" the last) of its admission-duration histogram.
type WebhookTime struct {
	Sum     float64
	Count   int
	Buckets map[string]float64
}

// QuantileSince is the q-quantile (0 < q ≤ 1) of the observations between an earlier reading and
// this one, read from the buckets as Prometheus's histogram_quantile reads them: linear within the
// bucket the rank falls in, the highest finite bound when it falls above them; 0 for none.
func (w WebhookTime) QuantileSince(before WebhookTime, q float64) time.Duration {
	type bucket struct{ upper, count float64 }
	var buckets []bucket
	total := 0.0
	for le, n := range w.Buckets {
		n -= before.Buckets[le]
		if le == "+Inf" {
			total = n
			continue
		}
		upper, err := strconv.ParseFloat(le, 64)
		if err == nil {
			buckets = append(buckets, bucket{upper, n})
		}
	}
	if total <= 0 || len(buckets) == 0 {
		return 0
	}
	slices.SortFunc(buckets, func(a, b bucket) int { return cmp.Compare(a.upper, b.upper) })
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range buckets {
		if b.count >= rank {
			at := lower + (b.upper-lower)*(rank-below)/max(b.count-below, 1e-9)
			return time.Duration(at * float64(time.Second))
		}
		lower, below = b.upper, b.count
	}
	return time.Duration(lower * float64(time.Second))
}

// Since is the average call between an earlier reading and this one.
func (w WebhookTime) Since(before WebhookTime) (time.Duration, int) {
	n := w.Count - before.Count
	if n <= 0 {
		return 0, 0
	}
	return time.Duration((w.Sum - before.Sum) / float64(n) * float64(time.Second)), n
}

// WebhookTimes reads the API server's apiserver_admission_webhook_admission_duration_seconds of
// each validating webhook's CREATE calls, by webhook name.
func WebhookTimes(ctx context.Context, cs kubernetes.Interface) (map[string]WebhookTime, error) {
	return histogramSums(ctx, cs, "apiserver_admission_webhook_admission_duration_seconds", "name",
		`operation="CREATE"`, `type="validating"`)
}

// ReadTimes reads the API server's apiserver_request_duration_seconds of GET requests, by resource:
// how long the server took to answer the reads a review waits for.
func ReadTimes(ctx context.Context, cs kubernetes.Interface) (map[string]WebhookTime, error) {
	return histogramSums(ctx, cs, "apiserver_request_duration_seconds", "resource", `verb="GET"`)
}

// APFWaits reads the API server's apiserver_flowcontrol_request_wait_duration_seconds of the
// requests it ran, by priority level: how long requests queued in priority and fairness before
// the server took them up.
func APFWaits(ctx context.Context, cs kubernetes.Interface) (map[string]WebhookTime, error) {
	return histogramSums(ctx, cs, "apiserver_flowcontrol_request_wait_duration_seconds", "priority_level", `execute="true"`)
}

// HandlerTimes reads controller-runtime's controller_runtime_webhook_latency_seconds of one webhook
// path from each running mdplane-webhooks replica, by replica: the time a review spends in the
// handler, from the request read to the answer written. The API server's time for a call less this
// is the way there and back (the connection, the server's queue before the handler); the calls
// each replica took show how the API server spread them.
func HandlerTimes(ctx context.Context, s *cluster.Stack, path string) (map[string]WebhookTime, error) {
	urls, err := s.WebhooksMetricsURLs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]WebhookTime{}
	for replica, url := range urls {
		raw, err := httpGet(ctx, url)
		if err != nil {
			return nil, fmt.Errorf("reading the metrics of %s: %w", replica, err)
		}
		sums, err := sumsOf(raw, "controller_runtime_webhook_latency_seconds", "webhook")
		if err != nil {
			return nil, err
		}
		out[replica] = sums[path]
	}
	return out, nil
}

// httpGet is the body of a GET of url, or an error when it is not answered 200 OK.
func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	rsp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", rsp.Status)
	}
	return io.ReadAll(rsp.Body)
}

// histogramSums reads a histogram of the API server's metrics: the sum and count of the series that
// hold every one of the label pairs in with, summed by the value of the label by.
func histogramSums(ctx context.Context, cs kubernetes.Interface, metric, by string, with ...string) (map[string]WebhookTime, error) {
	raw, err := apiServerMetrics(ctx, cs)
	if err != nil {
		return nil, err
	}
	return sumsOf(raw, metric, by, with...)
}

// apiServerMetrics is the API server's metrics, in Prometheus's text exposition.
func apiServerMetrics(ctx context.Context, cs kubernetes.Interface) ([]byte, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	return raw, nil
}

// sumsOf reads a histogram of a Prometheus text exposition: the sum and count of the series that
// hold every one of the label pairs in with, summed by the value of the label by.
func sumsOf(raw []byte, metric, by string, with ...string) (map[string]WebhookTime, error) {
	out := map[string]WebhookTime{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
scan:
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), metric)
		if !ok {
			continue
		}
		for _, pair := range with {
			if !strings.Contains(rest, pair) {
				continue scan
			}
		}
		kind, labels, _ := strings.Cut(rest, "{")
		labels, value, _ := strings.Cut(labels, "} ")
		key := label(labels, by)
		t := out[key]
		switch kind {
		case "_bucket":
			if t.Buckets == nil {
				t.Buckets = map[string]float64{}
			}
			v, _ := strconv.ParseFloat(value, 64)
			t.Buckets[label(labels, "le")] += v
		case "_sum":
			v, _ := strconv.ParseFloat(value, 64)
			t.Sum += v
		case "_count":
			v, _ := strconv.Atoi(value)
			t.Count += v
		}
		out[key] = t
	}
	return out, sc.Err()
}

// label is the value of one label in a Prometheus text exposition's label set.
func label(labels, name string) string {
	for pair := range strings.SplitSeq(labels, `",`) {
		if value, ok := strings.CutPrefix(pair, name+`="`); ok {
			return strings.TrimSuffix(value, `"`)
		}
	}
	return ""
}
