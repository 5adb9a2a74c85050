package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/retirement"
)

// runOnH20 applies the example cluster in namespace, a ClusterQueue of gpus behind the h20
// entrance and a deployment manifest, and waits until want of its Pods run. The namespace is torn
// down when the test ends, after anything it deferred (such as an invariant check).
func runOnH20(t *testing.T, ctx context.Context, namespace, clusterQueue string, gpus int64, name string, want int, manifest string) {
	t.Helper()
	applyCluster(t, ctx, namespace)
	queue(t, ctx, clusterQueue, h20Entrance, namespace, gpus)
	kubectlApply(t, manifest)
	t.Cleanup(func() { tearDown(t, ctx, namespace) })
	eventually(t, 3*time.Minute, fmt.Sprintf("%d Pods of %s running", want, name), func() error { return running(ctx, namespace, name, want) })
}

// standing returns the deployment's Pods that are not being deleted, by ordinal.
func standing(ctx context.Context, namespace, deployment string) (map[string]corev1.Pod, error) {
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return nil, err
	}
	out := map[string]corev1.Pod{}
	for _, p := range ps {
		if p.DeletionTimestamp == nil {
			out[p.Labels[workerv1.LabelPodOrdinal]] = p
		}
	}
	return out, nil
}

// runningKeeping passes once want Pods of the deployment run and every Pod of before (by ordinal)
// is still the one standing: a scale that replaced none of them.
func runningKeeping(ctx context.Context, namespace, deployment string, want int, before map[string]corev1.Pod) error {
	if err := running(ctx, namespace, deployment, want); err != nil {
		return err
	}
	now, err := standing(ctx, namespace, deployment)
	if err != nil {
		return err
	}
	for ordinal, p := range before {
		if now[ordinal].UID != p.UID {
			return fmt.Errorf("the Pod of ordinal %s was replaced", ordinal)
		}
	}
	return nil
}

// editRendered bounds how long an edit waits for its render when the deployment's Crossplane watch
// circuit breaker may have opened: Crossplane v2.4 reconciles a composite several times per change
// of its conditions, and on a loaded machine a burst of changes can empty the breaker; an edit is
// then rendered at the breaker's half-open probe (30 s) or the render's one-minute TTL.
const editRendered = 75 * time.Second

// nudge makes Crossplane render the deployment now, as any change to it does, so that a check that
// something stays held spans a render rather than waiting for Crossplane's poll.
func nudge(t *testing.T, namespace, deployment string) {
	t.Helper()
	if _, err := stack.Kubectl("annotate", "--overwrite", "-n", namespace, "modeldeployment/"+deployment,
		"e2e/nudge="+strconv.FormatInt(time.Now().UnixNano(), 10)); err != nil {
		t.Fatal(err)
	}
}

func patchReplicas(t *testing.T, namespace, deployment string, replicas int) {
	t.Helper()
	if _, err := stack.Kubectl("patch", "modeldeployment", deployment, "-n", namespace, "--type=json",
		"-p", fmt.Sprintf(`[{"op":"replace","path":"/spec/roles/0/replicas","value":%d}]`, replicas)); err != nil {
		t.Fatal(err)
	}
}

// TestScaleWithoutRestarts: scaling up adds only the new ordinals; scaling down sheds the highest
// ordinals and deletes their Workloads; the survivors keep their Pods throughout.
func TestScaleWithoutRestarts(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	applyCluster(t, ctx, ns)
	queue(t, ctx, "rollout-scale", h20Entrance, ns, 8)
	kubectlApply(t, deploymentOnH20(ns, "scaled", "server Server 2 1"))
	defer tearDown(t, ctx, ns)

	phase := time.Now()
	eventually(t, 3*time.Minute, "two replicas running", func() error { return running(ctx, ns, "scaled", 2) })
	fmt.Printf("e2e figure: 2 replicas running in %s\n", time.Since(phase).Round(100*time.Millisecond))
	before, err := standing(ctx, ns, "scaled")
	if err != nil {
		t.Fatal(err)
	}
	check := watchInvariants(t, ctx, ns, "scaled", 0) // the replica count moves: only configurations and in-place updates
	defer check()

	phase = time.Now()
	patchReplicas(t, ns, "scaled", 4)
	eventually(t, 3*time.Minute, "four replicas running, the first two untouched", func() error {
		if err := running(ctx, ns, "scaled", 4); err != nil {
			return err
		}
		now, err := standing(ctx, ns, "scaled")
		if err != nil {
			return err
		}
		for ordinal, p := range before {
			if now[ordinal].UID != p.UID {
				return fmt.Errorf("replica r%s restarted: Pod %s became %s", ordinal, p.UID, now[ordinal].UID)
			}
		}
		return nil
	})

	fmt.Printf("e2e figure: scale 2→4 running in %s\n", time.Since(phase).Round(100*time.Millisecond))
	phase = time.Now()
	patchReplicas(t, ns, "scaled", 1)
	eventually(t, 3*time.Minute, "one replica left, r0 untouched, the departed groups' Workloads gone", func() error {
		ps, err := pods(ctx, ns, "scaled")
		if err != nil {
			return err
		}
		if len(ps) != 1 || ps[0].UID != before["0"].UID {
			return fmt.Errorf("%d Pods remain (want r0's %s)", len(ps), before["0"].UID)
		}
		for ordinal := int32(1); ordinal < 4; ordinal++ {
			wl := &kueuev1beta2.Workload{}
			err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: workerv1.GroupName(ns, "scaled", "server", ordinal)}, wl)
			if err == nil {
				return fmt.Errorf("the Workload of departed replica r%d remains", ordinal)
			}
		}
		return nil
	})
	fmt.Printf("e2e figure: scale 4→1 settled (Pods and Workloads gone) in %s\n", time.Since(phase).Round(100*time.Millisecond))
}

// TestRollingEdit: an extraArgs edit on a three-replica role replaces one replica at a time, each
// replacement admitted before the next old replica leaves; never more than one replica missing.
func TestRollingEdit(t *testing.T) {
	parallelLong(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "edited"
	runOnH20(t, ctx, ns, "rollout-edit", 8, name, 3, deploymentOnH20(ns, name, "server Server 3 1"))
	check := watchInvariants(t, ctx, ns, name, 3)
	defer check()
	// Watch the deployment's Pods: one ordered stream of departures, creations and admissions.
	initial, w := watchPods(t, ctx, ns, name)
	defer w.Stop()
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var timeline []string
	record := func(format string, args ...any) {
		timeline = append(timeline, fmt.Sprintf("%6.2fs ", time.Since(start).Seconds())+fmt.Sprintf(format, args...))
	}
	fail := func(format string, args ...any) {
		t.Fatalf("%s; timeline:\n%s", fmt.Sprintf(format, args...), strings.Join(timeline, "\n"))
	}
	edited := func(p *corev1.Pod) bool { return strings.Contains(argsOf(p), "--max-model-len 8192") }
	type seen struct{ leaving, gated bool }
	state := map[string]seen{}
	podsNow := map[string]*corev1.Pod{}
	for i := range initial.Items {
		p := &initial.Items[i]
		podsNow[p.Name], state[p.Name] = p, seen{leaving: p.DeletionTimestamp != nil, gated: gated(p)}
	}
	departed := map[string]bool{}
	timeout := time.After(8 * time.Minute)
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-timeout:
			fail("rollout not done after 8 minutes")
		}
		p, ok := ev.Object.(*corev1.Pod)
		if !ok {
			continue
		}
		ordinal, kind := p.Labels[workerv1.LabelPodOrdinal], "old"
		if edited(p) {
			kind = "new"
		}
		if ev.Type == watch.Deleted {
			delete(podsNow, p.Name)
			record("r%s: %s Pod gone", ordinal, kind)
			continue
		}
		podsNow[p.Name] = p
		before, known := state[p.Name]
		now := seen{leaving: p.DeletionTimestamp != nil, gated: gated(p)}
		state[p.Name] = now
		switch {
		case !known && kind == "new":
			record("r%s: new Pod created", ordinal)
		case now.leaving && !before.leaving && known:
			record("r%s: %s Pod leaving", ordinal, kind)
			if kind == "old" && !departed[ordinal] {
				// Counted once per slot: Crossplane may re-create a retired replica's Pod in a
				// reconcile already under way, and mdplane deletes it again.
				departed[ordinal] = true
				// The next old replica leaves only when every other replica is admitted.
				for _, q := range podsNow {
					if q.Labels[workerv1.LabelPodOrdinal] != ordinal && q.DeletionTimestamp == nil && gated(q) {
						fail("r%s left while r%s was not admitted", ordinal, q.Labels[workerv1.LabelPodOrdinal])
					}
				}
			}
		case before.gated && !now.gated:
			record("r%s: %s Pod admitted", ordinal, kind)
		}
		standingOrdinals, admittedNew := map[string]bool{}, 0
		for _, q := range podsNow {
			if q.DeletionTimestamp == nil {
				standingOrdinals[q.Labels[workerv1.LabelPodOrdinal]] = true
				if edited(q) && !gated(q) {
					admittedNew++
				}
			}
		}
		if len(standingOrdinals) < 2 {
			fail("%d of 3 replicas standing: more than one missing", len(standingOrdinals))
		}
		if admittedNew == 3 && len(podsNow) == 3 {
			break
		}
	}
	fmt.Printf("e2e rollout timeline (3 replicas, one at a time):\n%s\n", strings.Join(timeline, "\n"))
	if len(departed) != 3 {
		fail("%d old replicas left, want 3", len(departed))
	}
	eventually(t, 3*time.Minute, "three replicas running the new arguments", func() error {
		return runningWith(ctx, ns, name, 3, "--max-model-len 8192")
	})

	eventually(t, 2*time.Minute, "the deployment reporting every replica up to date", func() error {
		c, err := deploymentConditionOf(ctx, ns, name, "ReplicasUpToDate")
		if err != nil || c != (condition{"True", "UpToDate", "all 3 instances run the current configuration"}) {
			return fmt.Errorf("ReplicasUpToDate %+v: %v", c, err)
		}
		return nil
	})
}

// runningWith reports an error unless want Pods of the deployment run and every one has args in its
// command line.
func runningWith(ctx context.Context, namespace, deployment string, want int, args string) error {
	if err := running(ctx, namespace, deployment, want); err != nil {
		return err
	}
	ps, err := pods(ctx, namespace, deployment)
	if err != nil {
		return err
	}
	for i := range ps {
		if !strings.Contains(argsOf(&ps[i]), args) {
			return fmt.Errorf("Pod %s runs %q, not yet %q", ps[i].Name, argsOf(&ps[i]), args)
		}
	}
	return nil
}

// argsOf is a Pod's main command line.
func argsOf(p *corev1.Pod) string {
	return strings.Join(append(p.Spec.Containers[0].Command, p.Spec.Containers[0].Args...), " ")
}

// TestRolloutWaitsAndSupersedes: with the quota full, a rollout retires one replica and waits — its
// replacement queued, nothing else shed; a second edit supersedes the queued replacement, and once
// quota frees up only the newest configuration is ever admitted.
func TestRolloutWaitsAndSupersedes(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "waiting"
	runOnH20(t, ctx, ns, "rollout-wait", 3, name, 3, deploymentOnH20(ns, name, "server Server 3 1"))
	setQuota(t, ctx, "rollout-wait", 2) // the retired replica's quota cannot be reused
	check := watchInvariants(t, ctx, ns, name, 3)
	defer check()

	edit := func(maxLen string) {
		t.Helper()
		if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
			"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","`+maxLen+`"]}]`); err != nil {
			t.Fatal(err)
		}
	}
	// Any admitted Pod of the middle configuration fails the test, whenever it is seen.
	middleAdmitted := func() error {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		for i := range ps {
			if strings.Contains(argsOf(&ps[i]), "--max-model-len 8192") && !gated(&ps[i]) {
				return fmt.Errorf("Pod %s of the superseded configuration was admitted", ps[i].Name)
			}
		}
		return nil
	}

	edit("8192")
	eventually(t, 2*time.Minute, "one replica retired, its replacement queued, the other two untouched", func() error {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		var old, queuedNew int
		for i := range ps {
			switch {
			case ps[i].DeletionTimestamp != nil:
			case strings.Contains(argsOf(&ps[i]), "--max-model-len 8192") && gated(&ps[i]):
				queuedNew++
			case !strings.Contains(argsOf(&ps[i]), "--max-model-len") && !gated(&ps[i]):
				old++
			}
		}
		if old != 2 || queuedNew != 1 {
			return fmt.Errorf("%d old replicas running, %d queued replacements", old, queuedNew)
		}
		return nil
	})
	for range 5 { // the rollout waits and sheds nothing
		if err := middleAdmitted(); err != nil {
			t.Fatal(err)
		}
		if err := running(ctx, ns, name, 3); err == nil {
			t.Fatal("three replicas running while the quota holds two")
		}
		time.Sleep(time.Second)
	}

	eventually(t, 2*time.Minute, "the deployment reporting the replacement in progress", func() error {
		c, err := deploymentConditionOf(ctx, ns, name, "ReplicasUpToDate")
		if err != nil || c.Status != "False" || c.Reason != "ReplacementInProgress" {
			return fmt.Errorf("ReplicasUpToDate %+v: %v", c, err)
		}
		return nil
	})

	edit("4096")
	eventually(t, 2*time.Minute, "the queued replacement superseded by the newest configuration", func() error {
		if err := middleAdmitted(); err != nil {
			t.Fatal(err)
		}
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		for i := range ps {
			if ps[i].DeletionTimestamp == nil && strings.Contains(argsOf(&ps[i]), "--max-model-len 8192") {
				return fmt.Errorf("Pod %s of the middle configuration still standing", ps[i].Name)
			}
		}
		return nil
	})

	setQuota(t, ctx, "rollout-wait", 3)
	eventually(t, 3*time.Minute, "three replicas running the newest configuration", func() error {
		if err := middleAdmitted(); err != nil {
			t.Fatal(err)
		}
		return runningWith(ctx, ns, name, 3, "--max-model-len 4096")
	})
}

// recordedReplacement is the ordinal of the role's replacement in flight as the deployment's rollout
// record holds it (what a restarted controller resumes from); empty when none.
func recordedReplacement(ctx context.Context, namespace, deployment, role string) (string, error) {
	md := &workerv1.ModelDeployment{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: deployment}, md); err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: retirement.RecordName(md.UID)}, cm); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	raw := cm.Data[retirement.ReplacementKeyPrefix+role]
	if raw == "" {
		return "", nil
	}
	var r v1alpha1.Replacement
	if err := json.Unmarshal([]byte(raw), &r); err != nil || r.Ordinal == nil {
		return "", err
	}
	return strconv.Itoa(int(*r.Ordinal)), nil
}

// TestRolloutResumesAfterRestart: mdplane-controllers killed while a replacement waits for quota
// remembers it in the deployment's rollout record; started again, it finishes that replacement before the next
// replica leaves. Meanwhile a namespace is deleted without waiting for them.
func TestRolloutResumesAfterRestart(t *testing.T) {
	sequential(t, "stops and restarts the controllers")
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "restarted"
	runOnH20(t, ctx, ns, "rollout-restart", 3, name, 3, deploymentOnH20(ns, name, "server Server 3 1"))
	setQuota(t, ctx, "rollout-restart", 2)
	check := watchInvariants(t, ctx, ns, name, 3)
	defer check()
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/spec/roles/0/extraArgs","value":["--max-model-len","8192"]}]`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "r2 retired and its replacement queued, remembered in the deployment's record", func() error {
		v, err := recordedReplacement(ctx, ns, name, "server")
		if err != nil || v != "2" {
			return fmt.Errorf("replacing=%q: %v", v, err)
		}
		ps, err := standing(ctx, ns, name)
		if err != nil {
			return err
		}
		if p, ok := ps["2"]; !ok || !gated(&p) || !strings.Contains(argsOf(&p), "--max-model-len 8192") {
			return fmt.Errorf("no queued replacement in r2 yet")
		}
		return nil
	})

	restarted := false
	t.Cleanup(func() {
		if !restarted {
			_ = stack.StartControllers(ctx)
		}
	})
	if err := stack.KillControllers(ctx); err != nil {
		t.Fatal(err)
	}
	// No namespace deletion waits on the controllers: mdplane's aggregated groups stay discoverable.
	bystander := ownName(t, "bystander")
	kubectlApply(t, fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %[1]s}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: left, namespace: %[1]s}\n", bystander))
	if err := stack.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bystander}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "a namespace deleted while the controllers are down", func() error {
		left := &corev1.Namespace{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: bystander}, left); err != nil {
			return client.IgnoreNotFound(err)
		}
		return fmt.Errorf("namespace %s is %s: %v", bystander, left.Status.Phase, left.Status.Conditions)
	})
	setQuota(t, ctx, "rollout-restart", 3)
	eventually(t, time.Minute, "Kueue admitting r2's replacement while mdplane is down", func() error {
		ps, err := standing(ctx, ns, name)
		if err != nil {
			return err
		}
		if p, ok := ps["2"]; !ok || gated(&p) {
			return fmt.Errorf("r2 not admitted yet")
		}
		return nil
	})
	time.Sleep(3 * time.Second)
	ps, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(ps) != 3 || strings.Contains(argsOf(ptrTo(ps["1"])), "8192") || strings.Contains(argsOf(ptrTo(ps["0"])), "8192") {
		t.Fatalf("the rollout moved while mdplane was down: %d standing", len(ps))
	}

	restarted = true
	if err := stack.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "the rollout resumed and finished", func() error {
		return runningWith(ctx, ns, name, 3, "--max-model-len 8192")
	})
}

func ptrTo(p corev1.Pod) *corev1.Pod { return &p }

// TestDeletedMemberRebuildsTheInstance: `kubectl delete pod` of one member of a two-member replica
// rebuilds the whole instance — both members and its Workload anew — and leaves its sibling alone;
// evicting a member (as a drain does) rebuilds its instance too, reported as an eviction.
func TestDeletedMemberRebuildsTheInstance(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "members"
	runOnH20(t, ctx, ns, "rollout-members", 8, name, 4, strings.Replace(deploymentOnH20(ns, name, "server Server 2 1"), "replicas: 2,", "replicas: 2, size: 2,", 1))
	uids := func() map[string]string {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, p := range ps {
			out[p.Name] = string(p.UID)
		}
		return out
	}
	before := uids()
	check := watchInvariants(t, ctx, ns, name, 2)
	defer check()
	group := workerv1.GroupName(ns, name, "server", 0)
	oldWorkload := &kueuev1beta2.Workload{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, oldWorkload); err != nil {
		t.Fatal(err)
	}

	// Hold r0's leader while it drains, to see the instance's Service outlive the replica until it goes.
	const hold = "e2e.mdplane.io/hold"
	if _, err := stack.Kubectl("patch", "pod", name+"-server-r0-m0", "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/metadata/finalizers/-","value":"`+hold+`"}]`); err != nil {
		t.Fatal(err)
	}
	if _, err := stack.Kubectl("delete", "pod", name+"-server-r0-m1", "-n", ns, "--wait=false"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, "r0's headless Service kept, being deleted, while its leader drains", func() error {
		leader := &corev1.Pod{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-server-r0-m0"}, leader); err != nil {
			return err
		}
		svc := &corev1.Service{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-server-r0"}, svc); err != nil {
			return err
		}
		if leader.DeletionTimestamp == nil || svc.DeletionTimestamp == nil {
			return fmt.Errorf("leader leaving: %v, Service leaving: %v", leader.DeletionTimestamp != nil, svc.DeletionTimestamp != nil)
		}
		return nil
	})
	eventually(t, time.Minute, "the hold on r0's leader released", func() error {
		leader := &corev1.Pod{}
		err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-server-r0-m0"}, leader)
		if err != nil || leader.UID != types.UID(before[name+"-server-r0-m0"]) {
			return nil // gone, or already its replacement
		}
		leader.Finalizers = slices.DeleteFunc(leader.Finalizers, func(f string) bool { return f == hold })
		return stack.Client.Update(ctx, leader)
	})
	eventually(t, 3*time.Minute, "r0 rebuilt whole with a new Workload, r1 untouched", func() error {
		if err := running(ctx, ns, name, 4); err != nil {
			return err
		}
		now := uids()
		for _, member := range []string{"-server-r0-m0", "-server-r0-m1"} {
			if now[name+member] == before[name+member] {
				return fmt.Errorf("%s%s kept its Pod", name, member)
			}
		}
		for _, member := range []string{"-server-r1-m0", "-server-r1-m1"} {
			if now[name+member] != before[name+member] {
				return fmt.Errorf("sibling %s%s was restarted", name, member)
			}
		}
		wl := &kueuev1beta2.Workload{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: group}, wl); err != nil {
			return err
		}
		if wl.UID == oldWorkload.UID {
			return fmt.Errorf("r0 kept its Workload")
		}
		return nil
	})
	eventually(t, time.Minute, "a ReplicaLeaving event naming the replica and the lease window", func() error {
		return eventSeen(ctx, ns, "ReplicaLeaving", "replica r0", "lost member", "30s")
	})

	// The eviction API (what a drain uses) is a departure too, reported as an eviction.
	evicted := &corev1.Pod{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-server-r1-m0"}, evicted); err != nil {
		t.Fatal(err)
	}
	evict(t, ctx, evicted)
	eventually(t, 3*time.Minute, "r1 rebuilt whole after the eviction, with a ReplicaEvicted event", func() error {
		if err := running(ctx, ns, name, 4); err != nil {
			return err
		}
		if now := uids(); now[name+"-server-r1-m1"] == before[name+"-server-r1-m1"] {
			return fmt.Errorf("r1's other member kept its Pod")
		}
		return eventSeen(ctx, ns, "ReplicaEvicted", "replica r1", "evicted")
	})
}

// TestSizeEdit: widening a role from one member to two replaces its instances one at a time; the
// member names and each instance's headless Service appear.
func TestSizeEdit(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "widened"
	runOnH20(t, ctx, ns, "rollout-size", 8, name, 2, deploymentOnH20(ns, name, "server Server 2 1"))
	check := watchInvariants(t, ctx, ns, name, 2)
	defer check()
	if _, err := stack.Kubectl("patch", "modeldeployment", name, "-n", ns, "--type=json",
		"-p", `[{"op":"add","path":"/spec/roles/0/size","value":2}]`); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, "two replicas of two named members, each behind its headless Service", func() error {
		if err := running(ctx, ns, name, 4); err != nil {
			return err
		}
		for _, replica := range []string{"-server-r0", "-server-r1"} {
			for _, member := range []string{"-m0", "-m1"} {
				if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + replica + member}, &corev1.Pod{}); err != nil {
					return err
				}
			}
			svc := &corev1.Service{}
			if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + replica}, svc); err != nil {
				return err
			}
			if svc.Spec.ClusterIP != corev1.ClusterIPNone {
				return fmt.Errorf("Service %s is not headless", svc.Name)
			}
		}
		return nil
	})
}

// TestPreemptedReplicaIsRebuilt: Kueue preempting a replica's group for a higher-priority workload
// retires the whole replica, reported as ReplicaEvicted with Kueue's reason; the slot is refilled
// and waits in the queue; its sibling keeps running.
func TestPreemptedReplicaIsRebuilt(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "preempted"
	runOnH20(t, ctx, ns, "rollout-preempt", 2, name, 2, deploymentOnH20(ns, name, "server Server 2 1"))
	// Kueue writes the queue's status all the while: read again on a conflict, as any client would.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cq := &kueuev1beta2.ClusterQueue{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Name: "rollout-preempt"}, cq); err != nil {
			return err
		}
		cq.Spec.Preemption = &kueuev1beta2.ClusterQueuePreemption{WithinClusterQueue: kueuev1beta2.PreemptionPolicyLowerPriority}
		return stack.Client.Update(ctx, cq)
	}); err != nil {
		t.Fatal(err)
	}
	before, err := standing(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	kubectlApply(t, `apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-urgent}
value: 100000
---
apiVersion: v1
kind: Pod
metadata:
  name: urgent
  namespace: `+ns+`
  labels: {kueue.x-k8s.io/queue-name: `+h20Entrance+`}
spec:
  priorityClassName: e2e-urgent
  containers:
    - name: main
      image: busybox
      resources: {requests: {nvidia.com/gpu: "1"}, limits: {nvidia.com/gpu: "1"}}
`)
	defer func() { _, _ = stack.Kubectl("delete", "pod", "urgent", "-n", ns, "--wait=false") }()
	eventually(t, 3*time.Minute, "one replica preempted and rebuilt into the queue, reported as ReplicaEvicted", func() error {
		if err := eventSeen(ctx, ns, "ReplicaEvicted", "Kueue evicted its group", "Preempted"); err != nil {
			return err
		}
		now, err := standing(ctx, ns, name)
		if err != nil {
			return err
		}
		kept, queuedAgain := 0, 0
		for ordinal, p := range now {
			switch {
			case p.UID == before[ordinal].UID:
				kept++
			case gated(ptrTo(p)):
				queuedAgain++
			}
		}
		if kept != 1 || queuedAgain != 1 {
			return fmt.Errorf("%d replicas kept, %d rebuilt and queued", kept, queuedAgain)
		}
		return nil
	})
}
