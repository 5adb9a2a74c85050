// Command mdplane-bench-cold-start times what users wait for after `kubectl apply`: on a fresh test
// stack (package cluster) it creates examples/on-the-stack.yaml's deployment as one replica of one
// Pod on the real node, and times each step to the first chat completion through the deployment's
// Service; then a bare Pod of the same image and spec, created through client-go behind a Service of
// its own and asked the same way. Starts alternate, the image already on the node for both. `make
// bench-cold-start` runs it; docs/performance.md has the figures.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/bench"
	"github.com/mdplane/mdplane/test/cluster"
)

const namespace = "cold-start"

func main() {
	runs := flag.Int("runs", 5, "starts of each kind, alternating; the table shows their medians")
	examples := flag.String("examples", "../examples", "the repository's examples directory")
	timeout := flag.Duration("timeout", 3*time.Minute, "bound of one start")
	flag.Parse()
	if err := run(*runs, *examples, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-bench-cold-start:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
}

func run(runs int, examples string, timeout time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := cluster.Start(ctx, cluster.Options{Log: func(format string, args ...any) { logf("stack: "+format, args...) }})
	if err != nil {
		return err
	}
	defer s.Stop()
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	md, err := prepare(ctx, s, filepath.Join(examples, "on-the-stack.yaml"))
	if err != nil {
		return err
	}
	model, _, _ := unstructured.NestedString(md.Object, "spec", "model", "name")
	start := func(name string) (bench.StartTimes, *corev1.Pod, error) {
		o := md.DeepCopy()
		o.SetName(name)
		times, err := bench.ColdStart(ctx, cs, s.Client, o, model, timeout)
		if err != nil {
			return times, nil, err
		}
		pods := &corev1.PodList{}
		if err := s.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{workerv1.LabelInstance: name}); err != nil || len(pods.Items) == 0 {
			return times, nil, errors.Join(errors.New("the deployment's Pod is not listed"), err)
		}
		return times, &pods.Items[0], removeAll(ctx, s, o)
	}
	// The first start pulls the image onto the node; neither kind's timed starts pull it.
	logf("warm-up: a deployment started once, the engine image pulled")
	_, member, err := start("warm-up")
	if err != nil {
		return fmt.Errorf("the warm-up start: %w", err)
	}
	var mdplane, bare []bench.StartTimes
	for i := range runs {
		name := fmt.Sprintf("chat-%d", i)
		t, _, err := start(name)
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		logf("%s: %s", name, line(t))
		mdplane = append(mdplane, t)
		pod, svc := bench.BarePod(member, namespace, fmt.Sprintf("bare-%d", i))
		t, err = bench.BareStart(ctx, cs, s.Client, pod, svc, model, timeout)
		if err != nil {
			return fmt.Errorf("bare start %s: %w", pod.Name, err)
		}
		logf("%s: %s", pod.Name, line(t))
		bare = append(bare, t)
		if err := errors.Join(s.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)), s.Client.Delete(ctx, svc)); err != nil {
			return err
		}
	}
	m, b := bench.Median(mdplane), bench.Median(bare)
	bench.PrintStarts(os.Stdout, runs, m, b)
	const answer = "first chat completion"
	bench.PrintTargets(os.Stdout, []bench.Target{{Name: "mdplane's share of the time to a first answer", Got: (m[answer] - b[answer]).Seconds(), AtMost: 2, Unit: " s",
		Figure: fmt.Sprintf("%.2f s / %.2f s", m[answer].Seconds(), b[answer].Seconds())}})
	return nil
}

func line(t bench.StartTimes) string {
	var b bytes.Buffer
	for _, step := range bench.StartSteps {
		if d, ok := t[step]; ok {
			fmt.Fprintf(&b, "%s %.2f s; ", step, d.Seconds())
		}
	}
	return b.String()
}

// prepare applies the example's InstanceType in a namespace of the run's own, waits until mdplane
// has published its entrance, and returns the example's deployment as one replica of one Pod.
func prepare(ctx context.Context, s *cluster.Stack, example string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(example)
	if err != nil {
		return nil, err
	}
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return nil, err
	}
	var md *unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		switch obj.GetKind() {
		case workerv1.ModelDeploymentKind:
			md = obj
		case "InstanceType":
			unstructured.RemoveNestedField(obj.Object, "status")
			if err := s.Client.Create(ctx, obj); err != nil {
				return nil, fmt.Errorf("creating the InstanceType: %w", err)
			}
			if err := wait(ctx, 2*time.Minute, func() error {
				it := &workerv1.InstanceType{}
				if err := s.Client.Get(ctx, client.ObjectKey{Name: obj.GetName()}, it); err != nil {
					return err
				}
				if it.Status.Entrance == "" {
					return errors.New("no entrance published yet")
				}
				return nil
			}); err != nil {
				return nil, err
			}
		}
	}
	if md == nil {
		return nil, fmt.Errorf("%s holds no ModelDeployment", example)
	}
	md.SetNamespace(namespace)
	roles, _, _ := unstructured.NestedSlice(md.Object, "spec", "roles")
	role := roles[0].(map[string]any)
	role["replicas"], role["size"] = int64(1), int64(1)
	if err := unstructured.SetNestedSlice(md.Object, roles[:1], "spec", "roles"); err != nil {
		return nil, err
	}
	return md, nil
}

// removeAll deletes a deployment and waits until its Pods are gone.
func removeAll(ctx context.Context, s *cluster.Stack, md *unstructured.Unstructured) error {
	if err := s.Client.Delete(ctx, md); err != nil {
		return err
	}
	return wait(ctx, 2*time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := s.Client.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{workerv1.LabelInstance: md.GetName()}); err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("%d Pods left", len(pods.Items))
		}
		return nil
	})
}

func wait(ctx context.Context, timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
