package e2e

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rolesv1 "github.com/mdplane/mdplane/apis/roles/v1"
)

// declaredReplicas is spec.roles[0].replicas of a deployment.
func declaredReplicas(ctx context.Context, namespace, name string) (int32, error) {
	md, err := modelDeployment(ctx, namespace, name)
	if err != nil {
		return 0, err
	}
	return md.Spec.Roles[0].Replicas, nil
}

// setWaiting makes each running engine Pod of the deployment report waiting requests (and running
// ones), returning the Pods' addresses.
func setWaiting(t *testing.T, ctx context.Context, namespace, name string, waiting, running int) []string {
	t.Helper()
	ps, err := pods(ctx, namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	var addresses []string
	for _, p := range ps {
		if p.Status.PodIP == "" {
			continue
		}
		a := net.JoinHostPort(p.Status.PodIP, p.Annotations["prometheus.io/port"])
		stack.MetricsExporter.Set(a, vllmMetrics(running, waiting, 1))
		addresses = append(addresses, a)
	}
	return addresses
}

// hpaSays is the autoscaler's conditions and current metrics, for a failing wait's message.
func hpaSays(ctx context.Context, namespace, name string) string {
	hpa := &unstructured.Unstructured{}
	hpa.SetAPIVersion("autoscaling/v2")
	hpa.SetKind("HorizontalPodAutoscaler")
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, hpa); err != nil {
		return err.Error()
	}
	status, _, _ := unstructured.NestedMap(hpa.Object, "status")
	return fmt.Sprint(status)
}

// TestARoleIsScaledByKubectlAndByAnAutoscaler: a role's ModelDeploymentRole scales with kubectl scale
// without replacing the running replica; the kube-controller-manager's HorizontalPodAutoscaler scales
// it on the role's waiting requests, which mdplane serves as a custom metric from the engines'
// /metrics: up, down through the retirement protocol (a busy leaving replica is held in Draining),
// and up again past the queue's quota, where Kueue holds the replica it cannot admit.
func TestARoleIsScaledByKubectlAndByAnAutoscaler(t *testing.T) {
	// Parallel although it registers and removes the cluster's custom metrics APIService: until the
	// API answers for it (seconds), discovery of its group fails, and the namespace controller
	// still deletes everything it can discover and tries the namespace again.
	parallelLong(t)
	needsOwnStack(t, "sets the bodies the metrics exporter serves for its Pods")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, queueName = "hpa", "hpa"
	role := rolesv1.Name(name, "server")
	runOnH20(t, ctx, ns, queueName, 3, name, 1, deploymentOnH20(ns, name, "server Server 1 1"))
	var addresses []string
	t.Cleanup(func() {
		for _, a := range addresses {
			stack.MetricsExporter.Forget(a)
		}
	})

	before, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := stack.Kubectl("scale", "modeldeploymentroles.roles.worker.gpustack.ai/"+role, "--replicas=2", "-n", ns); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	eventually(t, editRendered+time.Minute, "kubectl scale: two replicas, the first untouched", func() error {
		if n, err := declaredReplicas(ctx, ns, name); err != nil || n != 2 {
			return fmt.Errorf("spec.roles[0].replicas %d: %v", n, err)
		}
		return runningKeeping(ctx, ns, name, 2, before)
	})
	if out, err := stack.Kubectl("get", "modeldeploymentroles", "-n", ns); err == nil {
		t.Logf("kubectl get modeldeploymentroles -n %s\n%s", ns, out)
	}

	// The roles' custom metrics, as docs/autoscaling.md installs them, and an autoscaler on them.
	if out, err := stack.Kubectl("apply", "--server-side", "-k", filepath.Join("..", "..", "package", "autoscaling")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := stack.Kubectl("delete", "-k", filepath.Join("..", "..", "package", "autoscaling"), "--ignore-not-found"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
	addresses = setWaiting(t, ctx, ns, name, 6, 0) // 12 waiting: ceil(12 / 5) = 3 replicas
	kubectlApply(t, fmt.Sprintf(`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: server, namespace: %[1]s}
spec:
  scaleTargetRef: {apiVersion: roles.worker.gpustack.ai/v1, kind: ModelDeploymentRole, name: %[2]s}
  minReplicas: 1
  maxReplicas: 3
  metrics:
    - type: Object
      object:
        describedObject: {apiVersion: roles.worker.gpustack.ai/v1, kind: ModelDeploymentRole, name: %[2]s}
        metric: {name: waiting_requests}
        target: {type: AverageValue, averageValue: "5"}
  behavior:
    scaleDown: {stabilizationWindowSeconds: 0}
`, ns, role))
	// Registered after the namespace's teardown, so it runs first: the autoscaler stops writing.
	t.Cleanup(func() {
		if out, err := stack.Kubectl("delete", "hpa", "server", "-n", ns, "--ignore-not-found"); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})
	eventually(t, 3*time.Minute, "the autoscaler scales the role up to three on its waiting requests", func() error {
		if n, err := declaredReplicas(ctx, ns, name); err != nil || n != 3 {
			return fmt.Errorf("spec.roles[0].replicas %d (%v); autoscaler: %s", n, err, hpaSays(ctx, ns, "server"))
		}
		return running(ctx, ns, name, 3)
	})

	// Down to one: the highest ordinal leaves first, held in Draining while it is busy.
	leaving := memberAt(t, ctx, ns, name, "2")
	addresses = append(addresses, setWaiting(t, ctx, ns, name, 0, 0)...)
	busy := net.JoinHostPort(leaving.Status.PodIP, leaving.Annotations["prometheus.io/port"])
	stack.MetricsExporter.Set(busy, vllmMetrics(1, 0, 1))
	eventually(t, 3*time.Minute, "the autoscaler's scale-down retiring r2 through the protocol, held while busy", func() error {
		r, err := retirementOf(ctx, ns, name)
		if err != nil {
			return fmt.Errorf("%v; autoscaler: %s", err, hpaSays(ctx, ns, "server"))
		}
		if r["state"] != "Draining" || !strings.Contains(fmt.Sprint(r["reason"]), leaving.Name+" is busy") {
			return fmt.Errorf("status.retirement %v", r)
		}
		return nil
	})
	stack.MetricsExporter.Set(busy, vllmMetrics(0, 0, 1))
	eventually(t, 4*time.Minute, "one replica left", func() error {
		if n, err := declaredReplicas(ctx, ns, name); err != nil || n != 1 {
			return fmt.Errorf("spec.roles[0].replicas %d (%v); autoscaler: %s", n, err, hpaSays(ctx, ns, "server"))
		}
		return running(ctx, ns, name, 1)
	})

	// Up again past the queue's quota: the autoscaler asks for three, Kueue admits two.
	setQuota(t, ctx, queueName, 2)
	addresses = append(addresses, setWaiting(t, ctx, ns, name, 12, 0)...)
	eventually(t, 3*time.Minute, "three declared, two running, the third held by Kueue", func() error {
		if n, err := declaredReplicas(ctx, ns, name); err != nil || n != 3 {
			return fmt.Errorf("spec.roles[0].replicas %d (%v); autoscaler: %s", n, err, hpaSays(ctx, ns, "server"))
		}
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		runningPods, held := 0, 0
		for i := range ps {
			switch p := &ps[i]; {
			case p.Spec.NodeName != "" && ready(*p):
				runningPods++
			case gated(p) && p.Status.Phase == corev1.PodPending:
				held++
			}
		}
		if runningPods != 2 || held != 1 {
			return fmt.Errorf("%d running, %d held for quota", runningPods, held)
		}
		return nil
	})
	if out, err := stack.Kubectl("get", "hpa", "-n", ns); err == nil {
		t.Logf("kubectl get hpa -n %s\n%s", ns, out)
	}
}
