package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/engine"
	"github.com/mdplane/mdplane/apis/naming"
	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/elastic"
)

// applyCPUType creates a CPU-only InstanceType labelled ownQueuesLabel (its queues are the test's,
// not mdplane's) and waits until the controllers have published its entrance and found it Active
// (it takes every linux/amd64 node's CPU); it is deleted when the test ends.
func applyCPUType(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	kubectlApply(t, ownQueues(`apiVersion: worker.gpustack.ai/v1
kind: InstanceType
metadata:
  name: `+name+`
spec: {acceleratable: false, os: linux, arch: amd64, unitResources: {cpu: "1", ram: 2Gi}, localStorage: 10Gi}
`))
	t.Cleanup(func() {
		_ = stack.Client.Delete(ctx, &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	awaitInstanceType(t, ctx, name, workerv1.InstanceTypePhaseActive)
}

// elasticDeployment is an Elastic EP deployment of one role on the A10G type of examples/cluster.yaml;
// roleFields are the role's other fields.
func elasticDeployment(namespace, name, roleFields string) string {
	return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-30B-A3B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.29.0}
  roles:
    - {name: server, instanceType: gpustack-nvidia-a10g-linux-amd64, %s}
`, name, namespace, roleFields)
}

// TestOnARoleCarryingElasticEpSizeInstanceTypeResourcesAndCommandAreFrozen: the rule refuses a size
// edit with its own message, and admits an identical update (the accelerator count the mutating
// webhook defaulted, "1", written back as the number 1 included) and a width increase.
func TestOnARoleCarryingElasticEpSizeInstanceTypeResourcesAndCommandAreFrozen(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	const head = "e2e-elastic-head-frozen"
	applyCPUType(t, ctx, head)
	width := func(n int, more string) string {
		return elasticDeployment(ns, "frozen", fmt.Sprintf("%selasticEp: {width: %d, headInstanceType: %s}", more, n, head))
	}
	kubectlApply(t, width(2, ""))
	eventually(t, time.Minute, "Crossplane's finalizer on the deployment", func() error {
		md, err := modelDeployment(ctx, ns, "frozen")
		if err != nil {
			return err
		}
		if len(md.Finalizers) == 0 {
			return fmt.Errorf("no finalizer yet")
		}
		return nil
	})
	// kubectl apply sends nothing for an unchanged manifest: these are real writes of the same spec.
	if out, err := stack.Kubectl("annotate", "modeldeployment", "frozen", "-n", ns, "e2e/touched=1"); err != nil {
		t.Fatalf("an identical update was refused:\n%s", out)
	}
	kubectlApply(t, width(2, "resources: {accelerator: 1}, "))
	kubectlApply(t, width(3, "resources: {accelerator: 1}, "))
	out := applyRefused(t, width(3, "size: 2, "))
	if !strings.Contains(out, validation.ElasticFrozenMessage) || strings.Contains(out, "expected int") {
		t.Errorf("the size edit was not refused with the rule's message:\n%s", out)
	}
}

// elasticPods are a deployment's standing Pods: the Ray head's and the members' by ordinal.
func elasticPods(ctx context.Context, namespace, deployment string) (head *corev1.Pod, members map[string]corev1.Pod, err error) {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return nil, nil, err
	}
	members = map[string]corev1.Pod{}
	for i := range ps {
		p := ps[i]
		switch {
		case p.DeletionTimestamp != nil:
		case p.Labels[workerv1.LabelComponent] == naming.ElasticHeadName(deployment):
			head = &p
		default:
			members[p.Labels[workerv1.LabelPodOrdinal]] = p
		}
	}
	return head, members, nil
}

// elasticRunning waits until the head and width members run and are Ready, and returns them.
func elasticRunning(t *testing.T, ctx context.Context, namespace, deployment string, width int) (*corev1.Pod, map[string]corev1.Pod) {
	t.Helper()
	var head *corev1.Pod
	var members map[string]corev1.Pod
	eventually(t, 3*time.Minute, fmt.Sprintf("the Ray head and %d members running", width), func() error {
		var err error
		if head, members, err = elasticPods(ctx, namespace, deployment); err != nil {
			return err
		}
		if head == nil || head.Spec.NodeName == "" || !ready(*head) {
			return fmt.Errorf("no running Ray head yet")
		}
		if len(members) != width {
			return fmt.Errorf("%d members, want %d", len(members), width)
		}
		for _, p := range members {
			if p.Spec.NodeName == "" || !ready(p) {
				// The Pod's own words: which condition holds it, and since when.
				return fmt.Errorf("member %s not running and Ready yet (node %q, phase %s, conditions %+v, written by %s)",
					p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, writers(p))
			}
		}
		return nil
	})
	return head, members
}

// writers names who last wrote each part of a Pod, and when: which component moved a condition.
func writers(p corev1.Pod) string {
	var out []string
	for _, m := range p.ManagedFields {
		at := ""
		if m.Time != nil {
			at = m.Time.UTC().Format("15:04:05")
		}
		out = append(out, fmt.Sprintf("%s %s %s at %s", m.Manager, m.Operation, m.Subresource, at))
	}
	return strings.Join(out, "; ")
}

// observation reads a deployment's observation document.
func observation(ctx context.Context, namespace, deployment string) (elastic.Observation, error) {
	var o elastic.Observation
	md, err := modelDeployment(ctx, namespace, deployment)
	if err != nil {
		return o, err
	}
	cm := &corev1.ConfigMap{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: naming.ElasticObservationName(string(md.UID))}, cm); err != nil {
		return o, err
	}
	if cm.Labels[elastic.LabelObservation] != "true" || metav1.GetControllerOf(cm) == nil || metav1.GetControllerOf(cm).UID != md.UID {
		return o, fmt.Errorf("the observation ConfigMap is not labelled or not controlled by the deployment: %v %v", cm.Labels, cm.OwnerReferences)
	}
	err = json.Unmarshal([]byte(cm.Data[elastic.ObservationKey]), &o)
	return o, err
}

// operationRecord reads a deployment's operation record.
func operationRecord(t *testing.T, ctx context.Context, namespace, deployment string) elastic.Operation {
	t.Helper()
	var rec elastic.Operation
	md, err := modelDeployment(ctx, namespace, deployment)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: elastic.OperationName(string(md.UID))}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Labels[elastic.LabelOperation] != "true" || metav1.GetControllerOf(cm) == nil || metav1.GetControllerOf(cm).UID != md.UID {
		t.Errorf("the operation record is not labelled or not controlled by the deployment: %v %v", cm.Labels, cm.OwnerReferences)
	}
	if err := json.Unmarshal([]byte(cm.Data[elastic.OperationKey]), &rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

// awaitResizeCondition waits until the deployment's ElasticResize condition holds what.
func awaitResizeCondition(t *testing.T, ctx context.Context, namespace, deployment, what string, holds func(xpv2.Condition) bool) {
	t.Helper()
	eventually(t, time.Minute, "ElasticResize: "+what, func() error {
		md, err := modelDeployment(ctx, namespace, deployment)
		if err != nil {
			return err
		}
		if c := md.Status.GetCondition(elastic.ConditionResize); !holds(c) {
			return fmt.Errorf("%+v", c)
		}
		return nil
	})
}

// TestElasticEP: an Elastic EP deployment of width 2 runs a CPU-only Ray head (admitted through its
// type's queue) and two members: the master wrapped with the data-parallel flags of its boot width,
// the worker joining Ray; the head Service and the observation ConfigMap are there. Width 2 → 3 adds
// one member and replaces none, and once it is Ready the master's (fake) engine is asked to resize:
// its refusal is reported in ElasticResize and the operation record, the command is asked again
// after its backoff and applied, and the observation follows; an env edit replaces nothing; a size edit and a width decrease are
// refused with the spec's messages.
func TestElasticEP(t *testing.T) {
	parallelLong(t)
	needsOwnStack(t, "sets the bodies the metrics exporter serves for its Pods")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const md, headType = "moe", "e2e-elastic-cpu-linux-amd64"
	applyCluster(t, ctx, ns)
	applyCPUType(t, ctx, headType)
	queue(t, ctx, "team-ee-h20", h20Entrance, ns, 8)
	queue(t, ctx, headType, workerv1.EntranceName(headType), ns, 0)
	t.Cleanup(func() {
		tearDown(t, ctx, ns)
		for _, name := range []string{"team-ee-h20", headType} {
			_ = stack.Client.Delete(ctx, &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: name}})
		}
	})
	manifest := func(width int, more string) string {
		return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen3-30B-A3B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.29.0}
  roles:
    - {name: server, instanceType: gpustack-nvidia-h20-linux-amd64, %selasticEp: {width: %d, headInstanceType: %s}}
`, md, ns, more, width, headType)
	}
	kubectlApply(t, manifest(2, ""))
	head, members := elasticRunning(t, ctx, ns, md, 2)

	if c := container(*head, "main"); !slices.Equal(c.Command, engine.ElasticHeadCommand) {
		t.Errorf("the Ray head runs %q", c.Command)
	}
	if head.Labels[workerv1.LabelQueueName] != workerv1.EntranceName(headType) || head.Spec.Containers[0].Resources.Requests.Cpu().String() != "1" {
		t.Errorf("the Ray head is not admitted through its type's queue with its unit CPU: %v %v", head.Labels, head.Spec.Containers[0].Resources)
	}
	master, worker := members["0"], members["1"]
	if c := container(master, "main"); len(c.Command) < 4 || c.Command[0] != "/bin/sh" || c.Command[3] != "elastic-serve" ||
		!strings.Contains(strings.Join(c.Command, " "), "--data-parallel-size 2") {
		t.Errorf("the master runs %q", c.Command)
	}
	if master.Annotations[workerv1.AnnotationElasticBootWidth] != "2" {
		t.Errorf("the master's boot width is %q", master.Annotations[workerv1.AnnotationElasticBootWidth])
	}
	if c := container(worker, "main"); len(c.Command) != 3 || !strings.HasSuffix(c.Command[2], " --block") || c.ReadinessProbe != nil {
		t.Errorf("the worker runs %q", c.Command)
	}
	svc := &corev1.Service{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: naming.ElasticHeadName(md)}, svc); err != nil {
		t.Fatal(err)
	}
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[0].Name != "gcs" || svc.Spec.Ports[0].Port != 6379 || svc.Spec.Ports[1].Name != "dashboard" ||
		svc.Spec.Selector[workerv1.LabelComponent] != naming.ElasticHeadName(md) {
		t.Errorf("the head Service: %+v", svc.Spec)
	}
	eventually(t, time.Minute, "the observation ConfigMap: desired 2, both admitted, the master named", func() error {
		o, err := observation(ctx, ns, md)
		if err != nil {
			return err
		}
		if o.Desired.Value != 2 || o.Admitted.Value != 2 || o.MasterUID != string(master.UID) || o.Ray.Known {
			return fmt.Errorf("observation %+v", o)
		}
		return nil
	})

	uids := func(ps map[string]corev1.Pod) map[string]string {
		out := map[string]string{}
		for k, p := range ps {
			out[k] = string(p.UID)
		}
		return out
	}
	awaitResizeCondition(t, ctx, ns, md, "no scale command at the boot width", func(c xpv2.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Message == elastic.NoRefusalMessage
	})
	// The fake engine on the master refuses the first resize: the refusal is reported, then the
	// command is asked again after its backoff and applied.
	address := net.JoinHostPort(master.Status.PodIP, master.Annotations[workerv1.AnnotationScrapePort])
	const refusal = "engine core busy: the collective is draining"
	stack.MetricsExporter.Elastic.Refuse(address, refusal)
	before := uids(members)
	kubectlApply(t, manifest(3, ""))
	head3, members := elasticRunning(t, ctx, ns, md, 3)
	for k, uid := range before {
		if string(members[k].UID) != uid {
			t.Errorf("member %s was replaced by the width increase", k)
		}
	}
	if head3.UID != head.UID {
		t.Error("the Ray head was replaced by the width increase")
	}
	if members["0"].Annotations[workerv1.AnnotationElasticBootWidth] != "2" {
		t.Error("the master's boot width moved with the width")
	}
	awaitResizeCondition(t, ctx, ns, md, "the engine's refusal reported, the resize not abandoned", func(c xpv2.Condition) bool {
		return c.Status == corev1.ConditionTrue && c.Reason == elastic.ReasonNoRefusal &&
			strings.Contains(c.Message, "the engine refused attempt 1 of 5: HTTP 503: "+refusal)
	})
	if rec := operationRecord(t, ctx, ns, md); rec.State != elastic.StateRecorded || rec.Width != (elastic.Widths{Old: 2, Target: 3}) ||
		!strings.Contains(rec.LastError, refusal) || rec.Master.UID != string(master.UID) {
		t.Errorf("the operation record after a refusal: %+v", rec)
	}
	stack.MetricsExporter.Elastic.Refuse(address, "")
	awaitResizeCondition(t, ctx, ns, md, "the resize applied once asked again", func(c xpv2.Condition) bool {
		return c.Status == corev1.ConditionTrue && strings.Contains(c.Message, "the engine resized from 2 to 3 data-parallel engines")
	})
	rec := operationRecord(t, ctx, ns, md)
	calls := stack.MetricsExporter.Elastic.Calls(address)
	if rec.State != elastic.StateCompleted || len(calls) != rec.Attempts+1 || rec.Attempts < 1 {
		t.Errorf("the record %+v after the engine received %d commands: each attempt asks once", rec, len(calls))
	}
	for _, body := range calls {
		if body["new_data_parallel_size"] != float64(3) || body["drain_timeout"] != float64(120) {
			t.Errorf("the engine was asked %v", body)
		}
	}
	eventually(t, time.Minute, "the observation follows the resize: desired 3, all admitted, completed at width 3", func() error {
		o, err := observation(ctx, ns, md)
		if err != nil {
			return err
		}
		if o.Desired.Value != 3 || o.Admitted.Value != 3 || o.State != elastic.StateCompleted || o.StableWidth != 3 || o.Reason != "" {
			return fmt.Errorf("observation %+v", o)
		}
		return nil
	})

	before = uids(members)
	kubectlApply(t, manifest(3, "env: [{name: NCCL_DEBUG, value: INFO}], "))
	time.Sleep(10 * time.Second) // a replacement would have started by now: the pacer acts in a pass
	head, members = elasticRunning(t, ctx, ns, md, 3)
	if !maps.Equal(before, uids(members)) || head.UID != head3.UID {
		t.Errorf("an env edit replaced members: %v, now %v", before, uids(members))
	}
	eventually(t, 30*time.Second, "ReplicasUpToDate True after an env edit: no rollout stands in progress", func() error {
		cond, err := deploymentConditionOf(ctx, ns, md, "ReplicasUpToDate")
		if err == nil && cond.Status != "True" {
			err = fmt.Errorf("%+v", cond)
		}
		return err
	})

	out := applyRefused(t, manifest(3, "size: 2, "))
	if !strings.Contains(out, validation.ElasticFrozenMessage) {
		t.Errorf("the size edit was not refused with the rule's message:\n%s", out)
	}
	out = applyRefused(t, manifest(2, ""))
	if !strings.Contains(out, validation.ElasticScaleDownMessage) || !strings.Contains(out, "spec.roles[0].elasticEp.width") {
		t.Errorf("the width decrease was not refused with the spec's message:\n%s", out)
	}
}
