package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// TestACohortLendsIdleGPUsToBatch: with the Setting instance-type-cohort, a type's ClusterQueue joins
// the cohort; a batch queue of the same cohort, holding no quota of its own on the type's flavor,
// borrows the idle GPUs and its Job runs on the type's node; a deployment that then needs them takes
// them back: Kueue preempts the Job's Workload for reclamation within the cohort, and the
// deployment's replica runs on the node.
func TestACohortLendsIdleGPUsToBatch(t *testing.T) {
	sequential(t, "writes the cluster-wide settings every ClusterQueue reads")
	ctx := context.Background()
	ns := ownName(t, "ns")
	typeName, nodeName := taintedType(t, ctx, ns, poolTaint)
	t.Cleanup(func() { tearDown(t, ctx, ns) })
	cohort, batch := ownName(t, "cohort"), ownName(t, "batch")
	t.Cleanup(func() {
		// The Job first: its Workload goes with it, before tearDown counts the namespace's.
		_, _ = stack.Kubectl("delete", "job", "train", "-n", ns, "--ignore-not-found")
		_, _ = stack.Kubectl("delete", "environmentconfig", "mdplane-settings", "--ignore-not-found")
		_, _ = stack.Kubectl("delete", "clusterqueue", batch, "--ignore-not-found", "--wait=false")
	})
	kubectlApply(t, fmt.Sprintf(`apiVersion: apiextensions.crossplane.io/v1beta1
kind: EnvironmentConfig
metadata: {name: mdplane-settings}
data: {instance-type-cohort: %s}
`, cohort))
	eventually(t, time.Minute, "the type's ClusterQueue in the cohort, reclaiming what it lends", func() error {
		cq := &kueuev1beta2.ClusterQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, cq); err != nil {
			return err
		}
		if string(cq.Spec.CohortName) != cohort || cq.Spec.Preemption == nil || cq.Spec.Preemption.ReclaimWithinCohort != kueuev1beta2.PreemptionPolicyAny {
			return fmt.Errorf("cohort %q, preemption %+v", cq.Spec.CohortName, cq.Spec.Preemption)
		}
		return nil
	})

	// The batch queue lists the type's flavor with no quota of its own: all it runs there, it borrows.
	kubectlApply(t, fmt.Sprintf(`apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: %[1]s}
spec:
  cohortName: %[2]s
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [nvidia.com/gpu, cpu, memory]
      flavors:
        - name: %[3]s
          resources:
            - {name: nvidia.com/gpu, nominalQuota: "0"}
            - {name: cpu, nominalQuota: "0"}
            - {name: memory, nominalQuota: "0"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: batch, namespace: %[4]s}
spec: {clusterQueue: %[1]s}
---
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: %[4]s
  labels: {kueue.x-k8s.io/queue-name: batch}
spec:
  parallelism: 1
  completions: 1
  backoffLimit: 0
  template:
    metadata:
      annotations: {%[5]s: 1h}
    spec:
      restartPolicy: Never
      containers:
        - name: train
          image: registry.k8s.io/pause:3.10
          resources:
            requests: {nvidia.com/gpu: "4", cpu: "1", memory: 1Gi}
            limits: {nvidia.com/gpu: "4"}
`, batch, cohort, typeName, ns, cluster.CompleteDelayAnnotation))
	var jobWorkload string
	eventually(t, 2*time.Minute, "the Job admitted on borrowed quota and running on the type's node", func() error {
		wl, err := jobsWorkload(ctx, ns)
		if err != nil {
			return err
		}
		jobWorkload = wl.Name
		if wl.Status.Admission == nil || string(wl.Status.Admission.ClusterQueue) != batch {
			return fmt.Errorf("Workload %s not admitted by %s yet (conditions %v)", wl.Name, batch, wl.Status.Conditions)
		}
		return jobPodOn(ctx, ns, nodeName)
	})
	eventually(t, time.Minute, "the type saying it lends the Job's GPUs to the cohort", func() error {
		it := &workerv1.InstanceType{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: typeName}, it); err != nil {
			return err
		}
		c := apimeta.FindStatusCondition(it.Status.Conditions, workerv1.InstanceTypeCohort)
		if c == nil || c.Status != "True" || c.Reason != workerv1.ReasonLending || !strings.Contains(c.Message, "in cohort "+cohort+": lends 4 nvidia.com/gpu") {
			return fmt.Errorf("Cohort condition %+v", c)
		}
		return nil
	})

	kubectlApply(t, placementDeployment(ns, "serve", typeName, 1, 4))
	eventually(t, 3*time.Minute, "the deployment's replica running on the node the Job left", func() error {
		return running(ctx, ns, "serve", 1)
	})
	wl := &kueuev1beta2.Workload{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: jobWorkload}, wl); err != nil {
		t.Fatal(err)
	}
	preempted := apimeta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadPreempted)
	if preempted == nil || preempted.Status != "True" || preempted.Reason != kueuev1beta2.InCohortReclamationReason {
		t.Errorf("the Job's Workload %s: Preempted condition %+v, want True for %s", jobWorkload, preempted, kueuev1beta2.InCohortReclamationReason)
	}
	job := &batchv1.Job{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "train"}, job); err != nil {
		t.Fatal(err)
	}
	if job.Spec.Suspend == nil || !*job.Spec.Suspend {
		t.Errorf("the Job is not suspended after its Workload was preempted")
	}
}

// jobsWorkload is the Workload Kueue made for the namespace's one Job.
func jobsWorkload(ctx context.Context, namespace string) (*kueuev1beta2.Workload, error) {
	list := &kueuev1beta2.WorkloadList{}
	if err := stack.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for i := range list.Items {
		for _, o := range list.Items[i].OwnerReferences {
			if o.Kind == "Job" {
				return &list.Items[i], nil
			}
		}
	}
	return nil, fmt.Errorf("no Workload of a Job in %s yet", namespace)
}

// jobPodOn passes once a Pod of the namespace's Job runs on node.
func jobPodOn(ctx context.Context, namespace, node string) error {
	list := &corev1.PodList{}
	if err := stack.Client.List(ctx, list, client.InNamespace(namespace), client.HasLabels{batchv1.JobNameLabel}); err != nil {
		return err
	}
	for _, p := range list.Items {
		if p.Spec.NodeName == node && p.Status.Phase == corev1.PodRunning {
			return nil
		}
	}
	var seen []string
	for _, p := range list.Items {
		seen = append(seen, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, p.Status.Phase))
	}
	return fmt.Errorf("no Job Pod running on %s (Pods: %v)", node, seen)
}
