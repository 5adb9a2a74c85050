package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// externalDP is a deployment of one External-DP vLLM Server role on the h20 type: size ranks per
// replica, each rank its own API server on the serving port.
func externalDP(namespace, name string, size int, rank string) string {
	return vLLMDeployment(namespace, name) + fmt.Sprintf(`    - name: ranks
      replicas: 1
      size: %d
      instanceType: gpustack-nvidia-h20-linux-amd64
      resources: {accelerator: 1}
      extraArgs: ["--data-parallel-size", "%d", "--data-parallel-rank", "%s",
        "--data-parallel-address", "$(GPUSTACK_REPLICA_LEADER_ADDRESS)"]
`, size, size, rank)
}

// serviceAddresses are the ready endpoint addresses of a Service.
func serviceAddresses(ctx context.Context, namespace, service string) ([]string, error) {
	list := &discoveryv1.EndpointSliceList{}
	if err := stack.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: service}); err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && *e.Conditions.Ready {
				out = append(out, e.Addresses...)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// podIPs are the sorted IPs of Pods.
func podIPs(ps []corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Status.PodIP)
	}
	slices.Sort(out)
	return out
}

// roleStatusOf is a deployment's status of one role.
func roleStatusOf(ctx context.Context, namespace, deployment, role string) (*workerv1.RoleStatus, error) {
	md, err := modelDeployment(ctx, namespace, deployment)
	if err != nil {
		return nil, err
	}
	for i := range md.Status.Roles {
		if md.Status.Roles[i].Name == role {
			return &md.Status.Roles[i], nil
		}
	}
	return nil, fmt.Errorf("status.roles has no %s yet", role)
}

// eligibleCount is status.roles[].endpoints.eligible spelled for a comparison: "nil" when absent.
func eligibleCount(s *workerv1.RoleStatus) string {
	if s.Endpoints == nil || s.Endpoints.Eligible == nil {
		return "nil"
	}
	return fmt.Sprint(*s.Endpoints.Eligible)
}

// TestExternalDPServesEveryRank: an External-DP Server role of two ranks per replica reports
// loadBalance External, and its Services select both ranks (every rank serves HTTP), where a
// leader-served role selects its leader only. The two-rank replica's group-forward probe goes to
// each rank's Pod IP, where the stack's exporter stands in for an engine whose answer binds no
// request (no engine runs on KWOK), so the replica is held (EndpointEligibility
// Unknown/EndpointsHeldUnverified, eligible absent, GroupForward Unknown) and its role keeps the
// legacy readiness rule: no eligibility term. A single-rank replica needs no forwarding check: once
// Ready it is qualified, its rank labelled endpoint-eligible and its Services gain the term; a rank
// reporting not ready loses the label at once and the condition turns False/EndpointsRevoked.
func TestExternalDPServesEveryRank(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	runOnH20(t, ctx, ns, "dp-h20", 8, "ranks2", 2, externalDP(ns, "ranks2", 2, "$(GPUSTACK_MEMBER_INDEX)"))
	kubectlApply(t, externalDP(ns, "ranks1", 1, "0"))
	eventually(t, 3*time.Minute, "1 Pod of ranks1 running", func() error { return running(ctx, ns, "ranks1", 1) })

	eventually(t, time.Minute, "ranks2 reports an External balance over two declared ranks", func() error {
		s, err := roleStatusOf(ctx, ns, "ranks2", "ranks")
		if err != nil {
			return err
		}
		if p := s.Parallelism; p == nil || p.LoadBalance != workerv1.LoadBalanceExternal || p.Declared.DataParallel == nil || *p.Declared.DataParallel != 2 {
			return fmt.Errorf("parallelism is %+v", s.Parallelism)
		}
		if s.Endpoints == nil || s.Endpoints.Serving == nil || s.Endpoints.Serving.State != workerv1.ServingNotConfigured {
			return fmt.Errorf("endpoints are %+v, want serving NotConfigured without a router", s.Endpoints)
		}
		return nil
	})
	ranks, err := pods(ctx, ns, "ranks2")
	if err != nil {
		t.Fatal(err)
	}
	for _, service := range []string{"ranks2", "ranks2-ranks"} {
		svc := &corev1.Service{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: service}, svc); err != nil {
			t.Fatal(err)
		}
		if _, leaderOnly := svc.Spec.Selector[workerv1.LabelMemberIndex]; leaderOnly || svc.Spec.Selector[workerv1.LabelServes] != "true" {
			t.Fatalf("Service %s selects %v, want the serving label and no member-index term", service, svc.Spec.Selector)
		}
		eventually(t, time.Minute, "Service "+service+" reaches both ranks", func() error {
			got, err := serviceAddresses(ctx, ns, service)
			if err != nil {
				return err
			}
			if want := podIPs(ranks); !slices.Equal(got, want) {
				return fmt.Errorf("endpoints %v, want the ranks %v", got, want)
			}
			return nil
		})
	}
	eventually(t, time.Minute, "the two-rank replica is held unverified", func() error {
		if err := conditionIs(ctx, ns, "ranks2", "EndpointEligibility", "Unknown", "EndpointsHeldUnverified"); err != nil {
			return err
		}
		replicas := &v1alpha1.ModelReplicaList{}
		if err := stack.Client.List(ctx, replicas, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: "ranks2"}); err != nil {
			return err
		}
		if len(replicas.Items) != 1 || replicas.Items[0].Status.Qualification == nil {
			return fmt.Errorf("%d replicas of ranks2, none reporting its qualification yet", len(replicas.Items))
		}
		for _, l := range replicas.Items[0].Status.Qualification.Legs {
			if l.Type == "GroupForward" && l.State != "Unknown" {
				return fmt.Errorf("GroupForward is %s (%s), want Unknown: no engine bound the probe's request", l.State, l.Reason)
			}
		}
		s, err := roleStatusOf(ctx, ns, "ranks2", "ranks")
		if err != nil {
			return err
		}
		if got := eligibleCount(s); got != "nil" {
			return fmt.Errorf("eligible is %s, want absent while the replica is inconclusive", got)
		}
		return nil
	})
	for _, p := range ranks {
		if _, labelled := p.Labels[workerv1.LabelEndpointEligible]; labelled {
			t.Fatalf("rank %s of a held replica carries the eligibility label", p.Name)
		}
	}

	eventually(t, time.Minute, "the single-rank replica is qualified, labelled and selected by eligibility", func() error {
		if err := conditionIs(ctx, ns, "ranks1", "EndpointEligibility", "True", "EndpointsQualified"); err != nil {
			return err
		}
		s, err := roleStatusOf(ctx, ns, "ranks1", "ranks")
		if err != nil {
			return err
		}
		if got := eligibleCount(s); got != "1" {
			return fmt.Errorf("eligible is %s, want 1", got)
		}
		ps, err := pods(ctx, ns, "ranks1")
		if err != nil || len(ps) != 1 {
			return fmt.Errorf("%d Pods of ranks1: %v", len(ps), err)
		}
		if ps[0].Labels[workerv1.LabelEndpointEligible] != "true" {
			return fmt.Errorf("Pod %s is not labelled eligible", ps[0].Name)
		}
		svc := &corev1.Service{}
		if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ranks1-ranks"}, svc); err != nil {
			return err
		}
		if svc.Spec.Selector[workerv1.LabelEndpointEligible] != "true" || svc.Annotations[workerv1.AnnotationEndpointEligibility] != "active" {
			return fmt.Errorf("Service ranks1-ranks selects %v (annotations %v), want the eligibility term marked active", svc.Spec.Selector, svc.Annotations)
		}
		got, err := serviceAddresses(ctx, ns, "ranks1-ranks")
		if err != nil {
			return err
		}
		if want := podIPs(ps); !slices.Equal(got, want) {
			return fmt.Errorf("endpoints %v, want %v", got, want)
		}
		return nil
	})

	ps, err := pods(ctx, ns, "ranks1")
	if err != nil {
		t.Fatal(err)
	}
	rank := ps[0]
	orig := rank.DeepCopy()
	for i, c := range rank.Status.Conditions {
		if c.Type == corev1.PodReady {
			rank.Status.Conditions[i].Status, rank.Status.Conditions[i].LastTransitionTime = corev1.ConditionFalse, metav1.Now()
		}
	}
	if err := stack.Client.Status().Patch(ctx, &rank, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "a rank reporting not ready loses the label, and the deployment reports the revocation", func() error {
		p := &corev1.Pod{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(&rank), p); err != nil {
			return err
		}
		if _, labelled := p.Labels[workerv1.LabelEndpointEligible]; labelled {
			return fmt.Errorf("Pod %s still carries the eligibility label", p.Name)
		}
		if err := conditionIs(ctx, ns, "ranks1", "EndpointEligibility", "False", "EndpointsRevoked"); err != nil {
			return err
		}
		s, err := roleStatusOf(ctx, ns, "ranks1", "ranks")
		if err != nil {
			return err
		}
		if got := eligibleCount(s); got != "0" {
			return fmt.Errorf("eligible is %s, want 0 once every replica is conclusively unqualified", got)
		}
		return nil
	})
	svc := &corev1.Service{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ranks1-ranks"}, svc); err != nil {
		t.Fatal(err)
	}
	if svc.Spec.Selector[workerv1.LabelEndpointEligible] != "true" {
		t.Fatalf("Service ranks1-ranks dropped the eligibility term once active: %v", svc.Spec.Selector)
	}
}

// TestEachConfigurationSelectsByItsOwnMode: a role part-way through an edit from a leader-served
// configuration to External DP serves through both: the old replica through its leader only, the
// new one through every rank. The rollout is held (the role's rollout-held annotation, as the cache
// step writes it) and one old replica is deleted, both as Crossplane (mdplane's internal objects
// refuse any other writer), so its slot is refilled on the new configuration while the other old
// replica keeps running.
func TestEachConfigurationSelectsByItsOwnMode(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := ownName(t, "ns")
	const name = "edited"
	leaderServed := strings.Replace(externalDP(ns, name, 2, "$(GPUSTACK_MEMBER_INDEX)"), "replicas: 1", "replicas: 2", 1)
	leaderServed = strings.Replace(leaderServed, `extraArgs: ["--data-parallel-size", "2", "--data-parallel-rank", "$(GPUSTACK_MEMBER_INDEX)",
        "--data-parallel-address", "$(GPUSTACK_REPLICA_LEADER_ADDRESS)"]`, `extraArgs: ["--tensor-parallel-size", "2", "--nnodes", "2"]`, 1)
	runOnH20(t, ctx, ns, "dp-edit-h20", 8, name, 4, leaderServed)
	old, err := pods(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}

	role := &v1alpha1.ModelRole{}
	if err := stack.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-ranks"}, role); err != nil {
		t.Fatal(err)
	}
	// The test plays Crossplane: nobody else may write mdplane's internal objects.
	asCrossplane := clientAs(t, cluster.CrossplaneUser)
	patch := client.MergeFrom(role.DeepCopy())
	role.Annotations[workerv1.AnnotationRolloutHeld] = "RolloutHeldByCache: held by the test" // beside Crossplane's own
	if err := asCrossplane.Patch(ctx, role, patch); err != nil {
		t.Fatal(err)
	}
	kubectlApply(t, strings.Replace(externalDP(ns, name, 2, "$(GPUSTACK_MEMBER_INDEX)"), "replicas: 1", "replicas: 2", 1))
	eventually(t, time.Minute, "the role renders the External-DP configuration, its rollout still held", func() error {
		now := &v1alpha1.ModelRole{}
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(role), now); err != nil {
			return err
		}
		if now.Annotations[workerv1.AnnotationRolloutHeld] == "" {
			return fmt.Errorf("the role lost its rollout-held annotation")
		}
		if now.Spec.Revision == role.Spec.Revision {
			return fmt.Errorf("the role still renders revision %s", now.Spec.Revision)
		}
		return nil
	})
	replicas := &v1alpha1.ModelReplicaList{}
	if err := stack.Client.List(ctx, replicas, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelInstance: name, workerv1.LabelPodOrdinal: "1"}); err != nil || len(replicas.Items) != 1 {
		t.Fatalf("%d replicas of ordinal 1: %v", len(replicas.Items), err)
	}
	// A replica is the controllers' to delete.
	if err := clientAs(t, cluster.ControllersUser).Delete(ctx, &replicas.Items[0]); err != nil {
		t.Fatal(err)
	}

	var kept []corev1.Pod // the old replica's members
	for _, p := range old {
		if p.Labels[workerv1.LabelPodOrdinal] == "0" {
			kept = append(kept, p)
		}
	}
	eventually(t, 3*time.Minute, "ordinal 1 refilled on External DP beside the old ordinal 0", func() error {
		ps, err := pods(ctx, ns, name)
		if err != nil {
			return err
		}
		var fresh []corev1.Pod
		for _, p := range ps {
			switch {
			case p.DeletionTimestamp != nil:
				return fmt.Errorf("Pod %s still leaving", p.Name)
			case p.Labels[workerv1.LabelPodOrdinal] == "1":
				fresh = append(fresh, p)
			case !slices.ContainsFunc(kept, func(k corev1.Pod) bool { return k.UID == p.UID }):
				return fmt.Errorf("ordinal 0 was replaced (Pod %s): the held rollout moved", p.Name)
			}
		}
		if len(fresh) != 2 || !ready(fresh[0]) || !ready(fresh[1]) {
			return fmt.Errorf("%d new members of ordinal 1, want 2 Ready", len(fresh))
		}
		if !strings.Contains(argsOf(&fresh[0]), "--data-parallel-rank") {
			return fmt.Errorf("ordinal 1 runs %q, not the External-DP configuration", argsOf(&fresh[0]))
		}
		want := podIPs(append([]corev1.Pod{kept[slices.IndexFunc(kept, func(p corev1.Pod) bool { return p.Labels[workerv1.LabelMemberIndex] == "0" })]}, fresh...))
		for _, service := range []string{name, name + "-ranks"} {
			got, err := serviceAddresses(ctx, ns, service)
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("Service %s reaches %v, want the old leader and both new ranks %v", service, got, want)
			}
		}
		return nil
	})
}
