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
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
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
	"github.com/mdplane/mdplane/webhooks"
)

// The load's user: a ServiceAccount bound to the built-in `edit` role in the example's namespace, so
// its requests go through the API server's priority and fairness as any namespace user's do.
const (
	namespace      = "team-a"
	loader         = "bulk-apply"
	configurations = "mdplane" // the name of both webhook configurations the install applies
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
	timed := func(webhook, name string, load func() bench.LoadResult) (bench.LoadResult, callTimes, error) {
		return timedLoad(ctx, s, cs, webhook, name, load)
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
		obj.SetName(configurations)
		if err := s.Client.Delete(ctx, obj); err != nil {
			return fmt.Errorf("removing the webhook configuration %s: %w", configurations, err)
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
// measures its calls, and logs where a call's time went meanwhile: the API server's time for the
// reads a review makes, the priority-and-fairness queueing of each level's requests, and, for
// mdplane's webhook, the time its replicas spent in the handler.
func timedLoad(ctx context.Context, s *cluster.Stack, cs kubernetes.Interface, webhook, name string, load func() bench.LoadResult) (bench.LoadResult, callTimes, error) {
	type reading struct{ webhooks, reads, waits, handlers map[string]bench.WebhookTime }
	read := func() (r reading, err error) {
		if r.webhooks, err = bench.WebhookTimes(ctx, cs); err != nil {
			return r, err
		}
		if r.reads, err = bench.ReadTimes(ctx, cs); err != nil {
			return r, err
		}
		if r.waits, err = bench.APFWaits(ctx, cs); err != nil {
			return r, err
		}
		if webhook == bench.ModelDeploymentWebhook {
			r.handlers, err = bench.HandlerTimes(ctx, s, webhooks.ValidatePath)
		}
		return r, err
	}
	before, err := read()
	if err != nil {
		return bench.LoadResult{}, callTimes{}, err
	}
	l := load()
	after, err := read()
	if err != nil {
		return l, callTimes{}, err
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	avg, n := after.webhooks[webhook].Since(before.webhooks[webhook])
	calls := callTimes{avg: avg, p99: after.webhooks[webhook].QuantileSince(before.webhooks[webhook], 0.99)}
	logf("%s: %s called %d times, %s on average, p99 %s", name, webhook, n, ms(avg), ms(calls.p99))
	for _, replica := range slices.Sorted(maps.Keys(after.handlers)) {
		if d, reviews := after.handlers[replica].Since(before.handlers[replica]); reviews > 0 {
			logf("%s:   in the handler of %s on %s: %d calls, %s on average, p99 %s", name, webhooks.ValidatePath, replica, reviews, ms(d),
				ms(after.handlers[replica].QuantileSince(before.handlers[replica], 0.99)))
		}
	}
	// The reads a review of the quickstart makes, as the API server answered them meanwhile.
	for _, resource := range []string{"environmentconfigs", "instancetypes", "kvcachepoolbindings", "kvcachepools", "kvcachebackends"} {
		if d, reads := after.reads[resource].Since(before.reads[resource]); reads > 0 {
			p99 := after.reads[resource].QuantileSince(before.reads[resource], 0.99)
			calls.readP99 = max(calls.readP99, p99)
			logf("%s:   GET %s: %d, %s on average in the API server, p99 %s", name, resource, reads, ms(d), ms(p99))
		}
	}
	for _, level := range slices.Sorted(maps.Keys(after.waits)) {
		if d, requests := after.waits[level].Since(before.waits[level]); requests > 0 {
			logf("%s:   priority level %s: %d requests queued %s on average", name, level, requests, ms(d))
		}
	}
	return l, calls, nil
}

// callTimes are a webhook's calls as the API server timed them: the average, and the p99 read from
// the buckets of its histogram (bounds 5, 25, 100, 500 ms, 1, 2.5, 10, 25 s). readP99 is the
// highest p99 of the API server's answers to the reads a review of the quickstart makes (bounds
// 5, 25, 50, 100, 200 ms, …), over the same time.
type callTimes struct{ avg, p99, readP99 time.Duration }

// printTargets prints each webhook's own times and the run's targets. What a webhook adds to a
// request is its call, as the API server times it: the p99 target compares the calls' p99s. The
// difference of the loads' end-to-end p99s with and without the webhook says the same where the API
// server's own p99 holds still between the loads, and it does not on this machine: it is printed
// beside them. mdplane's mutating webhook reads nothing for the quickstart (its counts are
// declared); its validating one is compared.
func printTargets(oneByOne int, with, noop, without bench.LoadResult, mdplaneOne, mdplaneLoaded, noopOne, noopLoaded callTimes) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
	fmt.Printf("\n  the webhook's own calls, as the API server times them: %d reviews one by one, then under the load\n", oneByOne)
	fmt.Printf("  %-40s %12s %16s %16s\n", "webhook", "one by one", "under load", "p99 under load")
	fmt.Printf("  %-40s %12s %16s %16s\n", bench.ModelDeploymentWebhook, ms(mdplaneOne.avg), ms(mdplaneLoaded.avg), ms(mdplaneLoaded.p99))
	fmt.Printf("  %-40s %12s %16s %16s\n", bench.NoopWebhook, ms(noopOne.avg), ms(noopLoaded.avg), ms(noopLoaded.p99))
	ratio := 0.0
	if noopLoaded.p99 > 0 {
		ratio = float64(mdplaneLoaded.p99) / float64(noopLoaded.p99)
	}
	p99 := func(l bench.LoadResult) string { return ms(l.Percentile(0.99)) }
	bench.PrintTargets(os.Stdout, []bench.Target{
		{Name: "p99 of a call under the load, mdplane's webhook / a no-op", Got: ratio, AtMost: 1.5, Unit: "×",
			Figure: fmt.Sprintf("%s / %s (the loads' p99: %s, %s, without a webhook %s)", ms(mdplaneLoaded.p99), ms(noopLoaded.p99), p99(with), p99(noop), p99(without))},
		{Name: "one validating review of the quickstart, on average", Got: float64(mdplaneOne.avg.Microseconds()) / 1000, AtMost: 8, Unit: " ms",
			Figure: fmt.Sprintf("the no-op webhook's: %s", ms(noopOne.avg))},
	})
	fmt.Printf("  %-62s %d of %d\n", "requests refused through mdplane's webhooks (target: none)", with.Refused, with.Sent)
	// A review that reads afresh waits at least for one read the API server answers after the review
	// arrived, so no such webhook's p99 is below the p99 of those answers under the same load.
	if noopLoaded.p99 > 0 {
		fmt.Printf("  %-62s %6.2f×           %s / %s\n", "the least reachable reading afresh: a read's p99 / a no-op's",
			float64(mdplaneLoaded.readP99)/float64(noopLoaded.p99), ms(mdplaneLoaded.readP99), ms(noopLoaded.p99))
	}
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
