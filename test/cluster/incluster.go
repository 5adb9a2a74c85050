package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What the stack runs in the cluster, as Pods on the real node: mdplane's two Deployments (the
// install manifest's), Crossplane's (its chart's) and the Functions' (Crossplane's runtime). A test
// takes them down and brings them back through the API, as an outage or an operator would: a killed
// Pod is deleted at once (no grace, as a crashed or evicted Pod ends: no lease released), a
// component held down is scaled to zero.
const (
	// ControllersReplicas and WebhookReplicas are the replicas of the install manifest's Deployments.
	ControllersReplicas = 2
	WebhookReplicas     = 2
	// controllersLease is the leader lease the replicas of mdplane-controllers elect by.
	controllersLease = "mdplane-controllers.worker.gpustack.ai"
	// webhookPort is the port mdplane-webhooks serve on in their Pods.
	webhookPort = 9443
	// controllersMetricsPort is where mdplane-controllers' program, as the controllers and as the
	// webhooks, serves its Prometheus metrics.
	controllersMetricsPort = 8080
)

// ControllersUser is the name mdplane-controllers authenticates as: its ServiceAccount's.
const ControllersUser = "system:serviceaccount:" + Namespace + ":mdplane-controllers"

// runningPods are the Pods of a Deployment's selector that are not terminating, by name.
func (s *Stack) runningPods(ctx context.Context, namespace string, selector map[string]string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := s.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(selector)); err != nil {
		return nil, err
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed && p.Status.Phase != corev1.PodSucceeded {
			pods = append(pods, p)
		}
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return pods, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// killPod deletes a Pod at once, without grace, and waits until it is gone and kube-proxy no longer
// sends a Service's connections to its address: until then a connection may still reach the dying
// Pod, as on any cluster, and a test would measure kube-proxy's lag rather than what it tests.
func (s *Stack) killPod(ctx context.Context, p *corev1.Pod) error {
	err := s.Client.Delete(ctx, p, client.GracePeriodSeconds(0))
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := waitFor(ctx, nil, time.Minute, "Pod "+p.Name+" gone", func() error {
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	}); err != nil || p.Status.PodIP == "" {
		return err
	}
	return waitFor(ctx, nil, time.Minute, "kube-proxy without "+p.Status.PodIP, func() error {
		rules, err := kubeProxyRules(ctx)
		if err != nil {
			return err
		}
		if routesTo(rules, p.Status.PodIP) {
			return errors.New("still an endpoint")
		}
		return nil
	})
}

// kubeProxyRules is the ruleset kube-proxy keeps for the node's IPv4 Services.
func kubeProxyRules(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "nft", "list", "table", "ip", "kube-proxy").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("nft list table ip kube-proxy: %w: %s", err, out)
	}
	return string(out), nil
}

// routesTo says whether kube-proxy's ruleset sends connections to an address: a rule translates to
// it ("dnat to 10.244.0.5:9443"), or, from Kubernetes v1.37, an element of a Service's map of
// endpoints does ("dnat ip addr . port to numgen random mod 2 map { 0 : 10.244.0.5 . 9443, ... }").
// The chain of an endpoint gone is emptied at once but keeps its name, the address in it, until a
// later sync deletes it.
func routesTo(ruleset, ip string) bool {
	return strings.Contains(ruleset, "dnat to "+ip+":") || strings.Contains(ruleset, ": "+ip+" . ")
}

// scaleDown kills a Deployment's Pods and scales it to zero, and scaleUp scales it back and waits
// until it is available. The Pods are listed before the scale: once scaled, the ReplicaSet begins
// their graceful deletion, and each is still killed without grace (a grace period can be shortened),
// so none shuts down cleanly or hands over its lease.
func (s *Stack) scaleDown(ctx context.Context, namespace, deployment string, selector map[string]string) error {
	pods, err := s.runningPods(ctx, namespace, selector)
	if err != nil {
		return err
	}
	if err := s.scale(ctx, namespace, deployment, 0); err != nil {
		return err
	}
	for i := range pods {
		if err := s.killPod(ctx, &pods[i]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Stack) scaleUp(ctx context.Context, namespace, deployment string, replicas int32) error {
	if err := s.scale(ctx, namespace, deployment, replicas); err != nil {
		return err
	}
	return waitFor(ctx, nil, 3*time.Minute, deployment+" available", func() error { return s.deploymentAvailable(ctx, namespace, deployment) })
}

func (s *Stack) scale(ctx context.Context, namespace, deployment string, replicas int32) error {
	d := &unstructured.Unstructured{}
	d.SetAPIVersion("apps/v1")
	d.SetKind("Deployment")
	d.SetNamespace(namespace)
	d.SetName(deployment)
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	return s.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(patch)))
}

var (
	controllersSelector = map[string]string{"app.kubernetes.io/name": "mdplane-controllers"}
	webhooksSelector    = map[string]string{"app.kubernetes.io/name": "mdplane-webhooks"}
	crossplaneSelector  = map[string]string{"app": "crossplane"}
)

// KillControllers takes mdplane-controllers down: every replica killed, none started again until
// StartControllers.
func (s *Stack) KillControllers(ctx context.Context) error {
	return s.scaleDown(ctx, Namespace, "mdplane-controllers", controllersSelector)
}

// StartControllers brings mdplane-controllers back to its replicas and waits until one of them
// leads.
func (s *Stack) StartControllers(ctx context.Context) error {
	if err := s.scaleUp(ctx, Namespace, "mdplane-controllers", ControllersReplicas); err != nil {
		return err
	}
	return waitFor(ctx, nil, 2*time.Minute, "a leader of mdplane-controllers", func() error {
		if !s.Leads() {
			return errors.New("no running replica holds the leader lease")
		}
		return nil
	})
}

// StandbyControllers waits until both replicas of mdplane-controllers run, one leading and the
// other standing by, and returns the standby's name.
func (s *Stack) StandbyControllers(ctx context.Context) (string, error) {
	var standby string
	err := waitFor(ctx, nil, 2*time.Minute, "a leader and a standby of mdplane-controllers", func() error {
		leader, err := s.controllersLeader(ctx)
		if err != nil {
			return err
		}
		pods, err := s.runningPods(ctx, Namespace, controllersSelector)
		if err != nil {
			return err
		}
		for i := range pods {
			if pods[i].Name != leader.Name && podReady(&pods[i]) {
				standby = pods[i].Name
				return nil
			}
		}
		return fmt.Errorf("%d replicas running beside the leader %s, none ready", len(pods)-1, leader.Name)
	})
	return standby, err
}

// controllersLeader is the running, ready replica of mdplane-controllers that holds the lease.
func (s *Stack) controllersLeader(ctx context.Context) (*corev1.Pod, error) {
	lease := &coordinationv1.Lease{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: Namespace, Name: controllersLease}, lease); err != nil {
		return nil, err
	}
	// controller-runtime's identity is the host name (the Pod's name) and a suffix.
	holder, _, _ := strings.Cut(ptr.Deref(lease.Spec.HolderIdentity, ""), "_")
	pods, err := s.runningPods(ctx, Namespace, controllersSelector)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Name == holder && podReady(&pods[i]) {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("the lease's holder %q is not a running replica", holder)
}

// KillLeaderControllers kills the replica of mdplane-controllers that holds the leader lease, and
// returns its name; the Deployment starts a new standby, and the other replica takes the lease
// once it lapses.
func (s *Stack) KillLeaderControllers(ctx context.Context) (string, error) {
	leader, err := s.controllersLeader(ctx)
	if err != nil {
		return "", err
	}
	return leader.Name, s.killPod(ctx, leader)
}

// Leads reports whether a running replica of mdplane-controllers holds the leader lease.
func (s *Stack) Leads() bool {
	_, err := s.controllersLeader(context.Background())
	return err == nil
}

// ControllersMetricsURL is the Prometheus endpoint of the leading replica of mdplane-controllers,
// or "" when none leads.
func (s *Stack) ControllersMetricsURL() string {
	leader, err := s.controllersLeader(context.Background())
	if err != nil || leader.Status.PodIP == "" {
		return ""
	}
	return "http://" + net.JoinHostPort(leader.Status.PodIP, strconv.Itoa(controllersMetricsPort)) + "/metrics"
}

// WebhooksMetricsURLs are the Prometheus endpoints of the running replicas of mdplane-webhooks, by
// Pod name.
func (s *Stack) WebhooksMetricsURLs(ctx context.Context) (map[string]string, error) {
	pods, err := s.runningPods(ctx, Namespace, webhooksSelector)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, pod := range pods {
		if pod.Status.PodIP != "" {
			out[pod.Name] = "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(controllersMetricsPort)) + "/metrics"
		}
	}
	return out, nil
}

// WebhookAddress is where replica i of mdplane-webhooks (the running Pods, by name) serves, or ""
// when it is not running and ready.
func (s *Stack) WebhookAddress(i int) string {
	pods, err := s.runningPods(context.Background(), Namespace, webhooksSelector)
	if err != nil || i >= len(pods) || !podReady(&pods[i]) || pods[i].Status.PodIP == "" {
		return ""
	}
	return net.JoinHostPort(pods[i].Status.PodIP, strconv.Itoa(webhookPort))
}

// KillWebhook kills replica i of mdplane-webhooks and waits until its Service no longer sends it
// requests; the Deployment starts a replacement.
func (s *Stack) KillWebhook(ctx context.Context, i int) error {
	pods, err := s.runningPods(ctx, Namespace, webhooksSelector)
	if err != nil {
		return err
	}
	if i >= len(pods) {
		return fmt.Errorf("no replica %d of mdplane-webhooks: %d run", i, len(pods))
	}
	ip := pods[i].Status.PodIP
	if err := s.killPod(ctx, &pods[i]); err != nil {
		return err
	}
	return waitFor(ctx, nil, time.Minute, "the webhook Service without "+ip, func() error {
		ready, err := s.serviceEndpoints(ctx, Namespace, "mdplane-webhook")
		if err != nil {
			return err
		}
		if slices.Contains(ready, ip) {
			return errors.New("still an endpoint")
		}
		return nil
	})
}

// StopWebhooks takes every replica of mdplane-webhooks down until StartWebhooks.
func (s *Stack) StopWebhooks(ctx context.Context) error {
	if err := s.scaleDown(ctx, Namespace, "mdplane-webhooks", webhooksSelector); err != nil {
		return err
	}
	return waitFor(ctx, nil, time.Minute, "the webhook Service without endpoints", func() error {
		ready, err := s.serviceEndpoints(ctx, Namespace, "mdplane-webhook")
		if err == nil && len(ready) > 0 {
			err = fmt.Errorf("endpoints %v", ready)
		}
		return err
	})
}

// StartWebhooks waits until every replica of mdplane-webhooks serves again (scaling them back after
// StopWebhooks) and the Service sends requests to each.
func (s *Stack) StartWebhooks(ctx context.Context) error {
	if err := s.scaleUp(ctx, Namespace, "mdplane-webhooks", WebhookReplicas); err != nil {
		return err
	}
	return s.webhooksRouted(ctx, WebhookReplicas)
}

// webhooksRouted waits until the webhook Service has want ready endpoints and kube-proxy sends its
// connections to each: an endpoint becomes ready in the API before kube-proxy's next sync routes
// to it, and meanwhile the API server's calls to the webhooks are refused.
func (s *Stack) webhooksRouted(ctx context.Context, want int) error {
	return waitFor(ctx, nil, time.Minute, "the webhook Service's endpoints routed by kube-proxy", func() error {
		ready, err := s.serviceEndpoints(ctx, Namespace, "mdplane-webhook")
		if err != nil {
			return err
		}
		if len(ready) < want {
			return fmt.Errorf("endpoints %v", ready)
		}
		rules, err := kubeProxyRules(ctx)
		if err != nil {
			return err
		}
		for _, ip := range ready {
			if !routesTo(rules, ip) {
				return fmt.Errorf("kube-proxy does not route to %s yet", ip)
			}
		}
		return nil
	})
}

// serviceEndpoints are the ready addresses of a Service's EndpointSlices.
func (s *Stack) serviceEndpoints(ctx context.Context, namespace, service string) ([]string, error) {
	slices := &discoveryv1.EndpointSliceList{}
	if err := s.Client.List(ctx, slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return nil, err
	}
	var ready []string
	for _, sl := range slices.Items {
		for _, e := range sl.Endpoints {
			if ptr.Deref(e.Conditions.Ready, false) {
				ready = append(ready, e.Addresses...)
			}
		}
	}
	return ready, nil
}

// KillComponent takes a component down until StartComponent: "crossplane" (its Deployment), or
// "kueue" (a process of the stack's, killed with SIGKILL: no cleanup, no lease released).
func (s *Stack) KillComponent(ctx context.Context, name string) error {
	if name == "crossplane" {
		return s.scaleDown(ctx, CrossplaneNamespace, "crossplane", crossplaneSelector)
	}
	r := s.restartables[name]
	if r == nil {
		return fmt.Errorf("the stack runs no restartable component %s", name)
	}
	r.process.kill()
	return nil
}

// StartComponent brings a component KillComponent took down back and waits until it is ready.
func (s *Stack) StartComponent(ctx context.Context, name string) error {
	if name == "crossplane" {
		return s.scaleUp(ctx, CrossplaneNamespace, "crossplane", 1)
	}
	r := s.restartables[name]
	if r == nil {
		return fmt.Errorf("the stack runs no restartable component %s", name)
	}
	if r.process.exited() == nil {
		return fmt.Errorf("%s is running", name)
	}
	return s.launch(ctx, r)
}

// stoppedRuntime is a DeploymentRuntimeConfig of no replicas: a Function whose runtime it is runs
// no Pod.
const stoppedRuntime = "mdplane-stack-stopped"

// KillFunction takes a composition Function down until StartFunction, as an administrator stops a
// package's Pods: an ImageConfig gives the runtime of the Function's image no replica (an override
// of the image's runtime, which leaves the Function and its revisions as they are), so Crossplane's
// calls to it find no Pod.
func (s *Stack) KillFunction(ctx context.Context, name string) error {
	drc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "DeploymentRuntimeConfig",
		"metadata": map[string]any{"name": stoppedRuntime},
		"spec": map[string]any{"deploymentTemplate": map[string]any{"spec": map[string]any{
			"replicas": int64(0), "selector": map[string]any{}, "template": map[string]any{}}}}}}
	err := s.Client.Create(ctx, drc)
	if client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	stop := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "pkg.crossplane.io/v1beta1", "kind": "ImageConfig",
		"metadata": map[string]any{"name": stoppedRuntime + "-" + name},
		"spec": map[string]any{
			"matchImages": []any{map[string]any{"type": "Prefix", "prefix": s.Registry + "/" + strings.Replace(name, "mdplane-", "mdplane/", 1) + ":"}},
			"runtime":     map[string]any{"configRef": map[string]any{"name": stoppedRuntime}},
		}}}
	if err := client.IgnoreAlreadyExists(s.Client.Create(ctx, stop)); err != nil {
		return err
	}
	nudge := s.nudgingRevisions(ctx, name)
	return waitFor(ctx, nil, 2*time.Minute, "the Function "+name+" without Pods", func() error {
		if err := nudge(); err != nil {
			return err
		}
		pods, err := s.runningPods(ctx, CrossplaneNamespace, map[string]string{"pkg.crossplane.io/function": name})
		if err == nil && len(pods) > 0 {
			err = fmt.Errorf("%d Pods", len(pods))
		}
		return err
	})
}

// StartFunction removes what KillFunction did and waits until the Function serves again.
func (s *Stack) StartFunction(ctx context.Context, name string) error {
	stop := &unstructured.Unstructured{}
	stop.SetAPIVersion("pkg.crossplane.io/v1beta1")
	stop.SetKind("ImageConfig")
	stop.SetName(stoppedRuntime + "-" + name)
	err := s.Client.Delete(ctx, stop)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	nudge := s.nudgingRevisions(ctx, name)
	return waitFor(ctx, nil, 3*time.Minute, "the Function "+name+" serving", func() error {
		if err := nudge(); err != nil {
			return err
		}
		pods, err := s.runningPods(ctx, CrossplaneNamespace, map[string]string{"pkg.crossplane.io/function": name})
		if err != nil {
			return err
		}
		for i := range pods {
			if podReady(&pods[i]) {
				return nil
			}
		}
		return errors.New("no Pod ready")
	})
}

// nudgeRevisions annotates a Function's revisions, so that Crossplane's runtime reconciles them now:
// it looks an image's runtime override up at each reconcile, but an ImageConfig that only
// overrides the runtime does not wake it (Crossplane v2.4 wakes revisions for an ImageConfig's
// rewrites and pull secrets alone).
func (s *Stack) nudgeRevisions(ctx context.Context, name string) error {
	revisions := &unstructured.UnstructuredList{}
	revisions.SetAPIVersion("pkg.crossplane.io/v1")
	revisions.SetKind("FunctionRevisionList")
	if err := s.Client.List(ctx, revisions, client.MatchingLabels{"pkg.crossplane.io/package": name}); err != nil {
		return err
	}
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"mdplane.test/runtime-override":%q}}}`, time.Now().Format(time.RFC3339Nano))
	for i := range revisions.Items {
		if err := s.Client.Patch(ctx, &revisions.Items[i], client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return err
		}
	}
	return nil
}

// nudgingRevisions is a check step that nudges a Function's revisions now and every ten seconds
// after: Crossplane reads ImageConfigs through a cache fed by a watch of their own, so the
// reconcile a nudge starts may not see yet the ImageConfig just created or deleted, and nothing
// else wakes the revision again.
func (s *Stack) nudgingRevisions(ctx context.Context, name string) func() error {
	var last time.Time
	return func() error {
		if time.Since(last) < 10*time.Second {
			return nil
		}
		last = time.Now()
		return s.nudgeRevisions(ctx, name)
	}
}

// FunctionNames are the Functions mdplane's Compositions call, by the names KillFunction takes.
func (s *Stack) FunctionNames() []string { return compositionFunctions() }

// RegistryCA is the file of the CA bundle the stack's registry is trusted through, for a client
// such as the Crossplane CLI to push with (SSL_CERT_FILE).
func (s *Stack) RegistryCA() string { return filepath.Join(s.Dir, "certs", "registry-ca.crt") }
