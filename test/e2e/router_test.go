package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions/kv-cache/routers"
)

// TestLLMDRouterOnTheStack: a prefill/decode deployment under llm-d-router gets its router, whose
// Deployment runs on KWOK; the deployment's endpoint moves to the router only once a router replica
// is Ready, and RouterReady and the roleSummary's router count say so. Routers follow endpoint
// eligibility as the role Services do: once qualified, llm-d-router's endpoint selector and a
// vllm-router's --selector carry the eligibility term, so a replica whose member reports not ready
// (disqualified, its label removed) leaves the router's discovery while the healthy ones stay.
func TestLLMDRouterOnTheStack(t *testing.T) {
	parallelLong(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-l")
	queue(t, ctx, "llmd-router", "gpustack-fnv64-7bc37bef52624161", "team-l", 8) // a ClusterQueue of its own
	const a10g = "instanceType: gpustack-nvidia-a10g-linux-amd64, resources: {accelerator: 1}"
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: routed, namespace: team-l}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  router: {name: llm-d-router}
  roles:
    - {name: prefill, kind: Prefill, `+a10g+`}
    - {name: decode, kind: Decode, `+a10g+`}
---
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: argv, namespace: team-l}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  router: {name: vllm-router}
  roles:
    - {name: server, replicas: 2, `+a10g+`}
`)
	md := &unstructured.Unstructured{}
	md.SetAPIVersion(workerv1.SchemeGroupVersion.String())
	md.SetKind(workerv1.ModelDeploymentKind)
	key := client.ObjectKey{Namespace: "team-l", Name: "routed"}
	router := &appsv1.Deployment{}
	// The endpoint is watched from the start: it must not name the router before a router replica is
	// Ready.
	eventually(t, 3*time.Minute, "the router Ready and the endpoint on it", func() error {
		if err := stack.Client.Get(ctx, key, md); err != nil {
			return err
		}
		endpoint, _, _ := unstructured.NestedString(md.Object, "status", "endpoint")
		routerReady := false
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: "team-l", Name: "routed-router"}, router); err == nil {
			routerReady = router.Status.ReadyReplicas > 0
		}
		if strings.Contains(endpoint, "routed-router") && !routerReady {
			t.Fatalf("status.endpoint is %s while no router replica is Ready", endpoint)
		}
		if !routerReady {
			return fmt.Errorf("router Deployment not Ready (endpoint %q)", endpoint)
		}
		c, err := deploymentConditionOf(ctx, "team-l", "routed", "RouterReady")
		if err != nil || c.Status != "True" || c.Reason != "Ready" {
			return fmt.Errorf("RouterReady %+v: %v", c, err)
		}
		if endpoint != "http://routed-router.team-l.svc:8081" {
			return fmt.Errorf("endpoint %q", endpoint)
		}
		summary, _, _ := unstructured.NestedString(md.Object, "status", "roleSummary")
		if !strings.HasPrefix(summary, "1R") {
			return fmt.Errorf("roleSummary %q does not count the Ready router Pod", summary)
		}
		return nil
	})
	if got := []string{router.Spec.Template.Spec.Containers[0].Name, router.Spec.Template.Spec.Containers[1].Name}; got[0] != "envoy" || got[1] != "epp" {
		t.Errorf("router containers %v, want envoy then epp", got)
	}
	routerLeavesOutDisqualified(t, ctx, "team-l", "routed", "decode", llmdSelector)
	routerLeavesOutDisqualified(t, ctx, "team-l", "argv", "server", argvSelector)
	if _, err := stack.Kubectl("delete", "modeldeployment", "routed", "argv", "-n", "team-l", "--wait=false"); err != nil {
		t.Fatal(err)
	}
}

// selectorReader reads the discovery selector a deployment's router was rendered with.
type selectorReader func(ctx context.Context, namespace, deployment string) (labels.Selector, error)

// llmdSelector is llm-d-router's endpoint selector, from its ConfigMap.
func llmdSelector(ctx context.Context, namespace, deployment string) (labels.Selector, error) {
	cm := &corev1.ConfigMap{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment + "-router"}, cm); err != nil {
		return nil, err
	}
	return labels.Parse(cm.Data["endpoint-selector"])
}

// argvSelector is an argv router's --selector, its labels one per argument after the flag.
func argvSelector(ctx context.Context, namespace, deployment string) (labels.Selector, error) {
	d := &appsv1.Deployment{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment + "-router"}, d); err != nil {
		return nil, err
	}
	set := labels.Set{}
	args := d.Spec.Template.Spec.Containers[0].Args
	for i, a := range args {
		if a != "--selector" {
			continue
		}
		for _, l := range args[i+1:] {
			k, v, ok := strings.Cut(l, "=")
			if strings.HasPrefix(l, "-") || !ok {
				break
			}
			set[k] = v
		}
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("router %s-router has no --selector in %v", deployment, args)
	}
	return labels.SelectorFromSet(set), nil
}

// selectedEngines are the names of a deployment's standing engine Pods (not the router's) the
// router's selector selects, and the selector as it reads.
func selectedEngines(ctx context.Context, namespace, deployment string, read selectorReader) ([]string, string, error) {
	sel, err := read(ctx, namespace, deployment)
	if err != nil {
		return nil, "", err
	}
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return nil, "", err
	}
	var out []string
	for _, p := range ps {
		if _, router := p.Labels["modeldeployment.gpustack.ai/router"]; !router && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p.Name)
		}
	}
	slices.Sort(out)
	return out, sel.String(), nil
}

// routerLeavesOutDisqualified waits for the router's selector to carry the eligibility term over
// every qualified engine Pod, then reports one Pod of role not ready and waits for the router's
// selector to leave it out while it still selects the others.
func routerLeavesOutDisqualified(t *testing.T, ctx context.Context, namespace, deployment, role string, read selectorReader) {
	t.Helper()
	var engines []corev1.Pod
	eventually(t, 2*time.Minute, deployment+"'s router selects its qualified engines on the eligibility term", func() error {
		ps, err := pods(ctx, namespace, deployment)
		if err != nil {
			return err
		}
		engines = engines[:0]
		var want []string
		for _, p := range ps {
			if _, router := p.Labels["modeldeployment.gpustack.ai/router"]; router || p.DeletionTimestamp != nil {
				continue
			}
			if p.Labels[workerv1.LabelEndpointEligible] != "true" {
				return fmt.Errorf("Pod %s is not labelled eligible yet", p.Name)
			}
			engines = append(engines, p)
			want = append(want, p.Name)
		}
		slices.Sort(want)
		got, sel, err := selectedEngines(ctx, namespace, deployment, read)
		if err != nil {
			return err
		}
		if !strings.Contains(sel, workerv1.LabelEndpointEligible+"=true") || !slices.Equal(got, want) {
			return fmt.Errorf("router selector %q selects %v, want the eligibility term over %v", sel, got, want)
		}
		return nil
	})
	victim := engines[slices.IndexFunc(engines, func(p corev1.Pod) bool { return p.Labels[workerv1.LabelComponent] == role })]
	orig := victim.DeepCopy()
	for i, c := range victim.Status.Conditions {
		if c.Type == corev1.PodReady {
			victim.Status.Conditions[i].Status, victim.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, metav1.Now()
		}
	}
	if err := stack.Client.Status().Patch(ctx, &victim, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	var healthy []string
	for _, p := range engines {
		if p.Name != victim.Name {
			healthy = append(healthy, p.Name)
		}
	}
	slices.Sort(healthy)
	eventually(t, 30*time.Second, deployment+"'s router leaves out the disqualified "+victim.Name+" and keeps the healthy "+strings.Join(healthy, ", "), func() error {
		got, sel, err := selectedEngines(ctx, namespace, deployment, read)
		if err != nil {
			return err
		}
		if !slices.Equal(got, healthy) {
			return fmt.Errorf("router selector %q selects %v, want %v", sel, got, healthy)
		}
		return nil
	})
}

// routerSettles waits until a deployment's router carries the eligibility term (read by read) and
// has rolled onto it: its roles' qualification activates after they first serve, and the router
// then rolls once, so a test that watches the router's Pods or reads them by address starts after.
func routerSettles(t *testing.T, ctx context.Context, namespace, deployment string, read selectorReader) {
	t.Helper()
	eventually(t, 3*time.Minute, deployment+"'s router rolled onto the eligibility term", func() error {
		sel, err := read(ctx, namespace, deployment)
		if err != nil {
			return err
		}
		if !strings.Contains(sel.String(), workerv1.LabelEndpointEligible+"=true") {
			return fmt.Errorf("router selector %q has no eligibility term yet", sel)
		}
		d := &appsv1.Deployment{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment + "-router"}, d); err != nil {
			return err
		}
		// Crossplane writes the ConfigMap and the Deployment one after the other: the ConfigMap may
		// carry the term while the Deployment still runs the template of the data before it, and
		// rolls a moment later.
		cm := &corev1.ConfigMap{}
		switch err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment + "-router"}, cm); {
		case apierrors.IsNotFound(err): // an argv router: its configuration is its Deployment's
		case err != nil:
			return err
		case d.Spec.Template.Annotations[routers.AnnotationRouterConfig] != routers.DataHash(cm.Data):
			return fmt.Errorf("router Deployment's template carries configuration %.12s, its ConfigMap's is %.12s",
				d.Spec.Template.Annotations[routers.AnnotationRouterConfig], routers.DataHash(cm.Data))
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		if d.Status.ObservedGeneration != d.Generation || d.Status.UpdatedReplicas != want || d.Status.Replicas != want || d.Status.AvailableReplicas != want {
			return fmt.Errorf("router Deployment rolling: generation %d observed %d, %d updated, %d in all, %d available of %d",
				d.Generation, d.Status.ObservedGeneration, d.Status.UpdatedReplicas, d.Status.Replicas, d.Status.AvailableReplicas, want)
		}
		list := &corev1.PodList{}
		if err := stack.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		for _, p := range list.Items {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("router Pod %s still leaving", p.Name)
			}
		}
		return nil
	})
}
