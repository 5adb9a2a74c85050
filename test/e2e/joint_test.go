package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/test/cluster"
)

// parkAfter is the stack's park time for sets that hold part of their quota.
const parkAfter = cluster.SuiteParkAfter

// h20Entrance is the LocalQueue name the h20 InstanceType of examples/cluster.yaml publishes.
const h20Entrance = "gpustack-fnv64-796ced4e2897a3b4"

// deploymentOnH20 is a ModelDeployment whose roles ("name kind replicas gpus") run on the h20 type.
func deploymentOnH20(namespace, name string, roles ...string) string {
	var b strings.Builder
	b.WriteString(vLLMDeployment(namespace, name))
	for _, r := range roles {
		var role, kind string
		var replicas, gpus int
		if _, err := fmt.Sscanf(r, "%s %s %d %d", &role, &kind, &replicas, &gpus); err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "    - {name: %s, kind: %s, replicas: %d, instanceType: gpustack-nvidia-h20-linux-amd64, resources: {accelerator: %d}}\n", role, kind, replicas, gpus)
	}
	return b.String()
}

// vLLMDeployment is the head of a vLLM deployment's manifest, up to its roles' list.
func vLLMDeployment(namespace, name string) string {
	return fmt.Sprintf(`apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: %s, namespace: %s}
spec:
  model: {name: Qwen/Qwen2.5-72B-Instruct}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles:
`, name, namespace)
}

// groupWorkloads returns the Workloads of a deployment's groups, read from its Pods' labels.
func groupWorkloads(ctx context.Context, namespace, deployment string) ([]kueuev1beta2.Workload, error) {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return nil, err
	}
	groups := map[string]bool{}
	for _, p := range ps {
		groups[p.Labels[workerv1.LabelPodGroupName]] = true
	}
	all, err := workloads(ctx, namespace)
	if err != nil {
		return nil, err
	}
	var out []kueuev1beta2.Workload
	for _, wl := range all {
		if groups[wl.Name] {
			out = append(out, wl)
		}
	}
	return out, nil
}

// checkOf is the joint check's state on a Workload; empty until Kueue adds it.
func checkOf(wl *kueuev1beta2.Workload) kueuev1beta2.AdmissionCheckState {
	if c := admissioncheck.CheckState(wl, admissioncheck.CheckName); c != nil {
		return *c
	}
	return kueuev1beta2.AdmissionCheckState{}
}

// noneAdmitted fails the test if any group of the deployment is admitted.
func noneAdmitted(t *testing.T, ctx context.Context, namespace, deployment string) {
	t.Helper()
	wls, err := groupWorkloads(ctx, namespace, deployment)
	if err != nil {
		t.Fatal(err)
	}
	for _, wl := range wls {
		if meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted) {
			t.Fatalf("Workload %s admitted while its set lacks quota", wl.Name)
		}
	}
}

// running reports an error unless want Pods of the deployment are bound, Ready and ungated.
func running(ctx context.Context, namespace, deployment string, want int) error {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return err
	}
	if len(ps) != want {
		return fmt.Errorf("%d Pods of %s, want %d", len(ps), deployment, want)
	}
	for _, p := range ps {
		if p.Spec.NodeName == "" || !ready(p) {
			return fmt.Errorf("Pod %s not running and Ready yet", p.Name)
		}
	}
	return nil
}

// setQuota sets the nvidia.com/gpu quota of a ClusterQueue.
func setQuota(t *testing.T, ctx context.Context, clusterQueue string, gpus int64) {
	t.Helper()
	// Kueue writes the queue's status all the while: read again on a conflict, as any client would.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq := &kueuev1beta2.ClusterQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: clusterQueue}, cq); err != nil {
			return err
		}
		for i, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
			if r.Name == "nvidia.com/gpu" {
				cq.Spec.ResourceGroups[0].Flavors[0].Resources[i].NominalQuota = *resource.NewQuantity(gpus, resource.DecimalSI)
			}
		}
		return stack.Client.Update(ctx, cq)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// tearDown deletes every deployment of a namespace and waits until nothing of them is left: mdplane
// deletes the Workloads that hold their serving Pods.
func tearDown(t *testing.T, ctx context.Context, namespace string) {
	t.Helper()
	if _, err := stack.Kubectl("delete", "modeldeployments", "--all", "-n", namespace, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "every Pod and Workload of "+namespace+" gone", func() error {
		wls, err := workloads(ctx, namespace)
		if err != nil {
			return err
		}
		list := &corev1.PodList{}
		if err := stack.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return err
		}
		if len(list.Items)+len(wls) > 0 {
			return fmt.Errorf("%d Pods, %d Workloads remain", len(list.Items), len(wls))
		}
		return nil
	})
}

// TestJointAdmission: a prefill/decode deployment whose queue has quota for three of its four replica
// groups runs nothing and holds every group; a small deployment that fits in what is left runs
// meanwhile; raising the quota admits all four groups together.
func TestJointAdmission(t *testing.T) {
	parallelLong(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	queue(t, ctx, "joint-h20", h20Entrance, ns, 7, admissioncheck.CheckName)
	kubectlApply(t, deploymentOnH20(ns, "pd", "prefill Prefill 2 2", "decode Decode 2 2"))
	defer tearDown(t, ctx, ns)

	t.Run("a set short of quota is held whole", func(t *testing.T) {
		eventually(t, 3*time.Minute, "three of four groups holding quota, all held by the joint check", func() error {
			wls, err := groupWorkloads(ctx, ns, "pd")
			if err != nil {
				return err
			}
			if len(wls) != 4 {
				return fmt.Errorf("%d Workloads", len(wls))
			}
			var reserved int
			for _, wl := range wls {
				if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved) {
					continue
				}
				reserved++
				c := checkOf(&wl)
				if c.State != kueuev1beta2.CheckStatePending || !strings.Contains(c.Message, "1 of 4 replica groups still lack quota") {
					return fmt.Errorf("Workload %s: check %s %q", wl.Name, c.State, c.Message)
				}
			}
			if reserved != 3 {
				return fmt.Errorf("%d groups hold quota", reserved)
			}
			return nil
		})
		for range 5 {
			noneAdmitted(t, ctx, ns, "pd")
			ps, err := pods(ctx, ns, "pd")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if p.Spec.NodeName != "" || !gated(&p) {
					t.Fatalf("Pod %s runs while its set lacks quota", p.Name)
				}
			}
			time.Sleep(time.Second)
		}
	})

	t.Run("a deployment that fits is admitted while the first waits", func(t *testing.T) {
		kubectlApply(t, deploymentOnH20(ns, "small", "server Server 1 1"))
		eventually(t, 3*time.Minute, "the small deployment running", func() error { return running(ctx, ns, "small", 1) })
		noneAdmitted(t, ctx, ns, "pd")
	})

	t.Run("raising the quota admits every group together", func(t *testing.T) {
		// Time the two moments from the API server's own stream of Workload changes.
		wc, err := client.NewWithWatch(stack.Config, client.Options{Scheme: stack.Client.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		w, err := wc.Watch(ctx, &kueuev1beta2.WorkloadList{}, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		setQuota(t, ctx, "joint-h20", 9)
		members, err := groupWorkloads(ctx, ns, "pd")
		if err != nil {
			t.Fatal(err)
		}
		latest := map[string]*kueuev1beta2.Workload{}
		for i := range members {
			latest[members[i].Name] = &members[i]
		}
		var allReserved, allReady time.Time
		timeout := time.After(2 * time.Minute)
		for allReady.IsZero() {
			select {
			case ev := <-w.ResultChan():
				wl, ok := ev.Object.(*kueuev1beta2.Workload)
				if !ok || latest[wl.Name] == nil {
					continue
				}
				latest[wl.Name] = wl
				var reserved, ready int
				for _, m := range latest {
					if meta.IsStatusConditionTrue(m.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved) {
						reserved++
					}
					if checkOf(m).State == kueuev1beta2.CheckStateReady {
						ready++
					}
				}
				if reserved == 4 && allReserved.IsZero() {
					allReserved = time.Now()
				}
				if ready == 4 {
					allReady = time.Now()
				}
			case <-timeout:
				t.Fatal("the set's checks did not all turn Ready")
			}
		}
		fmt.Printf("e2e figure: last group's quota reservation → all 4 checks Ready, as the watch saw them: %d ms\n", allReady.Sub(allReserved).Milliseconds())
		eventually(t, time.Minute, "all four Workloads admitted within a second of each other", func() error {
			wls, err := groupWorkloads(ctx, ns, "pd")
			if err != nil {
				return err
			}
			var times []time.Time
			for _, wl := range wls {
				c := meta.FindStatusCondition(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted)
				if c == nil || c.Status != "True" {
					return fmt.Errorf("Workload %s not admitted", wl.Name)
				}
				times = append(times, c.LastTransitionTime.Time)
			}
			slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
			if spread := times[len(times)-1].Sub(times[0]); spread > time.Second {
				return fmt.Errorf("admissions spread over %s", spread)
			}
			return nil
		})
		eventually(t, 3*time.Minute, "all four replicas running", func() error { return running(ctx, ns, "pd", 4) })
		eventually(t, 2*time.Minute, "the deployment reporting QuotaReserved and each role's reserved instances", func() error {
			quota, err := deploymentConditionOf(ctx, ns, "pd", "QuotaReserved")
			if err != nil {
				return err
			}
			if quota != (condition{"True", "Reserved", "all 4 instances hold quota"}) {
				return fmt.Errorf("QuotaReserved condition %+v", quota)
			}
			md := &unstructured.Unstructured{}
			md.SetGroupVersionKind(workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind))
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pd"}, md); err != nil {
				return err
			}
			roles, _, _ := unstructured.NestedSlice(md.Object, "status", "roles")
			for _, r := range roles {
				m, _ := r.(map[string]any)
				if fmt.Sprint(m["quotaReserved"]) != "2" {
					return fmt.Errorf("role %v reports quotaReserved %v", m["name"], m["quotaReserved"])
				}
			}
			return nil
		})
	})
}

// TestParking: a set that cannot complete is parked after the park time, releasing its quota to a
// deployment waiting behind it; an edit of the parked deployment queues its set again.
func TestParking(t *testing.T) {
	parallelWaiting(t, "waits the stack's park time (90 s) for a set to be parked")
	ctx := context.Background()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	queue(t, ctx, "joint-park", h20Entrance, ns, 4, admissioncheck.CheckName)
	kubectlApply(t, deploymentOnH20(ns, "stuck", "server Server 2 4"))
	eventually(t, 3*time.Minute, "one group of stuck holding quota", func() error {
		wls, err := groupWorkloads(ctx, ns, "stuck")
		if err != nil {
			return err
		}
		for _, wl := range wls {
			if meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadQuotaReserved) {
				return nil
			}
		}
		return fmt.Errorf("no group holds quota among %d Workloads", len(wls))
	})
	kubectlApply(t, deploymentOnH20(ns, "waiting", "server Server 1 4"))
	defer tearDown(t, ctx, ns)

	started := time.Now()
	eventually(t, parkAfter+2*time.Minute, "stuck parked: its Workloads deactivated", func() error {
		wls, err := groupWorkloads(ctx, ns, "stuck")
		if err != nil {
			return err
		}
		if len(wls) == 0 {
			return fmt.Errorf("no Workloads")
		}
		for _, wl := range wls {
			if wl.Spec.Active == nil || *wl.Spec.Active || wl.Annotations[workerv1.AnnotationParkedGeneration] == "" {
				return fmt.Errorf("Workload %s still active", wl.Name)
			}
		}
		return nil
	})
	if waited := time.Since(started); waited < parkAfter-10*time.Second {
		t.Fatalf("parked after %s, before the park time %s", waited, parkAfter)
	}
	eventually(t, time.Minute, "a Warning event naming the parking", func() error {
		return eventSeen(ctx, ns, "ReplicaSetParked", admissioncheck.ParkedMarker)
	})
	eventually(t, 3*time.Minute, "the waiting deployment running", func() error { return running(ctx, ns, "waiting", 1) })

	t.Run("an edit of the parked deployment queues it again", func(t *testing.T) {
		if _, err := stack.Kubectl("patch", "modeldeployment", "stuck", "-n", ns, "--type=json",
			"-p", `[{"op":"replace","path":"/spec/roles/0/replicas","value":1}]`); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "stuck's remaining group active again, no longer marked parked", func() error {
			wl := &kueuev1beta2.Workload{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workerv1.GroupName(ns, "stuck", "server", 0)}, wl); err != nil {
				return err
			}
			if (wl.Spec.Active != nil && !*wl.Spec.Active) || wl.Annotations[workerv1.AnnotationParkedGeneration] != "" {
				return fmt.Errorf("Workload %s: active=%v, annotations %v", wl.Name, wl.Spec.Active, wl.Annotations)
			}
			return nil
		})
	})
}

// TestParkingSparesServingReplicas: a scale-up that cannot fit is parked after the park time, and
// only its waiting groups are: the replica that was serving keeps its admitted Workload and its
// Pods. An edit of the deployment queues the parked groups again, and the set completes once it fits.
func TestParkingSparesServingReplicas(t *testing.T) {
	parallelWaiting(t, "waits the stack's park time (90 s) for a set to be parked")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "serving"
	applyCluster(t, ctx, ns)
	// Two replicas of two cards fit: r1 holds quota and waits for r2, which never gets any.
	queue(t, ctx, "park-serving-h20", h20Entrance, ns, 4, admissioncheck.CheckName)
	kubectlApply(t, deploymentOnH20(ns, name, "server Server 1 2"))
	defer tearDown(t, ctx, ns)
	eventually(t, 3*time.Minute, "r0 running", func() error { return running(ctx, ns, name, 1) })
	before, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	group := func(ordinal int32) string { return workerv1.GroupName(ns, name, "server", ordinal) }

	patchReplicas(t, ns, name, 3)
	started := time.Now()
	eventually(t, parkAfter+2*time.Minute, "r1 and r2 parked: deactivated, marked and told why", func() error {
		for _, ordinal := range []int32{1, 2} {
			wl := &kueuev1beta2.Workload{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: group(ordinal)}, wl); err != nil {
				return err
			}
			if wl.Spec.Active == nil || *wl.Spec.Active || wl.Annotations[workerv1.AnnotationParkedGeneration] == "" {
				return fmt.Errorf("Workload %s not parked: active=%v, annotations %v", wl.Name, wl.Spec.Active, wl.Annotations)
			}
			if c := checkOf(wl); !strings.Contains(c.Message, admissioncheck.ParkedMarker) {
				return fmt.Errorf("Workload %s: check %s %q", wl.Name, c.State, c.Message)
			}
		}
		return nil
	})
	if waited := time.Since(started); waited < parkAfter-10*time.Second {
		t.Fatalf("parked after %s, before the park time %s", waited, parkAfter)
	}
	// Kueue evicts a deactivated Workload a moment later: watch r0 through that moment, not only at it.
	for range 10 {
		servingUntouched(t, ctx, ns, name, group(0), before["0"])
		time.Sleep(time.Second)
	}
	eventually(t, time.Minute, "a Warning event naming the parking", func() error {
		return eventSeen(ctx, ns, "ReplicaSetParked", admissioncheck.ParkedMarker)
	})

	t.Run("an edit queues the parked groups again and the set completes when it fits", func(t *testing.T) {
		patchReplicas(t, ns, name, 2)
		eventually(t, 3*time.Minute, "r0 and r1 running, r2 gone, nothing marked parked", func() error {
			if err := running(ctx, ns, name, 2); err != nil {
				return err
			}
			wls, err := groupWorkloads(ctx, ns, name)
			if err != nil {
				return err
			}
			for _, wl := range wls {
				if (wl.Spec.Active != nil && !*wl.Spec.Active) || wl.Annotations[workerv1.AnnotationParkedGeneration] != "" {
					return fmt.Errorf("Workload %s: active=%v, annotations %v", wl.Name, wl.Spec.Active, wl.Annotations)
				}
			}
			return nil
		})
		servingUntouched(t, ctx, ns, name, group(0), before["0"])
	})
}

// servingUntouched fails the test unless a serving replica's Workload is active, unmarked and
// admitted with the joint check Ready, and its Pod is the one it was.
func servingUntouched(t *testing.T, ctx context.Context, namespace, deployment, group string, pod corev1.Pod) {
	t.Helper()
	wl := &kueuev1beta2.Workload{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: group}, wl); err != nil {
		t.Fatalf("serving Workload %s: %v", group, err)
	}
	if active := wl.Spec.Active == nil || *wl.Spec.Active; !active || wl.Annotations[workerv1.AnnotationParkedGeneration] != "" {
		t.Fatalf("serving Workload %s deactivated: active=%t, annotations %v", wl.Name, active, wl.Annotations)
	}
	if !meta.IsStatusConditionTrue(wl.Status.Conditions, kueuev1beta2.WorkloadAdmitted) || checkOf(wl).State != kueuev1beta2.CheckStateReady {
		t.Fatalf("serving Workload %s no longer admitted: conditions %v, check %+v", wl.Name, wl.Status.Conditions, checkOf(wl))
	}
	now, err := standing(ctx, namespace, deployment)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := now[pod.Labels[workerv1.LabelPodOrdinal]]; !ok || p.UID != pod.UID || !ready(p) {
		t.Fatalf("serving Pod %s replaced or not Ready (UID %s, was %s)", pod.Name, p.UID, pod.UID)
	}
}
