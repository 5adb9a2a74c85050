package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// TestAScaleDownRetiresASeatedReplicaThroughTheProtocol: scaling a role
// from two replicas to one admits a retirement of r1 in status.retirement; its member loses the
// endpoint-eligibility label and leaves the role Service's EndpointSlices; while its engine reports
// a request running the replica is held in Draining, named in the reason, and nothing is deleted;
// once idle it is deleted with its Workload, the field is cleared and the deployment says so.
func TestAScaleDownRetiresASeatedReplicaThroughTheProtocol(t *testing.T) {
	parallel(t)
	needsOwnStack(t, "sets the bodies the metrics exporter serves for its Pods")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name, clusterQueue = "shrink", "retirement-h20"
	applyCluster(t, ctx, ns)
	queue(t, ctx, clusterQueue, h20Entrance, ns, 2)
	// The stack forgets the busy body when the Pod goes: forgetting it here after the tear-down
	// could wipe a body another test set for the Pod that took the address over.
	defer tearDown(t, ctx, ns)
	kubectlApply(t, deploymentOnH20(ns, name, "server Server 2 1"))
	eventually(t, 3*time.Minute, "two replicas running", func() error { return running(ctx, ns, name, 2) })
	eventually(t, 2*time.Minute, "the role's Service selecting on endpoint eligibility", func() error {
		svc := &corev1.Service{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-server"}, svc); err != nil {
			return err
		}
		if svc.Annotations[workerv1.AnnotationEndpointEligibility] != "active" {
			return fmt.Errorf("annotations %v", svc.Annotations)
		}
		return nil
	})
	leaving := memberAt(t, ctx, ns, name, "1")
	busyAddress := net.JoinHostPort(leaving.Status.PodIP, leaving.Annotations["prometheus.io/port"])
	stack.MetricsExporter.Set(busyAddress, "vllm:num_requests_running 1\nvllm:num_requests_waiting 0\n")

	patchReplicas(t, ns, name, 1)
	eventually(t, 2*time.Minute, "r1 withdrawn and held in Draining while busy", func() error {
		r, err := retirementOf(ctx, ns, name)
		if err != nil {
			return err
		}
		if r["state"] != "Draining" || !strings.Contains(fmt.Sprint(r["reason"]), leaving.Name+" is busy: vllm:num_requests_running is 1") {
			return fmt.Errorf("status.retirement %v", r)
		}
		if r["roleName"] != "server" || fmt.Sprint(r["replicaOrdinal"]) != "1" || fmt.Sprint(r["targetMemberUIDs"]) != "["+string(leaving.UID)+"]" {
			return fmt.Errorf("the operation names another target: %v", r)
		}
		p := &corev1.Pod{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(&leaving), p); err != nil {
			return err
		}
		if p.DeletionTimestamp != nil {
			t.Fatalf("the busy member %s is being deleted", p.Name)
		}
		if p.Labels[workerv1.LabelEndpointEligible] == "true" {
			return fmt.Errorf("%s still carries the endpoint-eligibility label", p.Name)
		}
		return nil
	})

	stack.MetricsExporter.Forget(busyAddress) // idle, as every Pod on the stack is unless a test says otherwise
	idleAt := time.Now()
	eventually(t, 2*time.Minute, "r1 deleted with its Workload and the operation cleared", func() error {
		if err := running(ctx, ns, name, 1); err != nil {
			return err
		}
		if r, err := retirementOf(ctx, ns, name); err == nil {
			return fmt.Errorf("status.retirement still %v", r)
		}
		wls, err := workloads(ctx, ns)
		if err != nil {
			return err
		}
		if len(wls) != 1 {
			return fmt.Errorf("%d Workloads, want the survivor's alone", len(wls))
		}
		return eventSeen(ctx, ns, "Retirement", "replica r1 of role server is retired")
	})
	t.Logf("from idle to retired (drained, deleted, released, cleared): %.1f s", time.Since(idleAt).Seconds())
	if err := eventSeen(ctx, ns, "ReplicaLeaving", "replica r1 of role server is leaving", "the answering members read idle twice", "30s kv_lease_duration window"); err != nil {
		t.Error(err)
	}
}

// memberAt is the deployment's leader Pod of the ordinal.
func memberAt(t *testing.T, ctx context.Context, namespace, deployment, ordinal string) corev1.Pod {
	t.Helper()
	p, err := leaderOf(ctx, namespace, deployment, ordinal)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// leaderOf is the leader of replica r<ordinal>, or an error while it has none: inside an eventually,
// where a replica between two Pods is a state to wait through.
func leaderOf(ctx context.Context, namespace, deployment, ordinal string) (corev1.Pod, error) {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return corev1.Pod{}, err
	}
	for _, p := range ps {
		if p.Labels[workerv1.LabelPodOrdinal] == ordinal && p.Labels[workerv1.LabelMemberIndex] == "0" {
			return p, nil
		}
	}
	return corev1.Pod{}, fmt.Errorf("no leader of r%s among %d Pods", ordinal, len(ps))
}

// retirementOf reads a deployment's status.retirement; an error when it is absent.
func retirementOf(ctx context.Context, namespace, name string) (map[string]any, error) {
	md, err := deploymentObject(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	r, ok, _ := unstructured.NestedMap(md.Object, "status", "retirement")
	if !ok {
		return nil, fmt.Errorf("no status.retirement")
	}
	return r, nil
}
