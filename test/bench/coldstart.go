package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StartSteps are the steps from a create to a first answer, in order, each timed from the create
// as this process first saw it: a watch of the Pod, or the answer itself.
var StartSteps = []string{"Pod created", "admitted (ungated)", "scheduled", "container started", "Pod Ready", "first chat completion"}

// StartTimes is one start, each step's time from the create; a step not seen is absent.
type StartTimes map[string]time.Duration

// podWatch records when a namespace's first Pod reached each Pod step, as a watch delivers it.
type podWatch struct {
	mu    sync.Mutex
	seen  StartTimes
	start time.Time
	stop  chan struct{}
}

// watchFirstPod starts the watch; its times count from start, which the caller sets once the watch
// has synced and it is about to create.
func watchFirstPod(ctx context.Context, cs kubernetes.Interface, namespace string) (*podWatch, error) {
	w := &podWatch{seen: StartTimes{}, stop: make(chan struct{})}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.DeletionTimestamp != nil {
			return
		}
		at := time.Since(w.start)
		w.mu.Lock()
		defer w.mu.Unlock()
		mark := func(step string, reached bool) {
			if _, done := w.seen[step]; reached && !done {
				w.seen[step] = at
			}
		}
		mark("Pod created", true)
		mark("admitted (ungated)", len(p.Spec.SchedulingGates) == 0)
		mark("scheduled", p.Spec.NodeName != "")
		for _, c := range p.Status.ContainerStatuses {
			mark("container started", c.Started != nil && *c.Started || c.State.Running != nil)
		}
		for _, c := range p.Status.Conditions {
			mark("Pod Ready", c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }}); err != nil {
		return nil, err
	}
	factory.Start(w.stop)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(w.stop)
		return nil, ctx.Err()
	}
	return w, nil
}

func (w *podWatch) times() StartTimes {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := StartTimes{}
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

// FirstAnswer sends a chat completion to the Service namespace/name every 50 ms, from when it has an
// address, until one is answered, and returns when, from start.
func FirstAnswer(ctx context.Context, c client.Client, namespace, name, model string, start time.Time, timeout time.Duration) (time.Duration, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, svc); err != nil {
			last = err
		} else if len(svc.Spec.Ports) == 0 || svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone {
			last = fmt.Errorf("the Service %s/%s has no address yet", namespace, name)
		} else {
			base := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port)))
			if last = chatOnce(ctx, hc, base, model); last == nil {
				return time.Since(start), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return 0, fmt.Errorf("no chat completion from Service %s/%s after %s: %w", namespace, name, timeout, last)
}

func chatOnce(ctx context.Context, hc *http.Client, base, model string) error {
	body := `{"model":"` + model + `","messages":[{"role":"user","content":"Hello"}],"max_tokens":4}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	rsp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer rsp.Body.Close()
	raw, _ := io.ReadAll(rsp.Body)
	if rsp.StatusCode != http.StatusOK || !strings.Contains(string(raw), `"choices"`) {
		return fmt.Errorf("%s: %.200s", rsp.Status, raw)
	}
	return nil
}

// ColdStart times one deployment's start: from its create (through c, as kubectl apply would) to its
// first chat completion through its Service, with its Pod's steps on the way.
func ColdStart(ctx context.Context, cs kubernetes.Interface, c client.Client, md *unstructured.Unstructured, model string, timeout time.Duration) (StartTimes, error) {
	return timeStart(ctx, cs, c, md.GetNamespace(), md.GetName(), model, timeout, func() error {
		if err := c.Create(ctx, md); err != nil {
			return fmt.Errorf("creating the deployment: %w", err)
		}
		return nil
	})
}

// timeStart times a start from create, which makes the objects, to the first chat completion
// through the Service namespace/service, with the namespace's first Pod's steps on the way.
func timeStart(ctx context.Context, cs kubernetes.Interface, c client.Client, namespace, service, model string, timeout time.Duration, create func() error) (StartTimes, error) {
	w, err := watchFirstPod(ctx, cs, namespace)
	if err != nil {
		return nil, err
	}
	defer close(w.stop)
	start := time.Now()
	w.mu.Lock()
	w.start = start
	w.mu.Unlock()
	if err := create(); err != nil {
		return nil, err
	}
	answered, err := FirstAnswer(ctx, c, namespace, service, model, start, timeout)
	times := w.times()
	if err == nil {
		times["first chat completion"] = answered
	}
	return times, err
}

// BarePod is a deployment's member as a plain Pod: its spec as rendered, without what Kueue, the
// scheduler and mdplane's controllers added, and none of mdplane's or Kueue's labels, with a
// Service of the same ports selecting it.
func BarePod(member *corev1.Pod, namespace, name string) (*corev1.Pod, *corev1.Service) {
	spec := member.Spec.DeepCopy()
	spec.NodeName, spec.SchedulingGates, spec.Hostname, spec.Subdomain = "", nil, "", ""
	labels := map[string]string{"app.kubernetes.io/name": name}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels}, Spec: *spec}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: corev1.ServiceSpec{Selector: labels}}
	for _, ctr := range spec.Containers {
		for _, p := range ctr.Ports {
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Port: p.ContainerPort, TargetPort: intstr.FromInt32(p.ContainerPort)})
		}
	}
	return pod, svc
}

// BareStart times a bare Pod's start the same way: its Service first, then the Pod, through
// client-go, to the first chat completion through the Service.
func BareStart(ctx context.Context, cs kubernetes.Interface, c client.Client, pod *corev1.Pod, svc *corev1.Service, model string, timeout time.Duration) (StartTimes, error) {
	return timeStart(ctx, cs, c, svc.Namespace, svc.Name, model, timeout, func() error {
		if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the bare Pod's Service: %w", err)
		}
		if _, err := cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating the bare Pod: %w", err)
		}
		return nil
	})
}

// Median is each step's median over runs.
func Median(runs []StartTimes) StartTimes {
	out := StartTimes{}
	for _, step := range StartSteps {
		var ds []time.Duration
		for _, r := range runs {
			if d, ok := r[step]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == len(runs) && len(ds) > 0 {
			slices.Sort(ds)
			out[step] = ds[len(ds)/2]
		}
	}
	return out
}

// PrintStarts prints each step of mdplane's start beside the bare Pod's, and the difference.
func PrintStarts(out io.Writer, runs int, mdplane, bare StartTimes) {
	s := func(t StartTimes, step string) string {
		if d, ok := t[step]; ok {
			return fmt.Sprintf("%.2f s", d.Seconds())
		}
		return "-"
	}
	fmt.Fprintf(out, "\nFrom create to first chat completion, the median of %d starts (times as this process saw them):\n\n", runs)
	fmt.Fprintf(out, "  %-26s %12s %12s %12s\n", "step", "mdplane", "bare Pod", "mdplane's share")
	for _, step := range StartSteps {
		share := "-"
		if m, ok := mdplane[step]; ok {
			if b, ok := bare[step]; ok {
				share = fmt.Sprintf("%+.2f s", (m - b).Seconds())
			}
		}
		fmt.Fprintf(out, "  %-26s %12s %12s %12s\n", step, s(mdplane, step), s(bare, step), share)
	}
}
