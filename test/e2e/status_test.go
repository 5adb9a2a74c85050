package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestUnmanagedIsWhatIsDeployed: status.roles[].unmanaged reports the replicas that stand, not the
// spec. A take-over role edited back to a managed command (and to two cards, which the queue cannot
// admit beside the old replica's one) holds part-way: the managed replacement queued beside the old
// take-over replica, and the role still reported unmanaged; once quota lets the rollout finish, it
// is not.
func TestUnmanagedIsWhatIsDeployed(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, clusterQueue = "modes", "status-deployed-h20"
	applyCluster(t, ctx, ns)
	queue(t, ctx, clusterQueue, h20Entrance, ns, 2)
	defer tearDown(t, ctx, ns)
	kubectlApply(t, vLLMDeployment(ns, name)+
		"    - {name: server, replicas: 2, instanceType: gpustack-nvidia-h20-linux-amd64, resources: {accelerator: 1}, command: [vllm, serve, /models/qwen]}\n")
	eventually(t, 3*time.Minute, "two take-over replicas running", func() error { return running(ctx, ns, name, 2) })
	eventually(t, time.Minute, "the role reported unmanaged", func() error { return unmanagedIs(ctx, ns, name, true) })

	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json", "-p",
		`[{"op":"remove","path":"/spec/roles/0/command"},{"op":"replace","path":"/spec/roles/0/resources/accelerator","value":2}]`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "a managed replacement queued beside a take-over replica still running", func() error {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		var managed, takeOver int
		for _, p := range ps {
			switch {
			case p.DeletionTimestamp != nil:
				return fmt.Errorf("Pod %s is still leaving", p.Name)
			case p.Annotations["prometheus.io/scrape"] == "true":
				managed++
			default:
				takeOver++
			}
		}
		if managed != 1 || takeOver != 1 {
			return fmt.Errorf("%d managed and %d take-over Pods", managed, takeOver)
		}
		return unmanagedIs(ctx, ns, name, true)
	})

	setQuota(t, ctx, clusterQueue, 4)
	eventually(t, 3*time.Minute, "both replicas managed and running, the role no longer unmanaged", func() error {
		if err := running(ctx, ns, name, 2); err != nil {
			return err
		}
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if p.Annotations["prometheus.io/scrape"] != "true" {
				return fmt.Errorf("Pod %s still runs the take-over command", p.Name)
			}
		}
		return unmanagedIs(ctx, ns, name, false)
	})
}

// unmanagedIs checks the deployment's first role's status.roles[].unmanaged.
func unmanagedIs(ctx context.Context, namespace, name string, want bool) error {
	md, err := deploymentObject(ctx, namespace, name)
	if err != nil {
		return err
	}
	roles, _, _ := unstructured.NestedSlice(md.Object, "status", "roles")
	if len(roles) == 0 {
		return fmt.Errorf("no status.roles yet")
	}
	got, _, _ := unstructured.NestedBool(roles[0].(map[string]any), "unmanaged")
	if got != want {
		return fmt.Errorf("status.roles[0].unmanaged is %t, want %t", got, want)
	}
	return nil
}

// deploymentObject reads a ModelDeployment as the API server serves it.
func deploymentObject(ctx context.Context, namespace, name string) (*unstructured.Unstructured, error) {
	md := &unstructured.Unstructured{}
	md.SetGroupVersionKind(workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind))
	return md, stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, md)
}
