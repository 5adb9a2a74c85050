package members

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/expectations"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/internal/replicas"
)

// The tests materialise slot 1 of role "server" of deployment "md" in team-a.
const ns = "team-a"

var ctx = context.Background()

// leader is the replica's member m0 as the API server holds it, running image.
func leader(image string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "md-server-r1-m0", Namespace: ns,
		Labels: map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelMemberIndex: "0"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelReplicaKind,
			Name: "md-server-r1-abcde", UID: "replica-uid", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: naming.MainContainer, Image: image}}}}
}

func replica(size int32) *v1alpha1.ModelReplica {
	return &v1alpha1.ModelReplica{
		ObjectMeta: metav1.ObjectMeta{Name: "md-server-r1-abcde", Namespace: ns, UID: "replica-uid",
			Labels: naming.ReplicaLabels("md", "server", 1)},
		Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "md", RoleName: "server", Ordinal: 1, Revision: "rev1",
			RevisionName: naming.RevisionName("md", "server", "rev1")},
	}
}

func revision(t *testing.T, rev string, size int32) *appsv1.ControllerRevision {
	data, err := json.Marshal(&v1alpha1.RoleRevision{Revision: rev, Size: size, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: naming.RoleLabels("md", "server"), Annotations: map[string]string{workerv1.AnnotationPodSpecHash: "abc", "prometheus.io/scrape": "true"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: naming.MainContainer, Image: "vllm"}}},
	}})
	require.NoError(t, err)
	return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: naming.RevisionName("md", "server", "rev1"), Namespace: ns,
		Labels: naming.RoleLabels("md", "server")}, Data: runtime.RawExtension{Raw: data}, Revision: 1}
}

// writes counts what a reconcile writes, by verb; a reconcile writes from several goroutines.
type writes map[string]int

var writesMu sync.Mutex

func (w writes) add(verb string) {
	writesMu.Lock()
	defer writesMu.Unlock()
	w[verb]++
}

func newReconciler(t *testing.T, w writes, objs ...client.Object) (*Reconciler, client.Client, *events.FakeRecorder) {
	t.Helper()
	c := fakecluster.Builder(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create")
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update")
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			w.add("patch")
			return c.Patch(ctx, obj, patch, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			w.add("status")
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	rec := events.NewFakeRecorder(10)
	// A clock an hour ahead at each reading: no report waits, unless a test sets its own.
	reported, now := newWriteTimes(), time.Now()
	reported.now = func() time.Time { now = now.Add(time.Hour); return now }
	return &Reconciler{Client: c, Recorder: rec, expected: expectations.New(), reported: reported, probes: newProbes(), refused: newRefusals()}, c, rec
}

func reconcileReplica(t *testing.T, r *Reconciler) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server-r1-abcde"}})
	require.NoError(t, err)
	return res
}

func podsOf(t *testing.T, c client.Client) []corev1.Pod {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, c.List(ctx, pods, client.InNamespace(ns)))
	return pods.Items
}

func TestMaterialize(t *testing.T) {
	t.Run("creates every member of the revision and the instance Service, each controlled by the replica", func(t *testing.T) {
		w := writes{}
		r, c, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2))
		reconcileReplica(t, r)
		pods := podsOf(t, c)
		require.Len(t, pods, 2)
		for _, pod := range pods {
			assert.True(t, metav1.IsControlledBy(&pod, replica(2)), pod.Name)
		}
		assert.ElementsMatch(t, []string{"md-server-r1-m0", "md-server-r1-m1"}, []string{pods[0].Name, pods[1].Name})
		svc := &corev1.Service{}
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: naming.InstanceName("md", "server", 1)}, svc))
		assert.True(t, metav1.IsControlledBy(svc, replica(2)))
		assert.Equal(t, 3, w["create"], "one create per object")
	})
	t.Run("creates nothing while the revision is not in the cache", func(t *testing.T) {
		r, c, _ := newReconciler(t, writes{}, replica(2))
		assert.Equal(t, reconcile.Result{}, reconcileReplica(t, r), "the revision's arrival requeues the replica")
		assert.Empty(t, podsOf(t, c))
	})
	t.Run("a replica of its role's current configuration is materialised before the revision is in the cache", func(t *testing.T) {
		rev, err := replicas.ReadRevision(revision(t, "rev1", 2))
		require.NoError(t, err)
		role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns},
			Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Revision: "rev1", Size: 2, Template: rev.Template}}
		r, c, _ := newReconciler(t, writes{}, replica(2), role)
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 2)
	})
	t.Run("a replica of an older configuration waits for its revision", func(t *testing.T) {
		role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns},
			Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Revision: "rev2", Size: 2}}
		r, c, _ := newReconciler(t, writes{}, replica(2), role)
		reconcileReplica(t, r)
		assert.Empty(t, podsOf(t, c))
	})
	t.Run("a revision holding another configuration is refused, with an event naming the way out", func(t *testing.T) {
		r, c, rec := newReconciler(t, writes{}, replica(2), revision(t, "other", 2))
		reconcileReplica(t, r)
		assert.Empty(t, podsOf(t, c))
		got := fakecluster.Events(rec)
		require.Len(t, got, 1)
		assert.Contains(t, got[0], `holds revision "other", not the "rev1"`)
		assert.Contains(t, got[0], "delete the ModelReplica")
	})
	t.Run("creates no member while the role's weights cannot be delivered, and the missing ones once they can", func(t *testing.T) {
		role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns,
			Annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ClaimNotBound: pending"}},
			Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Revision: "rev1", Size: 2}}
		r, c, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2), role)
		reconcileReplica(t, r)
		assert.Empty(t, podsOf(t, c))
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(role), role))
		role.Annotations = map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByCache: BindingNotFound: gone"}
		require.NoError(t, c.Update(ctx, role))
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 2, "a cache hold creates Pods")
	})
	t.Run("the members of a replica stamped with a PV's node affinity require it", func(t *testing.T) {
		rep := replica(1)
		rep.Spec.RequiredNodeAffinity = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-a"}}}}}}
		r, c, _ := newReconciler(t, writes{}, rep, revision(t, "rev1", 1))
		reconcileReplica(t, r)
		pods := podsOf(t, c)
		require.Len(t, pods, 1)
		assert.Equal(t, rep.Spec.RequiredNodeAffinity, pods[0].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	})
	t.Run("never updates a member that exists, and creates only the missing one", func(t *testing.T) {
		existing := leader("as-it-was")
		w := writes{}
		r, c, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2), existing)
		reconcileReplica(t, r)
		got := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(existing), got))
		assert.Equal(t, "as-it-was", got.Spec.Containers[0].Image)
		assert.Len(t, podsOf(t, c), 2)
		assert.Zero(t, w["update"]+w["patch"])
	})
	t.Run("an interrupted replacement is completed with its own configuration, not the role's newer one", func(t *testing.T) {
		// The replica on rev1 had created m0 when the role moved on to rev2 (another image).
		existing := leader("vllm")
		role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns},
			Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Revision: "rev2", Size: 2,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: naming.MainContainer, Image: "vllm-newer"}}}}}}
		r, c, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2), role, existing)
		reconcileReplica(t, r)
		got := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "md-server-r1-m1"}, got))
		assert.Equal(t, "vllm", got.Spec.Containers[0].Image, "the missing member comes from the replica's own revision")
	})
	t.Run("a member name still held by the slot's departing replica is retried, not taken", func(t *testing.T) {
		departing := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "md-server-r1-m0", Namespace: ns,
			Labels: map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelMemberIndex: "0"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelReplicaKind,
				Name: "md-server-r1-old", UID: "old-uid", Controller: ptr.To(true)}}}}
		r, _, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2), departing)
		assert.Equal(t, slotBusyRetry, reconcileReplica(t, r).RequeueAfter)
	})
	t.Run("a slot another replica's Pods still hold gets no Pods until they are gone", func(t *testing.T) {
		leaving := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "md-server-abcde", Namespace: ns, Labels: naming.ReplicaLabels("md", "server", 1),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelReplicaKind,
				Name: "md-server-r1-old", UID: "old-uid", Controller: ptr.To(true)}}}}
		r, c, _ := newReconciler(t, writes{}, replica(1), revision(t, "rev1", 1), leaving)
		assert.Equal(t, slotBusyRetry, reconcileReplica(t, r).RequeueAfter)
		assert.Len(t, podsOf(t, c), 1, "the slot's Pods share one pod group: a new member must not join the old one")
		require.NoError(t, c.Delete(ctx, leaving))
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 1)
		assert.True(t, metav1.IsControlledBy(&podsOf(t, c)[0], replica(1)))
	})
	t.Run("a slot whose previous group's Workload still stands gets no Pods until it is gone", func(t *testing.T) {
		previous := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: workerv1.GroupName(ns, "md", "server", 1), Namespace: ns, UID: "old-wl",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "md-server-r1-m0", UID: "old-pod"}}}}
		r, c, _ := newReconciler(t, writes{}, replica(1), revision(t, "rev1", 1), previous)
		assert.Equal(t, slotBusyRetry, reconcileReplica(t, r).RequeueAfter)
		assert.Empty(t, podsOf(t, c), "Kueue may still count the old Workload under the group's name")
		require.NoError(t, c.Delete(ctx, previous))
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 1)
	})
	t.Run("near miss: a Workload of the name that nothing owns or deletes does not hold the slot", func(t *testing.T) {
		orphan := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: workerv1.GroupName(ns, "md", "server", 1), Namespace: ns}}
		r, c, _ := newReconciler(t, writes{}, replica(1), revision(t, "rev1", 1), orphan)
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 1)
	})
	t.Run("near miss: a replica whose members exist is not held by its own group's Workload", func(t *testing.T) {
		own := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: workerv1.GroupName(ns, "md", "server", 1), Namespace: ns,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "md-server-r1-m0", UID: "pod-uid"}}}}
		r, c, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2), leader("vllm"), own)
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 2, "the missing member joins the replica's own group")
	})
	t.Run("a member whose create the cache has not shown yet is not created again", func(t *testing.T) {
		w := writes{}
		r, c, _ := newReconciler(t, w, replica(1), revision(t, "rev1", 1))
		reconcileReplica(t, r)
		require.Len(t, podsOf(t, c), 1)
		assert.NotEmpty(t, podsOf(t, c)[0].GenerateName, "a size-1 member's name is generated")
		// A lagging cache: the Pod is not listed, so only the expectation stops a second create.
		r.Client = interceptor.NewClient(c.(client.WithWatch), interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if pods, ok := list.(*corev1.PodList); ok {
					pods.Items = nil
					return nil
				}
				return c.List(ctx, list, opts...)
			},
		})
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 1)
	})
	t.Run("a member lost after it was seen is created again", func(t *testing.T) {
		r, c, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2))
		reconcileReplica(t, r)
		reconcileReplica(t, r) // the cache shows both: the expectations are settled
		require.NoError(t, c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "md-server-r1-m1", Namespace: ns}}))
		reconcileReplica(t, r)
		assert.Len(t, podsOf(t, c), 2)
	})
}

func reserved() *kueue.Workload {
	return &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: workerv1.GroupName(ns, "md", "server", 1), Namespace: ns},
		Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
			{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: metav1.Now()},
		}}}
}

func TestReport(t *testing.T) {
	ready := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	t.Run("reports members, Ready members and the group's admission", func(t *testing.T) {
		wl := reserved()
		wl.Status.Conditions = append(wl.Status.Conditions,
			metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted", LastTransitionTime: metav1.Now()})
		wl.Status.Admission = &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{
			{Name: "server", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "h100"}}}}
		r, c, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2), wl)
		reconcileReplica(t, r)
		for _, pod := range podsOf(t, c) {
			ready(&pod)
			require.NoError(t, c.Status().Update(ctx, &pod))
		}
		reconcileReplica(t, r)
		got := &v1alpha1.ModelReplica{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(2)), got))
		assert.Equal(t, int32(2), *got.Status.Members)
		assert.Equal(t, int32(2), *got.Status.ReadyMembers)
		assert.Equal(t, "Reserved", got.Status.Quota)
		assert.True(t, *got.Status.Admitted)
		assert.Equal(t, wl.Name, got.Status.Workload)
		assert.Equal(t, []string{"h100"}, got.Status.Flavors, "the flavors of the role's PodSet")
		ready := got.Status.GetCondition(xpv2.TypeReady)
		assert.Equal(t, corev1.ConditionTrue, ready.Status, "Ready once every member exists and is Ready: the role counts it")
		assert.Equal(t, "2 of 2 members exist, 2 Ready", ready.Message)
	})
	t.Run("is not Ready while a member is not", func(t *testing.T) {
		r, c, _ := newReconciler(t, writes{}, replica(2), revision(t, "rev1", 2))
		reconcileReplica(t, r)
		pods := podsOf(t, c)
		ready(&pods[0])
		require.NoError(t, c.Status().Update(ctx, &pods[0]))
		reconcileReplica(t, r)
		got := &v1alpha1.ModelReplica{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(2)), got))
		cond := got.Status.GetCondition(xpv2.TypeReady)
		assert.Equal(t, corev1.ConditionFalse, cond.Status)
		assert.Equal(t, ReasonMembersNotReady, cond.Reason)
		assert.Equal(t, "2 of 2 members exist, 1 Ready", cond.Message)
	})
	t.Run("a reconcile that creates members leaves the report to the next", func(t *testing.T) {
		w := writes{}
		r, _, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2))
		reconcileReplica(t, r)
		assert.Zero(t, w["status"])
		reconcileReplica(t, r)
		assert.Equal(t, 1, w["status"])
	})
	t.Run("its reservation and a count are details; its readiness settles, then carries them", func(t *testing.T) {
		w := writes{}
		r, c, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2))
		now := time.Now()
		r.reported.now = func() time.Time { return now }
		reconcileReplica(t, r) // creates the members
		reconcileReplica(t, r) // reports them: InFlight, no Workload yet
		require.Equal(t, 1, w["status"])
		require.NoError(t, c.Create(ctx, reserved()))
		assert.Equal(t, detailInterval, reconcileReplica(t, r).RequeueAfter, "reserved now: the role reads that from the Workload")
		now = now.Add(reportInterval)
		pod := podsOf(t, c)[0]
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		require.NoError(t, c.Status().Update(ctx, &pod))
		assert.Equal(t, detailInterval-reportInterval, reconcileReplica(t, r).RequeueAfter, "one of two Ready: only a count changed")
		assert.Equal(t, 1, w["status"])
		for _, pod := range podsOf(t, c) {
			ready(&pod)
			require.NoError(t, c.Status().Update(ctx, &pod))
		}
		assert.Equal(t, settleInterval, reconcileReplica(t, r).RequeueAfter,
			"every member Ready: the change settles first, so that what follows at once (a probe's verdict) rides along")
		assert.Equal(t, 1, w["status"])
		now = now.Add(settleInterval)
		reconcileReplica(t, r)
		assert.Equal(t, 2, w["status"])
		got := &v1alpha1.ModelReplica{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(2)), got))
		assert.Equal(t, "Reserved", got.Status.Quota, "the reservation rode along")
	})
	t.Run("a detail waiting its interval is written then, without a change the role reads", func(t *testing.T) {
		w := writes{}
		r, c, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2))
		now := time.Now()
		r.reported.now = func() time.Time { return now }
		reconcileReplica(t, r)
		reconcileReplica(t, r)
		require.NoError(t, c.Create(ctx, reserved()))
		reconcileReplica(t, r)
		now = now.Add(detailInterval)
		assert.Zero(t, reconcileReplica(t, r).RequeueAfter)
		assert.Equal(t, 2, w["status"])
	})
	t.Run("a reservation still pending is a detail: the role acts on none of the waits before it", func(t *testing.T) {
		w := writes{}
		pending := reserved()
		pending.Status.Conditions = nil
		r, _, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2))
		now := time.Now()
		r.reported.now = func() time.Time { return now }
		reconcileReplica(t, r)
		reconcileReplica(t, r)
		require.Equal(t, 1, w["status"])
		require.NoError(t, r.Client.Create(ctx, pending))
		now = now.Add(reportInterval)
		assert.Equal(t, detailInterval, reconcileReplica(t, r).RequeueAfter, "its Workload built, not reserved: a detail")
	})
	t.Run("a replica created a moment ago holds its first report until it has existed the settle interval", func(t *testing.T) {
		created := time.Now().Truncate(time.Second) // as the API server stores it
		young := replica(2)
		young.CreationTimestamp = metav1.NewTime(created)
		r, c, _ := newReconciler(t, writes{}, young, revision(t, "rev1", 2))
		now := created.Add(time.Second)
		r.reported.now = func() time.Time { return now }
		reconcileReplica(t, r)
		res := reconcileReplica(t, r) // sees its members
		assert.Equal(t, settleInterval-time.Second, res.RequeueAfter)
		got := &v1alpha1.ModelReplica{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(young), got))
		assert.Nil(t, got.Status.Members, "not reported yet")
		now = created.Add(settleInterval)
		reconcileReplica(t, r)
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(young), got))
		assert.NotNil(t, got.Status.Members, "reported once it has existed the settle interval")
	})
	t.Run("a second reconcile of an unchanged replica writes nothing", func(t *testing.T) {
		w := writes{}
		r, _, _ := newReconciler(t, w, replica(2), revision(t, "rev1", 2))
		reconcileReplica(t, r)
		reconcileReplica(t, r) // sees its members: reports them
		before := len(w) + w["create"] + w["status"] + w["patch"] + w["update"]
		reconcileReplica(t, r)
		assert.Equal(t, before, len(w)+w["create"]+w["status"]+w["patch"]+w["update"])
	})
}

func TestEndpointEligibilityLabel(t *testing.T) {
	setReady := func(t *testing.T, c client.Client, status corev1.ConditionStatus) {
		for _, pod := range podsOf(t, c) {
			pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
			require.NoError(t, c.Status().Update(ctx, &pod))
		}
	}
	eligible := func(t *testing.T, c client.Client) []string {
		var out []string
		for _, pod := range podsOf(t, c) {
			out = append(out, pod.Labels[workerv1.LabelEndpointEligible])
		}
		return out
	}
	r, c, _ := newReconciler(t, writes{}, replica(1), revision(t, "rev1", 1), reserved())
	now := time.Now()
	r.reported.now = func() time.Time { return now }
	reconcileReplica(t, r)
	reconcileReplica(t, r)
	assert.Equal(t, []string{""}, eligible(t, c), "no readiness observed: nothing granted")

	setReady(t, c, corev1.ConditionTrue)
	now = now.Add(reportInterval)
	reconcileReplica(t, r)
	assert.Equal(t, []string{"true"}, eligible(t, c), "a Ready single member is qualified: granted")
	now = now.Add(settleInterval)
	reconcileReplica(t, r) // the change has settled: reported
	got := &v1alpha1.ModelReplica{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(1)), got))
	assert.Equal(t, v1alpha1.QualificationQualified, got.Status.Qualification.Verdict)
	assert.True(t, got.Status.Qualification.Granted)

	setReady(t, c, corev1.ConditionFalse)
	reconcileReplica(t, r) // within the report interval: the revocation is not held back
	assert.Equal(t, []string{""}, eligible(t, c), "a member reporting not ready loses the label at once")
}

// TestPreemptionIsReported: a replica whose group Kueue preempted says who for and why, naming the
// preemptor's deployment, and keeps saying it after Kueue's word leaves the Workload, until the group
// holds quota again.
func TestPreemptionIsReported(t *testing.T) {
	bigGroup := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "big-group", Namespace: "team-b", UID: "preemptor-uid"},
		Spec: kueue.WorkloadSpec{PriorityClassRef: kueue.NewWorkloadPriorityClassRef("serving-high"), Priority: ptr.To[int32](1000)}}
	preemptorPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big-server-0", Namespace: "team-b",
		Labels: map[string]string{workerv1.LabelPodGroupName: "big-group", workerv1.LabelInstance: "big"}}}
	wl := reserved()
	wl.Status.Conditions = []metav1.Condition{
		{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption, LastTransitionTime: metav1.Now()},
		{Type: kueue.WorkloadPreempted, Status: metav1.ConditionTrue, Reason: kueue.InClusterQueueReason, LastTransitionTime: metav1.Now(),
			Message: "Preempted to accommodate a workload (UID: preemptor-uid, JobUID: UNKNOWN) due to prioritization in the ClusterQueue; preemptor path: /h20; preemptee path: /h20"}}
	r, c, _ := newReconciler(t, writes{}, replica(1), revision(t, "rev1", 1), wl, bigGroup, preemptorPod)
	reconcileReplica(t, r) // creates the member
	reconcileReplica(t, r)
	got := &v1alpha1.ModelReplica{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(1)), got))
	assert.Equal(t, "Preempted", got.Status.Quota)
	want := "Kueue preempted this replica's group for Workload team-b/big-group (priority class serving-high, priority 1000) of ModelDeployment team-b/big: " +
		"it has a higher priority in the same ClusterQueue (reason InClusterQueue)"
	assert.Equal(t, want, got.Status.PreemptedBy)

	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(wl), wl))
	wl.Status.Conditions = nil // a Workload rebuilt for the replacement Pods says nothing of it
	require.NoError(t, c.Status().Update(ctx, wl))
	reconcileReplica(t, r)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(1)), got))
	assert.Equal(t, "Preempted", got.Status.Quota, "counted preempted while it waits for quota")
	assert.Equal(t, want, got.Status.PreemptedBy, "kept while the group waits for quota")

	wl.Status.Conditions = reserved().Status.Conditions
	require.NoError(t, c.Status().Update(ctx, wl))
	assert.Equal(t, settleInterval, reconcileReplica(t, r).RequeueAfter, "a change the role reads settles first")
	reconcileReplica(t, r)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(1)), got))
	assert.Equal(t, "Reserved", got.Status.Quota)
	assert.Empty(t, got.Status.PreemptedBy, "cleared once the group holds quota again")

	// Preempted again: the Workload already rebuilt, the member Kueue stopped still terminating.
	wl.Status.Conditions = nil
	require.NoError(t, c.Status().Update(ctx, wl))
	member := podsOf(t, c)[0]
	member.Status.Conditions = append(member.Status.Conditions, corev1.PodCondition{Type: "TerminationTarget", Status: corev1.ConditionTrue,
		Reason: "WorkloadEvictedDueToPreempted", Message: "Preempted to accommodate a workload (UID: preemptor-uid, JobUID: UNKNOWN) due to prioritization in the ClusterQueue"})
	require.NoError(t, c.Status().Update(ctx, &member))
	assert.Zero(t, reconcileReplica(t, r).RequeueAfter, "who preempted it is written at once, before the stopped member goes")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(replica(1)), got))
	assert.Equal(t, "Preempted", got.Status.Quota)
	assert.Equal(t, want, got.Status.PreemptedBy, "read from the stopped member")
}

// TestARebuiltReplicaReadsItsSlotsPreemption: the replica that replaces a preempted one reads why
// its group waits from its role's entry for its slot; near miss: a role of another UID is not its.
func TestARebuiltReplicaReadsItsSlotsPreemption(t *testing.T) {
	who := "Kueue preempted this replica's group for Workload team-b/big-group of ModelDeployment team-b/big"
	for _, row := range []struct {
		rule     string
		roleUID  types.UID
		want     string
		wantQuot string
	}{
		{"the role's entry for the slot is the replica's", "role-uid", who, "Preempted"},
		{"near miss: a role of the same name but another UID says nothing of it", "other-uid", "", "Pending"},
	} {
		t.Run(row.rule, func(t *testing.T) {
			role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns, UID: row.roleUID},
				Status: v1alpha1.ModelRoleStatus{Preemptions: map[string]string{"r1": who}}}
			rebuilt := replica(1)
			rebuilt.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelRoleKind,
				Name: "md-server", UID: "role-uid", Controller: ptr.To(true)}}
			waiting := reserved()
			waiting.Status.Conditions = nil
			r, c, _ := newReconciler(t, writes{}, rebuilt, revision(t, "rev1", 1), waiting, role)
			reconcileReplica(t, r) // creates the member
			reconcileReplica(t, r)
			got := &v1alpha1.ModelReplica{}
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(rebuilt), got))
			assert.Equal(t, row.wantQuot, got.Status.Quota)
			assert.Equal(t, row.want, got.Status.PreemptedBy)
		})
	}
}
