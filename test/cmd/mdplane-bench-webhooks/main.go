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
	"k8s.io/client-go/kubernetes"
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
	s, err := cluster.Start(ctx, cluster.Options{Profile: true, Log: func(format string, args ...any) { logf("stack: "+format, args...) }})
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
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	timed := func(webhook, name string, load func() bench.LoadResult) (bench.LoadResult, time.Duration, error) {
		return timedLoad(ctx, cs, webhook, name, load)
	}
	const oneByOne = 100
	logf("warming up: %s of dry-run creates at %d a second", 5*time.Second, rate/4)
	bench.DryRunLoad(ctx, dc, gvr, md, max(1, rate/4), 5*time.Second, "warm-up")
	_, mdplaneOne, err := timed(bench.ModelDeploymentWebhook, "one by one", func() bench.LoadResult { return bench.DryRunOneByOne(ctx, dc, gvr, md, oneByOne) })
	if err != nil {
		return err
	}
	logf("load: ModelDeployments through mdplane's webhooks, one webhook replica profiled")
	profiles := bench.StartProfiles(ctx, s, s.Dir, length*2/3)
	with, mdplaneLoaded, err := timed(bench.ModelDeploymentWebhook, "load", func() bench.LoadResult {
		return bench.DryRunLoad(ctx, dc, gvr, md, rate, length, "ModelDeployment, mdplane's webhooks")
	})
	if err != nil {
		return err
	}
	profiles.Finish(ctx)
	registered, err := bench.RegisteredWebhook(ctx, s)
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{&admissionregistrationv1.ValidatingWebhookConfiguration{}, &admissionregistrationv1.MutatingWebhookConfiguration{}} {
		obj.SetName(webhooks)
		if err := s.Client.Delete(ctx, obj); err != nil {
			return fmt.Errorf("removing the webhook configuration %s: %w", webhooks, err)
		}
	}
	logf("the no-op webhook: built, run and registered as mdplane's validating webhook is")
	removeNoop, err := bench.InstallNoopWebhook(ctx, s, registered)
	if err != nil {
		return err
	}
	time.Sleep(5 * time.Second) // the API server's webhook configuration informer follows
	bench.DryRunLoad(ctx, dc, gvr, md, max(1, rate/4), 5*time.Second, "warm-up")
	_, noopOne, err := timed(bench.NoopWebhook, "one by one", func() bench.LoadResult { return bench.DryRunOneByOne(ctx, dc, gvr, md, oneByOne) })
	if err != nil {
		return err
	}
	logf("load: ModelDeployments through the no-op webhook")
	noop, noopLoaded, err := timed(bench.NoopWebhook, "load", func() bench.LoadResult {
		return bench.DryRunLoad(ctx, dc, gvr, md, rate, length, "ModelDeployment, a no-op webhook")
	})
	if err != nil {
		return err
	}
	if err := removeNoop(ctx); err != nil {
		return fmt.Errorf("removing the no-op webhook: %w", err)
	}
	time.Sleep(5 * time.Second)
	logf("load: ModelDeployments without a webhook")
	without := bench.DryRunLoad(ctx, dc, gvr, md, rate, length, "ModelDeployment, no webhook")
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "bulk", "namespace": namespace}, "data": map[string]any{"k": "v"}}}
	logf("load: ConfigMaps")
	configMaps := bench.DryRunLoad(ctx, dc, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, cm, rate, length, "ConfigMap")
	bench.PrintLoads(os.Stdout, rate, length, with, noop, without, configMaps)
	fmt.Println("\nProfiles of mdplane's processes under the load through its webhooks:")
	profiles.Print(os.Stdout, 25)
	printTargets(oneByOne, with, noop, without, mdplaneOne, mdplaneLoaded, noopOne, noopLoaded)
	return nil
}

// timedLoad runs a load and returns, beside it, the webhook's own time per call, as the API server
// measures its calls, and logs the server's time of the reads a review makes meanwhile.
func timedLoad(ctx context.Context, cs kubernetes.Interface, webhook, name string, load func() bench.LoadResult) (bench.LoadResult, time.Duration, error) {
	before, err := bench.WebhookTimes(ctx, cs)
	if err != nil {
		return bench.LoadResult{}, 0, err
	}
	readsBefore, err := bench.ReadTimes(ctx, cs)
	if err != nil {
		return bench.LoadResult{}, 0, err
	}
	l := load()
	after, err := bench.WebhookTimes(ctx, cs)
	if err != nil {
		return l, 0, err
	}
	readsAfter, err := bench.ReadTimes(ctx, cs)
	if err != nil {
		return l, 0, err
	}
	avg, n := after[webhook].Since(before[webhook])
	logf("%s: %s called %d times, %.1f ms on average", name, webhook, n, float64(avg.Microseconds())/1000)
	// The reads a review of the quickstart makes, as the API server answered them meanwhile.
	for _, resource := range []string{"environmentconfigs", "instancetypes", "kvcachepoolbindings", "kvcachepools", "kvcachebackends"} {
		if d, reads := readsAfter[resource].Since(readsBefore[resource]); reads > 0 {
			logf("%s:   GET %s: %d, %.1f ms on average in the API server", name, resource, reads, float64(d.Microseconds())/1000)
		}
	}
	return l, avg, nil
}

// printTargets prints each webhook's own times and the run's targets.
func printTargets(oneByOne int, with, noop, without bench.LoadResult, mdplaneOne, mdplaneLoaded, noopOne, noopLoaded time.Duration) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	fmt.Printf("\n  the webhook's own calls, as the API server times them: %d reviews one by one, then under the load\n", oneByOne)
	fmt.Printf("  %-40s %12s %12s\n", "webhook", "one by one", "under load")
	fmt.Printf("  %-40s %12s %12s\n", bench.ModelDeploymentWebhook, ms(mdplaneOne), ms(mdplaneLoaded))
	fmt.Printf("  %-40s %12s %12s\n", bench.NoopWebhook, ms(noopOne), ms(noopLoaded))
	added := func(l bench.LoadResult) time.Duration { return l.Percentile(0.99) - without.Percentile(0.99) }
	ratio := 0.0
	if added(noop) > 0 {
		ratio = float64(added(with)) / float64(added(noop))
	}
	bench.PrintTargets(os.Stdout, []bench.Target{
		{Name: "p99 mdplane's webhooks add / a no-op webhook adds", Got: ratio, AtMost: 1.5, Unit: "×",
			Figure: ms(added(with)) + " / " + ms(added(noop))},
		{Name: "one validating review of the quickstart, on average", Got: float64(mdplaneOne.Microseconds()) / 1000, AtMost: 8, Unit: " ms",
			Figure: fmt.Sprintf("the no-op webhook's: %s", ms(noopOne))},
	})
	fmt.Printf("  %-62s %d of %d\n", "requests refused through mdplane's webhooks (target: none)", with.Refused, with.Sent)
}

func logf(format string, args ...any) {
	fmt.Printf("%s "+format+"\n", append([]any{time.Now().Format(time.TimeOnly)}, args...)...)
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
