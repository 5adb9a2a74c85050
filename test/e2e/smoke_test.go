package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

const examples = "../../examples"

// Kueue's own fields on a Pod it manages; the project must never render, copy or drop them.
const (
	admissionGate   = "kueue.x-k8s.io/admission"
	managedFinalize = "kueue.x-k8s.io/managed"
)

// eventually polls check every second until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = check(); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s: not after %s: %v", what, timeout, err)
}

// readExample reads an example file, rewritten by replace pairs.
func readExample(t *testing.T, name string, replace ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examples, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.NewReplacer(replace...).Replace(string(b))
}

// kubectlApply applies a manifest with kubectl, as a person would.
func kubectlApply(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("apply", "-f", f); err != nil {
		t.Fatal(err)
	}
}

// kubectlApplyServerSide is kubectlApply as a server-side apply, which creates or updates each object
// in one request, taking over any field another manager set.
func kubectlApplyServerSide(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("apply", "--server-side", "--force-conflicts", "-f", f); err != nil {
		t.Fatal(err)
	}
}

// ownQueuesLabel on an InstanceType keeps mdplane from managing its queues: the test makes them.
const ownQueuesLabel = cluster.SuiteOwnQueuesLabel

// ownQueues labels the InstanceTypes of a manifest ownQueuesLabel; each must begin
// "kind: InstanceType\nmetadata:\n".
func ownQueues(manifest string) string {
	return strings.ReplaceAll(manifest, "kind: InstanceType\nmetadata:\n", "kind: InstanceType\nmetadata:\n  labels: {"+ownQueuesLabel+`: "true"}`+"\n")
}

// publishedStatus lists, per object of examples/cluster.yaml that shows a status, the fields of it
// the controllers must have written before a test uses the object: the InstanceTypes' entrance,
// phase and accelerator detail (the inventory's, from the stack's fake nodes), the pool's phase and
// client endpoint (from its external backend), the external backend's phase, the Binding's phase and
// quotas. Views that move with the Pods running (remaining,
// onceMaxRequest) are not compared. Conditions the file shows (the Binding's DomainClaimed) are
// compared by type, status and reason.
var publishedStatus = map[string][][]string{
	"InstanceType":       {{"entrance"}, {"phase"}, {"detail", "manufacturer"}, {"detail", "product"}, {"detail", "memory"}},
	"KVCachePool":        {{"phase"}, {"clientEndpoint"}},
	"KVCacheBackend":     {{"phase"}, {"phaseMessage"}},
	"KVCachePoolBinding": {{"phase"}, {"requestedQuota"}, {"effectiveQuota"}},
}

// awaitStatuses waits until the controllers have written, on every object of examples/cluster.yaml
// that shows a status, what the file shows (publishedStatus); its namespaced objects are read in
// namespace, where applyCluster put them. The test writes none of it.
func awaitStatuses(t *testing.T, ctx context.Context, namespace string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(examples, "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		want := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &want.Object); err != nil || want.Object["status"] == nil {
			continue
		}
		if want.GetNamespace() != "" {
			want.SetNamespace(namespace)
		}
		what := fmt.Sprintf("%s %s: the status examples/cluster.yaml shows, written by the controllers", want.GetKind(), want.GetName())
		eventually(t, 2*time.Minute, what, func() error {
			got := want.DeepCopy()
			if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				return err
			}
			for _, path := range publishedStatus[want.GetKind()] {
				field := append([]string{"status"}, path...)
				w, found, _ := unstructured.NestedString(want.Object, field...)
				if !found {
					continue
				}
				g, _, _ := unstructured.NestedString(got.Object, field...)
				if !sameValue(w, g) {
					message, _, _ := unstructured.NestedString(got.Object, "status", "phaseMessage")
					return fmt.Errorf("%s is %q, want %q (phaseMessage %q)", strings.Join(field, "."), g, w, message)
				}
			}
			return sameConditions(want, got)
		})
	}
}

// sameConditions reports the first condition want shows that got does not hold with the same status
// and reason.
func sameConditions(want, got *unstructured.Unstructured) error {
	wanted, _, _ := unstructured.NestedSlice(want.Object, "status", "conditions")
	held, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
	for _, w := range wanted {
		w, _ := w.(map[string]any)
		var found map[string]any
		for _, h := range held {
			if h, _ := h.(map[string]any); h["type"] == w["type"] {
				found = h
			}
		}
		if found == nil || found["status"] != w["status"] || found["reason"] != w["reason"] {
			return fmt.Errorf("condition %v is %v, want status %v reason %v", w["type"], found, w["status"], w["reason"])
		}
	}
	return nil
}

// sameValue compares two status values, quantities by amount (24Gi is 24576Mi).
func sameValue(want, got string) bool {
	if want == got {
		return true
	}
	w, errW := resource.ParseQuantity(want)
	g, errG := resource.ParseQuantity(got)
	return errW == nil && errG == nil && w.Cmp(g) == 0
}

// applyCluster applies examples/cluster.yaml with its namespaced objects in namespace and its
// InstanceTypes labelled ownQueuesLabel (the tests make their queues), and waits for the statuses
// the controllers derive (awaitStatuses).
func applyCluster(t *testing.T, ctx context.Context, namespace string) {
	t.Helper()
	// Server-side: parallel tests apply the same cluster-scoped types at once, and a client-side
	// apply that finds a type missing creates it, failing when another test created it meanwhile.
	kubectlApplyServerSide(t, ownQueues(readExample(t, "cluster.yaml", "name: team-a\n---", "name: "+namespace+"\n---", "namespace: team-a", "namespace: "+namespace,
		"    name: team-a\n    blockSize", "    name: "+namespace+"\n    blockSize")))
	awaitStatuses(t, ctx, namespace)
}

// queue creates a ClusterQueue (named after an InstanceType, as mdplane will) and the LocalQueue named
// after the type's entrance in namespace, with gpus of quota (and room for everything else) and the
// admission checks named. Its flavor, default-flavor, keeps the Pods to the stack's own fake nodes,
// off the nodes other tests add and count.
func queue(t *testing.T, ctx context.Context, clusterQueue, entrance, namespace string, gpus int64, checks ...kueuev1beta2.AdmissionCheckReference) {
	t.Helper()
	flavor := &kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "default-flavor"},
		Spec: kueuev1beta2.ResourceFlavorSpec{NodeLabels: map[string]string{cluster.PoolLabel: cluster.PoolStack}}}
	if err := stack.Client.Create(ctx, flavor); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	queueOfFlavor(t, ctx, flavor.Name, clusterQueue, entrance, namespace, gpus, checks...)
}

// queueOfFlavor is queue with the quota in flavor, which exists.
func queueOfFlavor(t *testing.T, ctx context.Context, flavor, clusterQueue, entrance, namespace string, gpus int64, checks ...kueuev1beta2.AdmissionCheckReference) {
	t.Helper()
	quota := func(name corev1.ResourceName, q resource.Quantity) kueuev1beta2.ResourceQuota {
		return kueuev1beta2.ResourceQuota{Name: name, NominalQuota: q}
	}
	cq := &kueuev1beta2.ClusterQueue{
		ObjectMeta: metav1.ObjectMeta{Name: clusterQueue},
		Spec: kueuev1beta2.ClusterQueueSpec{
			NamespaceSelector: &metav1.LabelSelector{},
			ResourceGroups: []kueuev1beta2.ResourceGroup{{
				CoveredResources: []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage, "nvidia.com/gpu"},
				Flavors: []kueuev1beta2.FlavorQuotas{{Name: kueuev1beta2.ResourceFlavorReference(flavor), Resources: []kueuev1beta2.ResourceQuota{
					quota(corev1.ResourceCPU, resource.MustParse("1000")),
					quota(corev1.ResourceMemory, resource.MustParse("20Ti")),
					quota(corev1.ResourceEphemeralStorage, resource.MustParse("100Ti")),
					quota("nvidia.com/gpu", *resource.NewQuantity(gpus, resource.DecimalSI)),
				}}},
			}},
		},
	}
	if len(checks) > 0 {
		cq.Spec.AdmissionChecksStrategy = &kueuev1beta2.AdmissionChecksStrategy{}
		for _, c := range checks {
			cq.Spec.AdmissionChecksStrategy.AdmissionChecks = append(cq.Spec.AdmissionChecksStrategy.AdmissionChecks, kueuev1beta2.AdmissionCheckStrategyRule{Name: c})
		}
	}
	if err := stack.Client.Create(ctx, cq); err != nil {
		t.Fatal(err)
	}
	lq := &kueuev1beta2.LocalQueue{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: entrance},
		Spec:       kueuev1beta2.LocalQueueSpec{ClusterQueue: kueuev1beta2.ClusterQueueReference(clusterQueue)},
	}
	if err := stack.Client.Create(ctx, lq); err != nil {
		t.Fatal(err)
	}
}

func pods(ctx context.Context, namespace, deployment string) ([]corev1.Pod, error) {
	list := &corev1.PodList{}
	err := stack.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{workerv1.LabelInstance: deployment})
	return list.Items, err
}

func workloads(ctx context.Context, namespace string) ([]kueuev1beta2.Workload, error) {
	list := &kueuev1beta2.WorkloadList{}
	err := stack.Client.List(ctx, list, client.InNamespace(namespace))
	return list.Items, err
}

// deploymentCondition reads the status of a condition of a ModelDeployment.
func deploymentCondition(ctx context.Context, namespace, name, typ string) (string, error) {
	c, err := deploymentConditionOf(ctx, namespace, name, typ)
	return c.Status, err
}

// condition is a condition as a person reads it.
type condition struct{ Status, Reason, Message string }

// deploymentConditionOf reads a condition of a ModelDeployment.
func deploymentConditionOf(ctx context.Context, namespace, name, typ string) (condition, error) {
	md := &unstructured.Unstructured{}
	md.SetAPIVersion(workerv1.SchemeGroupVersion.String())
	md.SetKind(workerv1.ModelDeploymentKind)
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md); err != nil {
		return condition{}, err
	}
	conditions, _, _ := unstructured.NestedSlice(md.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == typ {
			return condition{fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])}, nil
		}
	}
	return condition{}, fmt.Errorf("ModelDeployment %s/%s has no %s condition yet", namespace, name, typ)
}

// gated reports whether Kueue still holds a Pod with its admission gate.
func gated(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == admissionGate })
}

// eventSeen reports an error unless the namespace holds an event of reason whose message carries
// every part.
func eventSeen(ctx context.Context, namespace, reason string, parts ...string) error {
	evs := &corev1.EventList{}
	if err := stack.Client.List(ctx, evs, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, e := range evs.Items {
		all := e.Reason == reason
		for _, part := range parts {
			all = all && strings.Contains(e.Message, part)
		}
		if all {
			return nil
		}
	}
	return fmt.Errorf("no %s event with %q among %d events", reason, parts, len(evs.Items))
}

func ready(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// TestQwenChat applies the example deployment with two replicas on a queue with quota: Crossplane
// composes its Pods through the real render-roles function, Kueue admits each replica's group as one
// Workload named after the group, KWOK runs the Pods, and the deployment turns Ready. Deleting it
// removes its composites and Services at once, and its Pods and Workloads once mdplane deletes the
// Workloads of the departed groups.
func TestQwenChat(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-a")
	queue(t, ctx, "gpustack-nvidia-a10g-linux-amd64", "gpustack-fnv64-7bc37bef52624161", "team-a", 8)
	kubectlApply(t, readExample(t, "qwen-chat.yaml", "replicas: 4", "replicas: 2"))

	t.Run("each replica is admitted as one group and runs", func(t *testing.T) {
		eventually(t, 3*time.Minute, "two Ready Pods in two admitted Workloads named after their groups", func() error {
			ps, err := pods(ctx, "team-a", "qwen-chat")
			if err != nil {
				return err
			}
			if len(ps) != 2 {
				return fmt.Errorf("%d Pods", len(ps))
			}
			wls, err := workloads(ctx, "team-a")
			if err != nil {
				return err
			}
			admitted := map[string]bool{}
			for _, wl := range wls {
				admitted[wl.Name] = meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted)
			}
			for _, p := range ps {
				group := p.Labels[workerv1.LabelPodGroupName]
				if !admitted[group] {
					return fmt.Errorf("no admitted Workload %s for Pod %s (workloads: %v)", group, p.Name, admitted)
				}
				if p.Spec.NodeName == "" || !ready(p) {
					return fmt.Errorf("Pod %s not running and Ready yet (node %q)", p.Name, p.Spec.NodeName)
				}
				if gated(&p) {
					return fmt.Errorf("Pod %s still gated", p.Name)
				}
			}
			if ps[0].Labels[workerv1.LabelPodGroupName] == ps[1].Labels[workerv1.LabelPodGroupName] {
				return fmt.Errorf("two replicas share the group %s", ps[0].Labels[workerv1.LabelPodGroupName])
			}
			return nil
		})
		eventually(t, 2*time.Minute, "the ModelDeployment Ready", func() error {
			status, err := deploymentCondition(ctx, "team-a", "qwen-chat", "Ready")
			if err != nil || status != "True" {
				return fmt.Errorf("Ready=%s: %v", status, err)
			}
			return nil
		})
		// The Workloads are attributed to the role through their PodSet (named by the role-hash), and
		// the flavor Kueue admitted them on is reported.
		eventually(t, time.Minute, "status.roles[].assignedFlavors naming the queue's flavor", func() error {
			md := &unstructured.Unstructured{}
			md.SetGroupVersionKind(workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind))
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "qwen-chat"}, md); err != nil {
				return err
			}
			roles, _, _ := unstructured.NestedSlice(md.Object, "status", "roles")
			if len(roles) != 1 {
				return fmt.Errorf("status.roles: %v", roles)
			}
			if flavors, _, _ := unstructured.NestedStringSlice(roles[0].(map[string]any), "assignedFlavors"); !slices.Equal(flavors, []string{"default-flavor"}) {
				return fmt.Errorf("assignedFlavors %v", flavors)
			}
			return nil
		})
	})

	t.Run("deleting the deployment removes its Pods, Services and Workloads", func(t *testing.T) {
		if _, err := stack.Kubectl("delete", "modeldeployment", "qwen-chat", "-n", "team-a", "--wait=false"); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, "the composites and Services gone, the Pods terminating", func() error {
			svcs := &corev1.ServiceList{}
			if err := stack.Client.List(ctx, svcs, client.InNamespace("team-a"), client.MatchingLabels{workerv1.LabelInstance: "qwen-chat"}); err != nil {
				return err
			}
			replicas := &unstructured.UnstructuredList{}
			replicas.SetAPIVersion("internal.mdplane.io/v1alpha1")
			replicas.SetKind("ModelReplicaList")
			if err := stack.Client.List(ctx, replicas, client.InNamespace("team-a")); err != nil {
				return err
			}
			ps, err := pods(ctx, "team-a", "qwen-chat")
			if err != nil {
				return err
			}
			for _, p := range ps {
				if p.DeletionTimestamp == nil {
					return fmt.Errorf("Pod %s is not being deleted", p.Name)
				}
			}
			if len(svcs.Items)+len(replicas.Items) > 0 {
				return fmt.Errorf("%d Services, %d ModelReplicas remain", len(svcs.Items), len(replicas.Items))
			}
			return nil
		})
		// A serving group's Pods keep Kueue's finalizer until their Workload goes; mdplane deletes the
		// Workload of a group none of whose Pods is standing.
		eventually(t, 2*time.Minute, "nothing of qwen-chat left", func() error {
			ps, err := pods(ctx, "team-a", "qwen-chat")
			if err != nil {
				return err
			}
			wls, err := workloads(ctx, "team-a")
			if err != nil {
				return err
			}
			if len(ps)+len(wls) > 0 {
				return fmt.Errorf("%d Pods, %d Workloads remain", len(ps), len(wls))
			}
			return nil
		})
	})
}

// TestGatedPodsKeepKueueFields: without quota the Pods stay gated, and reconcile after reconcile of
// the compositions above them and of the members controller that created them, the scheduling gate
// and the finalizer Kueue's webhook added stay and no Pod is replaced.
func TestGatedPodsKeepKueueFields(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	applyCluster(t, ctx, "team-b")
	queue(t, ctx, "gpustack-nvidia-h20-linux-amd64", "gpustack-fnv64-796ced4e2897a3b4", "team-b", 0)
	kubectlApply(t, `apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: queued, namespace: team-b}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
    - {name: server, replicas: 2, instanceType: gpustack-nvidia-h20-linux-amd64, resources: {accelerator: 2}}
`)
	var uids []string
	gated := func() error {
		ps, err := pods(ctx, "team-b", "queued")
		if err != nil {
			return err
		}
		if len(ps) != 2 {
			return fmt.Errorf("%d Pods", len(ps))
		}
		var now []string
		for _, p := range ps {
			now = append(now, string(p.UID))
			if !gated(&p) {
				return fmt.Errorf("Pod %s lost the admission gate: %v", p.Name, p.Spec.SchedulingGates)
			}
			if !slices.Contains(p.Finalizers, managedFinalize) {
				return fmt.Errorf("Pod %s lost Kueue's finalizer: %v", p.Name, p.Finalizers)
			}
			if p.Spec.NodeName != "" {
				return fmt.Errorf("Pod %s was scheduled without quota", p.Name)
			}
		}
		slices.Sort(now)
		if uids != nil && !slices.Equal(uids, now) {
			return fmt.Errorf("Pods were replaced: %v -> %v", uids, now)
		}
		uids = now
		return nil
	}
	eventually(t, 2*time.Minute, "two gated Pods", gated)

	// Crossplane reconciles a composite again after the function's TTL (a minute) or on any change
	// to it or to what it composes, and the members controller a role's ModelReplicas on any change
	// to the role, so each round edits an annotation on the deployment and its ModelRoles (those in
	// Crossplane's name: nobody else may write them); Crossplane's log proves the deployment's
	// reconciles happened.
	// The members controller creates the Pods while Crossplane's first reconcile may still be
	// composing: the rounds begin once that reconcile has reported the deployment Synced.
	eventually(t, 2*time.Minute, "the deployment Synced", func() error {
		status, err := deploymentCondition(ctx, "team-b", "queued", "Synced")
		if err != nil || status != "True" {
			return fmt.Errorf("Synced %q (%v)", status, err)
		}
		return nil
	})
	before := deploymentReconciles(t, "team-b", "queued")
	asCrossplane := clientAs(t, cluster.CrossplaneUser)
	for round := range 4 {
		if _, err := stack.Kubectl("annotate", "--overwrite", "-n", "team-b", "modeldeployment/queued", fmt.Sprintf("e2e/round=%d", round)); err != nil {
			t.Fatal(err)
		}
		for _, list := range []client.ObjectList{&v1alpha1.ModelRoleList{}} {
			if err := stack.Client.List(ctx, list, client.InNamespace("team-b")); err != nil {
				t.Fatal(err)
			}
			for _, obj := range listedObjects(list) {
				patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"annotations":{"e2e/round":"%d"}}}`, round))
				if err := asCrossplane.Patch(ctx, obj, patch); err != nil {
					t.Fatal(err)
				}
			}
		}
		time.Sleep(3 * time.Second)
		if err := gated(); err != nil {
			t.Fatalf("after reconcile round %d: %v", round+1, err)
		}
		status, err := deploymentCondition(ctx, "team-b", "queued", "Synced")
		if err != nil || status != "True" {
			t.Fatalf("after reconcile round %d the deployment is not Synced (%s, %v): an apply failed", round+1, status, err)
		}
	}
	n := deploymentReconciles(t, "team-b", "queued") - before
	t.Logf("ModelDeployment team-b/queued: %d reconciles while gated", n)
	if n < 3 {
		t.Errorf("ModelDeployment team-b/queued was reconciled %d times during the check, want at least 3", n)
	}
	wls, err := workloads(ctx, "team-b")
	if err != nil {
		t.Fatal(err)
	}
	for _, wl := range wls {
		if meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved) {
			t.Errorf("Workload %s reserved quota on a queue without any", wl.Name)
		}
	}
}

// deploymentReconciles counts the reconciles of one ModelDeployment Crossplane logged.
func deploymentReconciles(t *testing.T, namespace, name string) int {
	t.Helper()
	log, err := os.ReadFile(stack.LogFile("crossplane"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "Reconciling") && strings.Contains(line, "composite/modeldeployments.worker.gpustack.ai") &&
			strings.Contains(line, fmt.Sprintf(`"name":%q,"namespace":%q`, name, namespace)) {
			n++
		}
	}
	return n
}
