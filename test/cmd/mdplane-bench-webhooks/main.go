// Command mdplane-bench-webhooks measures what mdplane's admission webhooks add to a bulk apply: on a
// fresh test stack (package cluster) it sends server-side dry-run creates of
// examples/qwen-chat.yaml at a fixed rate, as a namespace user with the `edit` role, then the same
// requests with mdplane's webhook configurations removed, then ConfigMaps, and prints the refusals
// and latencies of each. `make bench-webhooks` runs it; docs/performance.md has the figures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/test/bench"
	"github.com/mdplane/mdplane/test/cluster"
)

// The load's user: a ServiceAccount bound to the built-in `edit` role in the example's namespace, so
// its requests go through the API server's priority and fairness as any namespace user's do.
const (
	namespace = "team-a"
	loader    = "bulk-apply"
	webhooks  = "mdplane" // the name of both webhook configurations the install applies
)

func main() {
	rate := flag.Int("rate", 200, "dry-run creates sent a second")
	length := flag.Duration("duration", 30*time.Second, "length of each load")
	examples := flag.String("examples", "../examples", "the repository's examples directory")
	flag.Parse()
	if err := run(*rate, *length, *examples); err != nil {
		fmt.Fprintln(os.Stderr, "mdplane-bench-webhooks:", err)
		os.Exit(1)
	}
}

func run(rate int, length time.Duration, examples string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logf := func(format string, args ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
	}
	s, err := cluster.Start(ctx, cluster.Options{Log: func(format string, args ...any) { logf("stack: "+format, args...) }})
	if err != nil {
		return err
	}
	defer s.Stop()
	if out, err := s.Kubectl("apply", "--server-side", "-f", filepath.Join(examples, "cluster.yaml")); err != nil {
		return fmt.Errorf("applying examples/cluster.yaml: %w\n%s", err, out)
	}
	md, err := readObject(filepath.Join(examples, "qwen-chat.yaml"))
	if err != nil {
		return err
	}
	dc, err := loaderClient(ctx, s)
	if err != nil {
		return err
	}
	gvr := schema.GroupVersionResource{Group: "worker.gpustack.ai", Version: "v1", Resource: "modeldeployments"}
	if err := admitted(ctx, dc, gvr, md); err != nil {
		return err
	}
	logf("warming up: %s of dry-run creates at %d a second", 5*time.Second, rate/4)
	bench.DryRunLoad(ctx, dc, gvr, md, max(1, rate/4), 5*time.Second, "warm-up")
	logf("load: ModelDeployments through mdplane's webhooks")
	with := bench.DryRunLoad(ctx, dc, gvr, md, rate, length, "ModelDeployment, mdplane's webhooks")
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		obj.SetName(webhooks)
		if err := s.Client.Delete(ctx, obj); err != nil {
			return fmt.Errorf("removing the webhook configuration %s: %w", webhooks, err)
		}
	}
	time.Sleep(5 * time.Second) // the API server's webhook configuration informer follows
	logf("load: ModelDeployments without mdplane's webhooks")
	without := bench.DryRunLoad(ctx, dc, gvr, md, rate, length, "ModelDeployment, no mdplane webhook")
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "bulk", "namespace": namespace}, "data": map[string]any{"k": "v"}}}
	logf("load: ConfigMaps")
	configMaps := bench.DryRunLoad(ctx, dc, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, cm, rate, length, "ConfigMap")
	bench.PrintLoads(os.Stdout, rate, length, with, without, configMaps)
	return nil
}

func readObject(path string) (*unstructured.Unstructured, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return obj, nil
}

// loaderClient is a client as the load's user, without a client-side rate limit.
func loaderClient(ctx context.Context, s *cluster.Stack) (dynamic.Interface, error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: loader, Namespace: namespace}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: loader, Namespace: namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: loader, Namespace: namespace}}}
	if err := s.Client.Create(ctx, sa); err != nil {
		return nil, err
	}
	if err := s.Client.Create(ctx, rb); err != nil {
		return nil, err
	}
	cfg, err := s.ConfigAs(ctx, "system:serviceaccount:"+namespace+":"+loader)
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, -1, 30*time.Second
	cfg.UserAgent = "mdplane-bench-webhooks"
	return dynamic.NewForConfig(cfg)
}

// admitted waits until a dry-run create of the example is admitted: the cache chain it names is
// ready and the webhooks answer.
func admitted(ctx context.Context, dc dynamic.Interface, gvr schema.GroupVersionResource, md *unstructured.Unstructured) error {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := dc.Resource(gvr).Namespace(md.GetNamespace()).Create(ctx, md, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(errors.New("the example is not admitted after 3 minutes"), err)
		}
		time.Sleep(2 * time.Second)
	}
}
