package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/test/cluster"
)

// pool is the test's stand-in for a cluster autoscaler's node pool: it answers the
// ProvisioningRequests of its class in the test's namespaces as cluster-autoscaler's atomic class
// does, adding for each request a node per Pod (of product, with gpus each and the pool's labels),
// or refusing a request whose Pods no node of the pool could hold. It answers as many requests as
// it is allowed (none at first), so that a test can read what a deployment waiting for its nodes
// says.
type pool struct {
	t          *testing.T
	product    string
	gpus       int64
	labels     map[string]string
	namespaces []string

	mu      sync.Mutex
	allowed int // requests the pool may still answer; negative: any
	nodes   []string
}

// run answers the pool's requests until ctx ends.
func (p *pool) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
		for _, ns := range p.namespaces {
			list := &autoscalingv1.ProvisioningRequestList{}
			if err := stack.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				continue
			}
			for i := range list.Items {
				if err := p.answer(ctx, &list.Items[i]); err != nil && ctx.Err() == nil {
					p.t.Logf("pool: answering ProvisioningRequest %s/%s: %v", ns, list.Items[i].Name, err)
				}
			}
		}
	}
}

// added are the nodes the pool added.
func (p *pool) added() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.nodes...)
}

// allow lets the pool answer n more requests, any number when n is negative.
func (p *pool) allow(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n < 0 || p.allowed < 0 {
		p.allowed = -1
		return
	}
	p.allowed += n
}

// take takes one answer from the pool's allowance, reporting whether there was one.
func (p *pool) take() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.allowed < 0:
		return true
	case p.allowed == 0:
		return false
	}
	p.allowed--
	return true
}

// answer provisions or refuses one unanswered request of the pool's class.
func (p *pool) answer(ctx context.Context, pr *autoscalingv1.ProvisioningRequest) error {
	if pr.Spec.ProvisioningClassName != autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp ||
		apimeta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.Provisioned) != nil || apimeta.FindStatusCondition(pr.Status.Conditions, autoscalingv1.Failed) != nil {
		return nil
	}
	if !p.take() {
		return nil
	}
	pods := 0
	for _, ps := range pr.Spec.PodSets {
		template := &corev1.PodTemplate{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: pr.Namespace, Name: ps.PodTemplateRef.Name}, template); err != nil {
			return err
		}
		if why := p.cannotHold(template.Template.Spec); why != "" {
			return p.conclude(ctx, pr, autoscalingv1.Failed, "CapacityIsNotFound", "CA could not find requested capacity: "+why)
		}
		pods += int(ps.Count)
	}
	for range pods { // all of the request's nodes, or none: the atomic class
		name := fmt.Sprintf("%s-%d", ownName(p.t, "node"), len(p.added()))
		if _, err := stack.AddNode(ctx, cluster.NodeOptions{Name: name, Product: p.product, GPUs: int(p.gpus), Labels: p.labels}); err != nil {
			return err
		}
		p.mu.Lock()
		p.nodes = append(p.nodes, name)
		p.mu.Unlock()
	}
	return p.conclude(ctx, pr, autoscalingv1.Provisioned, "CapacityIsProvisioned", "Capacity is found in the cluster")
}

// cannotHold says why no node of the pool could hold a Pod of spec, as the autoscaler's simulation
// of its template node would: a node selector the pool's labels do not meet, or more GPUs than a
// node has; "" when one can.
func (p *pool) cannotHold(spec corev1.PodSpec) string {
	template := stack.NodeTemplate(cluster.NodeOptions{Name: "template", Product: p.product, GPUs: int(p.gpus), Labels: p.labels})
	for k, v := range spec.NodeSelector {
		if template.Labels[k] != v {
			return fmt.Sprintf("the pool's nodes are not labelled %s=%s", k, v)
		}
	}
	var gpus int64
	for _, c := range spec.Containers {
		q := c.Resources.Limits[cluster.GPUResource]
		gpus += q.Value()
	}
	if room := template.Status.Allocatable[cluster.GPUResource]; gpus > room.Value() {
		return fmt.Sprintf("a Pod asks %d %s, a node of the pool has %d", gpus, cluster.GPUResource, room.Value())
	}
	return ""
}

// conclude writes the answer as the autoscaler does, through the status subresource.
func (p *pool) conclude(ctx context.Context, pr *autoscalingv1.ProvisioningRequest, kind, reason, message string) error {
	apimeta.SetStatusCondition(&pr.Status.Conditions, metav1.Condition{Type: kind, Status: metav1.ConditionTrue, Reason: reason, Message: message})
	return stack.Client.Status().Update(ctx, pr)
}

// TestAnAutoscaledPoolGrowsForAWholeSet: an InstanceType backed by a node pool that grows on demand
// (the autoscaled-capacity annotation, no node yet) offers the pool's declared capacity as quota and
// admits each replica group through Kueue's ProvisioningRequest check beside the joint check. A
// deployment of two replicas, each needing a node that does not exist, says it waits for its nodes
// while the provisioner has not answered, and turns Ready on the two nodes the provisioner adds for
// it. A deployment whose request the provisioner refuses (a Pod larger than the pool's nodes) stays
// Pending, its status quoting the refusal.
func TestAnAutoscaledPoolGrowsForAWholeSet(t *testing.T) {
	parallelLong(t)
	ctx, stop := context.WithCancel(context.Background())
	ns, refusedNS := ownName(t, "ns"), ownName(t, "refused")
	const typeName, product = "autoscaled-nvidia-h800-linux-amd64", "NVIDIA-H800"
	p := &pool{t: t, product: product, gpus: 4, namespaces: []string{ns, refusedNS},
		labels: map[string]string{workerv1.InstanceTypeNodeLabel(typeName): "true"}} // the pool labels its nodes as the type's, as docs/operations.md asks
	go p.run(ctx)
	t.Cleanup(func() {
		stop()
		tearDown(t, context.Background(), ns)
		tearDown(t, context.Background(), refusedNS)
		for _, n := range p.added() {
			_ = stack.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		_ = stack.Client.Delete(context.Background(), &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: typeName}})
	})
	applyManagedType(t, ns, typeName, `
  acceleratable: true
  os: linux
  unitResources: {cpu: "2", ram: 8Gi}
  localStorage: 10Gi
  acceleratorGroup: nvidia-h800
  arch: amd64`)
	if _, err := stack.Kubectl("annotate", "instancetype", typeName, workerv1.AnnotationAutoscaledCapacity+"=16"); err != nil {
		t.Fatal(err)
	}
	awaitInstanceType(t, ctx, typeName, workerv1.InstanceTypePhasePreparing)

	kubectlApply(t, placementDeployment(ns, "grown", typeName, 2, 4))
	phase := func(namespace, name string, words ...string) func() error {
		return func() error {
			md := &workerv1.ModelDeployment{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md); err != nil {
				return err
			}
			for _, w := range words {
				if !strings.Contains(md.Status.PhaseMessage, w) {
					return fmt.Errorf("phase %s: %q, want it to say %q", md.Status.Phase, md.Status.PhaseMessage, w)
				}
			}
			return nil
		}
	}
	eventually(t, 3*time.Minute, "the deployment saying its replicas wait for their nodes, both requests made", func() error {
		if err := phase(ns, "grown", "waiting for its nodes to be provisioned (check mdplane-provisioning-best-effort-atomic-scale-up-")(); err != nil {
			return err
		}
		list := &autoscalingv1.ProvisioningRequestList{}
		if err := stack.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 2 {
			return fmt.Errorf("%d ProvisioningRequests, want one per replica group", len(list.Items))
		}
		return nil
	})
	gated := func(when string) {
		t.Helper()
		ps, err := pods(ctx, ns, "grown")
		if err != nil {
			t.Fatal(err)
		}
		for _, pod := range ps {
			if pod.Spec.NodeName != "" || len(pod.Spec.SchedulingGates) == 0 {
				t.Errorf("Pod %s started (node %q, gates %v) %s", pod.Name, pod.Spec.NodeName, pod.Spec.SchedulingGates, when)
			}
		}
	}
	gated("before its nodes were provisioned")

	// One group's nodes provisioned: the joint check holds both until the other's are. (Its message
	// keeps the count it was first written with: a wait of the same kind is not rewritten.)
	p.allow(1)
	eventually(t, 2*time.Minute, "one group's nodes provisioned, the joint check holding it for its sibling's", func() error {
		wls := &kueuev1beta2.WorkloadList{}
		if err := stack.Client.List(ctx, wls, client.InNamespace(ns)); err != nil {
			return err
		}
		var states []string
		for _, wl := range wls.Items {
			var joint, provisioned string
			for _, c := range wl.Status.AdmissionChecks {
				switch {
				case c.Name == admissioncheck.CheckName:
					joint = string(c.State) + ": " + c.Message
				case strings.HasPrefix(string(c.Name), workerv1.ProvisioningCheckPrefix):
					provisioned = string(c.State)
				}
			}
			if provisioned == string(kueuev1beta2.CheckStateReady) && strings.HasPrefix(joint, "Pending: held until every replica group's other admission checks are Ready") {
				return nil
			}
			states = append(states, fmt.Sprintf("%s: provisioning %q, joint %q", wl.Name, provisioned, joint))
		}
		return fmt.Errorf("no provisioned group held for its sibling: %v", states)
	})
	gated("while its sibling's nodes were not provisioned")

	p.allow(-1)
	eventually(t, 4*time.Minute, "both replicas running on the two nodes the pool added", func() error { return running(ctx, ns, "grown", 2) })
	ps, err := pods(ctx, ns, "grown")
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range ps {
		if !strings.HasPrefix(pod.Spec.NodeName, ownName(t, "node")) || pod.Annotations[autoscalingv1.ProvisioningRequestPodAnnotationKey] == "" {
			t.Errorf("Pod %s on node %q, consuming request %q: want a node the pool added for its request", pod.Name, pod.Spec.NodeName, pod.Annotations[autoscalingv1.ProvisioningRequestPodAnnotationKey])
		}
	}
	if added := p.added(); len(added) != 2 {
		t.Errorf("the pool added nodes %v, want two", added)
	}

	kubectlApply(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+refusedNS+"}\n")
	kubectlApply(t, placementDeployment(refusedNS, "refused", typeName, 1, 8))
	// Kueue holds a refused check in Retry, the group's quota kept, until its backoff ends (a minute,
	// doubling), then asks again at once: the deployment says so for all but a moment of it.
	eventually(t, 3*time.Minute, "the deployment the pool refused quoting the refusal and when Kueue asks again",
		phase(refusedNS, "refused", "the node provisioner refused the group's nodes ", " time(s): CA could not find requested capacity", "; Kueue asks again at "))
	md := &workerv1.ModelDeployment{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: refusedNS, Name: "refused"}, md); err != nil {
		t.Fatal(err)
	}
	if md.Status.Phase == workerv1.PhaseReady {
		t.Errorf("the refused deployment is %s: %s", md.Status.Phase, md.Status.PhaseMessage)
	}
	t.Logf("refused: %s: %s", md.Status.Phase, md.Status.PhaseMessage)
}
