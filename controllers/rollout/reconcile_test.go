package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"github.com/mdplane/mdplane/controllers/retirement"
	"github.com/mdplane/mdplane/internal/pacing"
	"github.com/mdplane/mdplane/internal/replicas"
)

// The reconcile tests run on a deployment "md" in team-a with one role, "server".
const ns = "team-a"

var ctx = context.Background()

func deployment() *workerv1.ModelDeployment {
	return &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: ns, UID: "md-uid"}}
}

// replacingRole is a three-replica role whose status reports the replacement of ordinal in flight
// (what the departures controller reads without the pacer's book).
func replacingRole(ordinal int32) *v1alpha1.ModelRole {
	role := modelRole(3, "b", nil)
	role.Status.Replacement = ptr.To(replacing(ordinal, workerv1.ReplacementGateAdmitted))
	return role
}

// replacing is a replacement in flight at ordinal, waiting at gate.
func replacing(ordinal int32, gate string) v1alpha1.Replacement {
	return v1alpha1.Replacement{Ordinal: ptr.To(ordinal), Gate: gate}
}

// record is the deployment's rollout record holding the server role's replacement.
func record(r v1alpha1.Replacement) *corev1.ConfigMap {
	raw, _ := json.Marshal(r)
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: retirement.RecordName("md-uid"), Namespace: ns},
		Data: map[string]string{retirement.ReplacementKeyPrefix + "server": string(raw)}}
}

// recorded is the server role's replacement in the deployment's rollout record; zero when none.
func recorded(t *testing.T, c client.Client) v1alpha1.Replacement {
	t.Helper()
	cm := &corev1.ConfigMap{}
	var r v1alpha1.Replacement
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: retirement.RecordName("md-uid")}, cm); apierrors.IsNotFound(err) {
		return r
	} else {
		require.NoError(t, err)
	}
	if raw := cm.Data[retirement.ReplacementKeyPrefix+"server"]; raw != "" {
		require.NoError(t, json.Unmarshal([]byte(raw), &r))
	}
	return r
}

func modelRole(replicas int32, revision string, annotations map[string]string) *v1alpha1.ModelRole {
	return &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "md-server", Namespace: ns, Annotations: annotations},
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Replicas: replicas, Size: 1, Revision: revision}}
}

// replicaAt is the ModelReplica in an ordinal's slot on a revision; its name and UID carry both.
func replicaAt(ordinal int32, revision string) *v1alpha1.ModelReplica {
	name := "md-server-r" + strconv.Itoa(int(ordinal)) + "-" + revision
	return &v1alpha1.ModelReplica{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name),
			Labels: naming.ReplicaLabels("md", "server", ordinal)}, // as render-roles labels it
		Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "md", RoleName: "server", Ordinal: ordinal, Revision: revision,
			RevisionName: naming.RevisionName("md", "server", revision)},
	}
}

// memberOf is a replica's standing, ungated Pod; options make it gated, leaving or disrupted.
func memberOf(r *v1alpha1.ModelReplica, opts ...func(*corev1.Pod)) *corev1.Pod {
	ordinal := strconv.Itoa(int(r.Spec.Ordinal))
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: r.Name + "-m0", Namespace: ns, UID: types.UID(r.Name + "-m0"), Labels: map[string]string{
		workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "md", workerv1.LabelComponent: "server",
		workerv1.LabelPodOrdinal: ordinal, workerv1.LabelPodGroupName: workerv1.GroupName(ns, "md", "server", r.Spec.Ordinal),
	}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "composite.worker.gpustack.ai/v1alpha1", Kind: "ModelReplica", Name: r.Name, UID: r.UID, Controller: ptr.To(true)}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// readyPod reports Ready, as an engine that passed its readiness probe.
func readyPod(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
}

// serving is a replica with its admitted, Ready Pod and group.
func serving(ordinal int32, revision string) []client.Object {
	r := replicaAt(ordinal, revision)
	return []client.Object{r, memberOf(r, readyPod), groupOf(ordinal, true)}
}

func gatedPod(p *corev1.Pod) {
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: pacing.AdmissionGate}}
}

// leavingPod is being deleted, held by Kueue's finalizer.
func leavingPod(p *corev1.Pod) {
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p.Finalizers = []string{"kueue.x-k8s.io/managed"}
}

// restartedPod reports its engine container restarted n times, as the kubelet counts it.
func restartedPod(n int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", RestartCount: n}}
	}
}

// reportedPod carries the restart count a ReplicaRestarted event last told of.
func reportedPod(count string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Annotations = map[string]string{AnnotationRestartsReported: count}
	}
}

func drainedPod(p *corev1.Pod) {
	leavingPod(p)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting"}}
}

// stoppedByKueue marks a Pod as Kueue's Pod integration does before deleting it, with reason.
func stoppedByKueue(reason string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: "TerminationTarget", Status: corev1.ConditionTrue, Reason: reason,
			Message: "Preempted to accommodate a workload"}}
	}
}

// groupOf is the Workload of an ordinal's group, admitted or not.
func groupOf(ordinal int32, admitted bool) *kueue.Workload {
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: workerv1.GroupName(ns, "md", "server", ordinal), Namespace: ns, UID: types.UID("wl-" + strconv.Itoa(int(ordinal)))}}
	if admitted {
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"}}
	}
	return wl
}

// standing is a replica with its admitted Pod and group.
func standing(ordinal int32, revision string) []client.Object {
	r := replicaAt(ordinal, revision)
	return []client.Object{r, memberOf(r), groupOf(ordinal, true)}
}

// neverAdmitted is a replica whose group was never admitted: its Pod gated, its Workload waiting.
func neverAdmitted(ordinal int32, revision string) []client.Object {
	r := replicaAt(ordinal, revision)
	return []client.Object{r, memberOf(r, gatedPod), groupOf(ordinal, false)}
}

func objects(parts ...[]client.Object) []client.Object {
	var out []client.Object
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func exists(t *testing.T, c client.Client, obj client.Object, name string) bool {
	t.Helper()
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return obj.GetDeletionTimestamp() == nil
}

// elasticRole marks a role as an Elastic EP role's members.
func elasticRole(role *v1alpha1.ModelRole) *v1alpha1.ModelRole {
	role.Spec.Elastic = &v1alpha1.ElasticRole{Part: v1alpha1.ElasticMembers, HeadAddress: "md-elastic-head.ns.svc:6379"}
	return role
}

func TestPacerReconcile(t *testing.T) {
	leaving := func(ordinal int32, why string) string {
		return "Warning ReplicaLeaving replica r" + strconv.Itoa(int(ordinal)) + " of role server is leaving (" + why + "); the cache blocks it held stay leased for the 30s kv_lease_duration window, then its siblings lose them"
	}
	cases := []struct {
		rule        string
		role        *v1alpha1.ModelRole
		objs        []client.Object
		retired     []string
		created     []int32 // ordinals given a new replica of the role's revision
		annotations map[string]string
		inFlight    *int32               // the replacement in flight the deployment's record holds before the pass
		replacement v1alpha1.Replacement // what the record holds after it
		events      []string
		cadence     workerv1.RolloutCadence // written on the deployment when set
	}{
		{rule: "every replica current: nothing to do",
			role: modelRole(2, "b", nil), objs: objects(standing(0, "b"), standing(1, "b"))},
		{rule: "the highest outdated ordinal leaves first once all are admitted, remembered before it goes",
			role: modelRole(3, "b", nil), objs: objects(standing(0, "a"), standing(1, "a"), standing(2, "a")),
			retired: []string{"md-server-r2-a"}, replacement: replacing(2, workerv1.ReplacementGateAdmitted),
			events: []string{leaving(2, "replacing replica r2 (revision a) with revision b; 3 outdated")}},
		{rule: "an empty slot holds the next departure: one replica missing at a time",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2),
			objs:        objects(standing(0, "a"), standing(1, "a"), []client.Object{memberOf(replicaAt(2, "a"), leavingPod)}),
			replacement: replacing(2, workerv1.ReplacementGateAdmitted)},
		{rule: "a slot whose last Pod is gone gets a replica of the current revision",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2), objs: objects(standing(0, "a"), standing(1, "a")),
			created:     []int32{2},
			replacement: replacing(2, workerv1.ReplacementGateAdmitted)},
		{rule: "a new role gets a replica in every slot",
			role: modelRole(3, "b", nil), created: []int32{0, 1, 2}},
		{rule: "a slot whose departed replica's Pods remain is not refilled: they hold its group name",
			role:    modelRole(3, "b", nil),
			objs:    objects(standing(0, "b"), []client.Object{memberOf(replicaAt(1, "a"), leavingPod)}),
			created: []int32{2}},
		{rule: "a slot whose departed group's Workload outlives its Pods is not refilled: new Pods would join that group",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2),
			objs:        objects(standing(0, "a"), standing(1, "a"), []client.Object{groupOf(2, true)}),
			replacement: replacing(2, workerv1.ReplacementGateAdmitted)},
		{rule: "a replacement waiting for admission holds the next departure",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2),
			objs:        objects(standing(0, "a"), standing(1, "a"), []client.Object{replicaAt(2, "b"), memberOf(replicaAt(2, "b"), gatedPod), groupOf(2, false)}),
			replacement: replacing(2, workerv1.ReplacementGateAdmitted)},
		{rule: "the retired replica's re-created Pod in the old admitted group does not admit its replacement",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2),
			objs: objects(standing(0, "a"), standing(1, "a"), []client.Object{replicaAt(2, "b"), memberOf(replicaAt(2, "b"), gatedPod),
				func() *corev1.Pod { p := memberOf(replicaAt(2, "a")); p.Name += "-again"; return p }(), groupOf(2, true)}),
			replacement: replacing(2, workerv1.ReplacementGateAdmitted)},
		{rule: "a role whose rollout is held keeps its outdated replicas (RolloutHeldByCache)",
			role:        modelRole(3, "b", map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByCache: BindingNotFound: gone"}),
			objs:        objects(standing(0, "a"), standing(1, "a"), standing(2, "a")),
			annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByCache: BindingNotFound: gone"}},
		{rule: "a held role still fills an empty slot, on its current revision",
			role:    modelRole(3, "b", map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByCache: BindingNotFound: gone"}),
			objs:    objects(standing(0, "a"), standing(1, "a")),
			created: []int32{2}, annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByCache: BindingNotFound: gone"}},
		{rule: "a role held by its weights keeps its outdated replicas (RolloutHeldByWeights)",
			role:        modelRole(3, "b", map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ClaimNotBound: pending"}),
			objs:        objects(standing(0, "a"), standing(1, "a"), standing(2, "a")),
			annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ClaimNotBound: pending"}},
		{rule: "a role held by its weights leaves an empty slot empty: no new Pod can get them (no replacement, no scale-up)",
			role:        modelRole(3, "b", map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ArtifactNotResolved: not yet"}),
			objs:        objects(standing(0, "a"), standing(1, "a")),
			annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ArtifactNotResolved: not yet"}},
		{rule: "an Elastic EP role is outside the rollout: its outdated members stay",
			role: elasticRole(modelRole(3, "b", nil)), objs: objects(standing(0, "a"), standing(1, "a"), standing(2, "a"))},
		{rule: "an Elastic EP role's width growth adds members, ordinals in order, replacing none",
			role: elasticRole(modelRole(4, "b", nil)), objs: objects(standing(0, "a"), standing(1, "a")), created: []int32{2, 3}},
		{rule: "a new role held by its weights gets no replica",
			role:        modelRole(2, "b", map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ArtifactNotFound: gone"}),
			annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ArtifactNotFound: gone"}},
		{rule: "a role held by its weights still scales down",
			role: modelRole(1, "b", map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ClaimNotBound: pending"}),
			objs: objects(standing(0, "a"), neverAdmitted(1, "a")), retired: []string{"md-server-r1-a"},
			annotations: map[string]string{workerv1.AnnotationRolloutHeld: "RolloutHeldByWeights: ClaimNotBound: pending"},
			events:      []string{leaving(1, "the role was scaled to 1")}},
		{rule: "an admitted replacement resolves, and the next outdated leaves",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2), objs: objects(standing(0, "a"), standing(1, "a"), standing(2, "b")),
			retired: []string{"md-server-r1-a"}, replacement: replacing(1, workerv1.ReplacementGateAdmitted),
			events: []string{leaving(1, "replacing replica r1 (revision a) with revision b; 2 outdated")}},
		{rule: "a queued replacement superseded by a newer edit is replaced at once",
			role: modelRole(2, "c", nil), inFlight: ptr.To[int32](1),
			objs:    objects(standing(0, "a"), []client.Object{replicaAt(1, "b"), memberOf(replicaAt(1, "b"), gatedPod), groupOf(1, false)}),
			retired: []string{"md-server-r1-b"}, replacement: replacing(1, workerv1.ReplacementGateAdmitted),
			events: []string{leaving(1, "replica r1 on revision b was never admitted; replaced by revision c at once")}},
		{rule: "nothing outdated left clears the replacement in flight",
			role: modelRole(2, "b", nil), inFlight: ptr.To[int32](1), objs: objects(standing(0, "b"), standing(1, "b"))},
		{rule: "a scale-down deletes the never-admitted replicas at and above replicas at once, highest first",
			role: modelRole(1, "b", nil), objs: objects(standing(0, "b"), neverAdmitted(1, "b"), neverAdmitted(2, "b")),
			retired: []string{"md-server-r1-b", "md-server-r2-b"},
			events:  []string{leaving(2, "the role was scaled to 1"), leaving(1, "the role was scaled to 1")}},
		{rule: "a second replica of one slot is retired; the admitted one stays",
			role: modelRole(2, "b", nil),
			objs: objects(standing(0, "b"), standing(1, "b"), []client.Object{func() *v1alpha1.ModelReplica {
				r := replicaAt(1, "b")
				r.Name, r.UID = "md-server-r1-a-duplicate", "md-server-r1-a-duplicate"
				return r
			}()}),
			retired: []string{"md-server-r1-a-duplicate"},
			events:  []string{leaving(1, "a second replica of its slot")}},
		{rule: "capacity cadence: an admitted replacement whose members are not Ready holds the next departure",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2), cadence: workerv1.RolloutCadenceCapacity,
			objs:        objects(serving(0, "a"), serving(1, "a"), standing(2, "b")),
			replacement: replacing(2, workerv1.ReplacementGateReady)},
		{rule: "capacity cadence: a Ready replacement lets the next outdated replica leave",
			role: modelRole(3, "b", nil), inFlight: ptr.To[int32](2), cadence: workerv1.RolloutCadenceCapacity,
			objs:    objects(serving(0, "a"), serving(1, "a"), serving(2, "b")),
			retired: []string{"md-server-r1-a"}, replacement: replacing(1, workerv1.ReplacementGateReady),
			events: []string{leaving(1, "replacing replica r1 (revision a) with revision b; 2 outdated")}},
		{rule: "a role being deleted is left alone",
			role: func() *v1alpha1.ModelRole {
				r := modelRole(3, "b", nil)
				r.DeletionTimestamp, r.Finalizers = &metav1.Time{Time: time.Now()}, []string{"composite.apiextensions.crossplane.io"}
				return r
			}(), objs: objects(standing(0, "a"), standing(1, "a"), standing(2, "a"))},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			md := deployment()
			if tc.cadence != "" {
				md.Annotations = map[string]string{workerv1.AnnotationRolloutCadence: string(tc.cadence)}
			}
			objs := append(slices.Clone(tc.objs), tc.role, md)
			if tc.inFlight != nil {
				objs = append(objs, record(replacing(*tc.inFlight, workerv1.ReplacementGateAdmitted)))
			}
			c := fakecluster.Builder(objs...).Build()
			recorder := events.NewFakeRecorder(10)
			_, err := (&Pacer{Client: c, Recorder: recorder}).Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server"}})
			require.NoError(t, err)
			var retired []string
			for _, o := range tc.objs {
				if r, ok := o.(*v1alpha1.ModelReplica); ok && !exists(t, c, &v1alpha1.ModelReplica{}, r.Name) {
					retired = append(retired, r.Name)
				}
			}
			assert.Equal(t, tc.retired, retired)
			assert.Equal(t, tc.created, createdReplicas(t, c, tc.objs, "b"))
			role := &v1alpha1.ModelRole{}
			require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-server"}, role))
			if tc.annotations == nil {
				tc.annotations = map[string]string{}
			}
			if role.Annotations == nil {
				role.Annotations = map[string]string{}
			}
			assert.Equal(t, tc.annotations, role.Annotations, "the role's annotations are not the pacer's to write")
			assert.Equal(t, tc.replacement, recorded(t, c), "the replacement the record holds")
			assert.Equal(t, tc.events, fakecluster.Events(recorder))
		})
	}
}

// createdReplicas lists, by ordinal, the replicas on the API server that objs lacked, each checked to
// be of revision and controlled by the role.
func createdReplicas(t *testing.T, c client.Client, objs []client.Object, revision string) []int32 {
	t.Helper()
	had := map[string]bool{}
	for _, o := range objs {
		had[o.GetName()] = true
	}
	list := &v1alpha1.ModelReplicaList{}
	require.NoError(t, c.List(ctx, list, client.InNamespace(ns)))
	var out []int32
	for _, r := range list.Items {
		if had[r.Name] {
			continue
		}
		assert.Equal(t, revision, r.Spec.Revision, "a new replica is of the role's current revision")
		assert.Equal(t, "md-server", metav1.GetControllerOf(&r).Name, "and controlled by its role")
		assert.Equal(t, naming.ReplicaLabels("md", "server", r.Spec.Ordinal), r.Labels)
		out = append(out, r.Spec.Ordinal)
	}
	slices.Sort(out)
	return out
}

func TestPacerCreatesAReplicaOnceWhileTheCacheLags(t *testing.T) {
	role := modelRole(2, "b", nil)
	c := fakecluster.Builder(objects(standing(0, "b"), []client.Object{role, deployment()})...).Build()
	p := &Pacer{Client: c, Recorder: events.NewFakeRecorder(10)}
	_, err := p.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	// A lagging cache: the new replica is not listed, so only the expectation stops a second create.
	p.Client = interceptor.NewClient(c, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if replicas, ok := list.(*v1alpha1.ModelReplicaList); ok {
				replicas.Items = slices.DeleteFunc(replicas.Items, func(r v1alpha1.ModelReplica) bool { return r.Spec.Ordinal == 1 })
			}
			return nil
		},
	})
	_, err = p.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	assert.Equal(t, []int32{1}, createdReplicas(t, c, objects(standing(0, "b")), "b"))
}

func TestPacerRemembersTheReplacementOffTheRole(t *testing.T) {
	// The role is a composed resource of the deployment: a write of it would wake the deployment in
	// Crossplane, twice per replica a rollout turns over.
	role := modelRole(3, "b", nil)
	c := fakecluster.Builder(objects(standing(0, "a"), standing(1, "a"), standing(2, "a"), []client.Object{role, deployment()})...).Build()
	before := &v1alpha1.ModelRole{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(role), before))
	_, err := (&Pacer{Client: c, Recorder: events.NewFakeRecorder(10)}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	after := &v1alpha1.ModelRole{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(role), after))
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion, "the role is not written")
	assert.Equal(t, replacing(2, workerv1.ReplacementGateAdmitted), recorded(t, c), "the replacement remembered in the deployment's record, with the gate the next pass waits at")
}

func TestPacerWritesTheRecordOncePerReplacement(t *testing.T) {
	// r2's replacement is admitted: the pass retires r1, then the next waits for r1's replacement.
	role := modelRole(3, "b", nil)
	c := fakecluster.Builder(objects(standing(0, "a"), standing(1, "a"), standing(2, "b"),
		[]client.Object{role, deployment(), record(replacing(2, workerv1.ReplacementGateAdmitted))})...).Build()
	p := &Pacer{Client: c, Recorder: events.NewFakeRecorder(10)}
	version := func() string {
		cm := &corev1.ConfigMap{}
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: retirement.RecordName("md-uid")}, cm))
		return cm.ResourceVersion
	}
	_, err := p.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	assert.Equal(t, replacing(1, workerv1.ReplacementGateAdmitted), recorded(t, c))
	written := version()
	_, err = p.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	assert.Equal(t, written, version(), "waiting at the gate it recorded writes nothing more")
}

func TestDeparturesReconcile(t *testing.T) {
	r1 := replicaAt(1, "a")
	evicted := groupOf(1, true)
	evicted.Status.Conditions = append(evicted.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: "Preempted", Message: "Preempted to accommodate a workload"})
	rebuilt := func(why string) string {
		return "replica r1 of role server lost member md-server-r1-a-m0 (" + why + "); the whole instance is rebuilt on the current configuration, and the cache blocks it held stay leased for the 30s kv_lease_duration window, then its siblings lose them"
	}
	restarted := func(n int) string {
		return "replica r1 of role server has restarted " + strconv.Itoa(n) + " time(s) (member md-server-r1-a-m0); the cache blocks it held stay leased for the 30s kv_lease_duration window, then its siblings lose them"
	}
	cases := []struct {
		rule    string
		objs    []client.Object
		replica *v1alpha1.ModelReplica
		retired bool
		pods    map[string]bool // Pod → still standing
		events  []string
		requeue time.Duration
		gone    []*corev1.Pod // members the Pod watch saw deleted, no longer on the API server
	}{
		{rule: "a member that is merely not Ready is not a departure",
			objs: []client.Object{r1, memberOf(r1, func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			}), groupOf(1, true)}, replica: r1},
		{rule: "a member with a deletion timestamp retires the whole replica: ReplicaLeaving",
			objs: []client.Object{r1, memberOf(r1, leavingPod), groupOf(1, true)}, replica: r1, retired: true,
			events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod was deleted")}},
		{rule: "a leaving member that had restarted is told as leaving, not restarted",
			objs: []client.Object{r1, memberOf(r1, leavingPod, restartedPod(2)), groupOf(1, true)}, replica: r1, retired: true,
			events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod was deleted")}},
		{rule: "a container restart is ReplicaRestarted, and the replica stays",
			objs: []client.Object{r1, memberOf(r1, readyPod, restartedPod(1)), groupOf(1, true)}, replica: r1,
			events: []string{"Warning ReplicaRestarted " + restarted(1)}},
		{rule: "the restart count is the sum over the containers, sidecars included",
			objs: []client.Object{r1, memberOf(r1, restartedPod(1), func(p *corev1.Pod) {
				p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "routing-proxy", RestartCount: 2}}
			}), groupOf(1, true)}, replica: r1,
			events: []string{"Warning ReplicaRestarted " + restarted(3)}},
		{rule: "a restart count rising past the one reported is told again",
			objs:    []client.Object{r1, memberOf(r1, restartedPod(2), reportedPod("1")), groupOf(1, true)},
			replica: r1, events: []string{"Warning ReplicaRestarted " + restarted(2)}},
		{rule: "near miss: a restart count already reported says nothing",
			objs:    []client.Object{r1, memberOf(r1, restartedPod(2), reportedPod("2")), groupOf(1, true)},
			replica: r1},
		{rule: "near miss: no container restarted says nothing",
			objs:    []client.Object{r1, memberOf(r1, readyPod), groupOf(1, true)},
			replica: r1},
		{rule: "Kueue evicting the group is ReplicaEvicted",
			objs: []client.Object{r1, memberOf(r1, leavingPod), evicted}, replica: r1, retired: true,
			events: []string{"Warning ReplicaEvicted " + rebuilt("Kueue evicted its group: Preempted: Preempted to accommodate a workload")}},
		{rule: "Kueue evicting the group is ReplicaEvicted when its Workload is already gone, from the Pod Kueue stopped",
			objs: []client.Object{r1, memberOf(r1, leavingPod, stoppedByKueue("WorkloadEvictedDueToPreempted"))}, replica: r1, retired: true,
			events: []string{"Warning ReplicaEvicted " + rebuilt("Kueue evicted its group: Preempted: Preempted to accommodate a workload")}},
		{rule: "near miss: a Pod Kueue stopped for another reason is ReplicaLeaving",
			objs: []client.Object{r1, memberOf(r1, leavingPod, stoppedByKueue("WorkloadDeleted"))}, replica: r1, retired: true,
			events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod was deleted")}},
		{rule: "a member removed before a reconcile saw it leaving retires the replica, told with Kueue's reason",
			objs: []client.Object{r1}, gone: []*corev1.Pod{memberOf(r1, leavingPod, stoppedByKueue("WorkloadEvictedDueToPreempted"))},
			replica: r1, retired: true,
			events: []string{"Warning ReplicaEvicted " + rebuilt("Kueue evicted its group: Preempted: Preempted to accommodate a workload")}},
		{rule: "a member removed at once, without a deletion timestamp in its last state, is ReplicaLeaving",
			objs: []client.Object{r1}, gone: []*corev1.Pod{memberOf(r1)}, replica: r1, retired: true,
			events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod was deleted")}},
		{rule: "near miss: a removed member of an earlier replica of the same name says nothing",
			objs: []client.Object{r1, memberOf(r1, readyPod)},
			gone: []*corev1.Pod{func() *corev1.Pod {
				earlier := replicaAt(1, "a")
				earlier.UID = "earlier"
				return memberOf(earlier, leavingPod)
			}()},
			replica: r1},
		{rule: "a removed member waits behind another replacement in flight in its role",
			objs: []client.Object{replacingRole(2), r1}, gone: []*corev1.Pod{memberOf(r1, leavingPod)},
			replica: r1, requeue: 5 * time.Second},
		{rule: "a drain through the eviction API is ReplicaEvicted",
			objs: []client.Object{r1, memberOf(r1, drainedPod), groupOf(1, true)}, replica: r1, retired: true,
			events: []string{"Warning ReplicaEvicted " + rebuilt("evicted: EvictionByEvictionAPI: Eviction API: evicting")}},
		{rule: "a broken replica waits behind another replacement in flight in its role",
			objs:    []client.Object{replacingRole(2), r1, memberOf(r1, leavingPod), groupOf(1, true)},
			replica: r1, requeue: 5 * time.Second},
		{rule: "the replica in flight itself is rebuilt",
			objs:    []client.Object{replacingRole(1), r1, memberOf(r1, leavingPod), groupOf(1, true)},
			replica: r1, retired: true, events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod was deleted")}},
		{rule: "an Elastic EP member that ended in phase Failed retires its replica",
			objs:    []client.Object{elasticRole(modelRole(3, "a", nil)), r1, memberOf(r1, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), groupOf(1, true)},
			replica: r1, retired: true, events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod ended in phase Failed")}},
		{rule: "a member the kubelet evicted (phase Failed) retires its replica, saying why",
			objs: []client.Object{modelRole(3, "a", nil), r1, memberOf(r1, func(p *corev1.Pod) {
				p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", Message: "The node was low on resource: memory."}}
			}), groupOf(1, true)},
			replica: r1, retired: true, events: []string{"Warning ReplicaEvicted " + rebuilt("evicted: TerminationByKubelet: The node was low on resource: memory.")}},
		{rule: "a member that ended otherwise retires its replica, with the Pod's reason",
			objs: []client.Object{modelRole(3, "a", nil), r1, memberOf(r1, func(p *corev1.Pod) {
				p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "UnexpectedAdmissionError", "Allocate failed"
			}), groupOf(1, true)},
			replica: r1, retired: true, events: []string{"Warning ReplicaLeaving " + rebuilt("the Pod ended in phase Failed (UnexpectedAdmissionError: Allocate failed)")}},
		{rule: "near miss: a member merely not Ready is left as it is",
			objs:    []client.Object{modelRole(3, "a", nil), r1, memberOf(r1, func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }), groupOf(1, true)},
			replica: r1},
		{rule: "a departing replica's own Pods are deleted at once, and a replacement's in the same slot are not touched",
			objs: []client.Object{
				func() *v1alpha1.ModelReplica {
					r := replicaAt(1, "a")
					r.DeletionTimestamp, r.Finalizers = &metav1.Time{Time: time.Now()}, []string{"foregroundDeletion"}
					return r
				}(),
				memberOf(r1, func(p *corev1.Pod) { p.Finalizers = []string{"kueue.x-k8s.io/managed"} }),
				func() *corev1.Pod { p := memberOf(replicaAt(1, "b")); p.Name = "replacement"; return p }(),
			},
			replica: r1, pods: map[string]bool{"md-server-r1-a-m0": false, "replacement": true}},
		{rule: "near miss: a member leaving with its retired replica says nothing more (its retirement said ReplicaLeaving)",
			objs: []client.Object{
				func() *v1alpha1.ModelReplica {
					r := replicaAt(1, "a")
					r.DeletionTimestamp, r.Finalizers = &metav1.Time{Time: time.Now()}, []string{"foregroundDeletion"}
					return r
				}(),
				memberOf(r1, leavingPod, restartedPod(1)),
			},
			replica: r1, pods: map[string]bool{"md-server-r1-a-m0": false}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(append(tc.objs, deployment())...).Build()
			recorder := events.NewFakeRecorder(10)
			departures := &Departures{Client: c, Recorder: recorder}
			for _, p := range tc.gone {
				departures.MemberDeleted(p)
			}
			res, err := departures.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(tc.replica)})
			require.NoError(t, err)
			assert.Equal(t, tc.requeue, res.RequeueAfter)
			if tc.pods == nil {
				assert.Equal(t, !tc.retired, exists(t, c, &v1alpha1.ModelReplica{}, tc.replica.Name), "replica standing")
			}
			for name, want := range tc.pods {
				assert.Equal(t, want, exists(t, c, &corev1.Pod{}, name), "Pod %s standing", name)
			}
			assert.Equal(t, tc.events, fakecluster.Events(recorder))
		})
	}
}

func TestALeavingMemberIsDeletedOnceWhileTheCacheLags(t *testing.T) {
	leaving := replicaAt(1, "a")
	leaving.DeletionTimestamp, leaving.Finalizers = &metav1.Time{Time: time.Now()}, []string{"foregroundDeletion"}
	member := memberOf(replicaAt(1, "a"), func(p *corev1.Pod) { p.Finalizers = []string{"kueue.x-k8s.io/managed"} })
	deletes := 0
	// The delete takes on the API server; the cache has not shown its deletionTimestamp yet.
	c := interceptor.NewClient(fakecluster.Builder(leaving, member, deployment()).Build(), interceptor.Funcs{
		Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
			deletes++
			return nil
		},
	})
	memory := expectations.NewDeletes()
	departures := &Departures{Client: c, Recorder: events.NewFakeRecorder(10), Deletes: memory}
	for range 3 {
		_, err := departures.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(leaving)})
		require.NoError(t, err)
	}
	assert.Equal(t, 1, deletes, "one delete, however many passes read the lagging cache")

	deletes = 0
	_, err := (&Departures{Client: c, Recorder: events.NewFakeRecorder(10)}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(leaving)})
	require.NoError(t, err)
	assert.Equal(t, 1, deletes, "near miss: without the shared memory the member is deleted again")
}

func TestInstanceServicesReconcile(t *testing.T) {
	old, next := replicaAt(1, "a"), replicaAt(1, "b")
	service := func(deleting bool) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "md-server-r1", Namespace: ns, Finalizers: []string{workerv1.FinalizerInstanceMembers},
			Labels:          map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "md", workerv1.LabelComponent: "server", workerv1.LabelPodOrdinal: "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "composite.worker.gpustack.ai/v1alpha1", Kind: "ModelReplica", Name: old.Name, UID: old.UID, Controller: ptr.To(true)}}}}
		if deleting {
			s.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		return s
	}
	cases := []struct {
		rule     string
		objs     []client.Object
		released bool
	}{
		{"a Service not being deleted keeps its finalizer", []client.Object{service(false)}, false},
		{"a departing Service is held while a member of its own replica remains", []client.Object{service(true), memberOf(old)}, false},
		{"a departing Service is held while a leaving Pod of its slot remains", []client.Object{service(true), memberOf(next, leavingPod)}, false},
		{"the next replica's standing Pods do not hold the old Service", []client.Object{service(true), memberOf(next)}, true},
		{"a departing Service with no member left is released", []client.Object{service(true)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(tc.objs...).Build()
			_, err := (&InstanceServices{Client: c}).Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server-r1"}})
			require.NoError(t, err)
			svc := &corev1.Service{}
			err = c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-server-r1"}, svc)
			assert.Equal(t, tc.released, apierrors.IsNotFound(err), "released (the fake API server deletes an object once its last finalizer goes)")
		})
	}
}

func TestWorkloadReaperReconcile(t *testing.T) {
	r1 := replicaAt(1, "a")
	nextMember := memberOf(replicaAt(1, "b")) // the slot's next replica's Pod: on the API server, not in the cache yet
	cases := []struct {
		rule    string
		objs    []client.Object
		reaped  bool
		apiOnly []client.Object
	}{
		{"a group with a standing member keeps its Workload", []client.Object{groupOf(1, true), memberOf(r1), func() *corev1.Pod {
			p := memberOf(r1, leavingPod)
			p.Name += "-m1"
			return p
		}()}, false, nil},
		{"a group whose every member is leaving loses its Workload", []client.Object{groupOf(1, true), memberOf(r1, leavingPod)}, true, nil},
		{"a group without Pods is left to the garbage collector", []client.Object{groupOf(1, true)}, false, nil},
		{"a Workload owned by a Pod the cache has not shown (the slot's next replica) is not the departed group's", []client.Object{func() *kueue.Workload {
			wl := groupOf(1, true)
			wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: nextMember.Name, UID: nextMember.UID}}
			return wl
		}(), memberOf(r1, leavingPod)}, false, []client.Object{nextMember}},
		{"a Workload whose owner Pod is gone from the API server too is the departed group's", []client.Object{func() *kueue.Workload {
			wl := groupOf(1, true)
			wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "md-server-r1-a-m1", UID: "md-server-r1-a-m1"}}
			return wl
		}(), memberOf(r1, leavingPod)}, true, nil},
		{"a Workload owned by the leaving Pods goes", []client.Object{func() *kueue.Workload {
			wl := groupOf(1, true)
			wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "md-server-r1-a-m0", UID: "md-server-r1-a-m0"}}
			return wl
		}(), memberOf(r1, leavingPod)}, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(tc.objs...).Build()
			apiServer := fakecluster.Builder(append(slices.Clone(tc.objs), tc.apiOnly...)...).Build()
			name := workerv1.GroupName(ns, "md", "server", 1)
			_, err := (&WorkloadReaper{Client: c, Reader: apiServer}).Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
			require.NoError(t, err)
			assert.Equal(t, tc.reaped, !exists(t, c, &kueue.Workload{}, name))
		})
	}
}

func TestPacerReportsAReplicaItCannotCreate(t *testing.T) {
	role := modelRole(1, "b", nil)
	c := fakecluster.Builder(role, deployment()).Build()
	refusing := interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*v1alpha1.ModelReplica); !ok {
				return c.Create(ctx, obj, opts...)
			}
			return apierrors.NewForbidden(v1alpha1.SchemeGroupVersion.WithResource("modelreplicas").GroupResource(), "", errors.New("no create verb"))
		},
	})
	recorder := events.NewFakeRecorder(10)
	_, err := (&Pacer{Client: refusing, Recorder: recorder}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.Error(t, err, "the pass fails and is retried")
	got := fakecluster.Events(recorder)
	require.Len(t, got, 1)
	assert.Contains(t, got[0], "Warning ReplicaCreateFailed cannot create replica r0 of role server: ")
	assert.Contains(t, got[0], "no create verb; the rollout controller tries again")
}

// TestPacerSnapshotsTheRevisionBeforeItsReplicas: a replica's Pods are stamped from its revision,
// so the revision exists before the replica; one no replica runs any more goes, and one the pacer
// did not take (not controlled by the role) stays.
func TestPacerSnapshotsTheRevisionBeforeItsReplicas(t *testing.T) {
	role := modelRole(2, "b", nil)
	role.UID = "role-uid"
	owned := func(name string) *appsv1.ControllerRevision {
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: naming.RoleLabels("md", "server"),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(role, v1alpha1.SchemeGroupVersion.WithKind("ModelRole"))}}}
	}
	foreign := owned("md-server-x")
	foreign.OwnerReferences = nil
	c := fakecluster.Builder(append(objects(standing(0, "a")), role, deployment(), owned("md-server-a"), owned("md-server-old"), foreign)...).Build()
	var order []string
	recording := interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			order = append(order, fmt.Sprintf("%T", obj))
			return c.Create(ctx, obj, opts...)
		},
	})
	_, err := (&Pacer{Client: recording, Recorder: events.NewFakeRecorder(10)}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	assert.Equal(t, []string{"*v1.ControllerRevision", "*v1alpha1.ModelReplica"}, order, "the revision first, then the replica of the empty slot r1")
	cr := &appsv1.ControllerRevision{}
	require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "md-server-b"}, cr))
	rev, err := replicas.ReadRevision(cr)
	require.NoError(t, err)
	assert.Equal(t, "b", rev.Revision)
	assert.True(t, metav1.IsControlledBy(cr, role))
	assert.True(t, exists(t, c, &appsv1.ControllerRevision{}, "md-server-a"), "replica r0 still runs revision a")
	assert.False(t, exists(t, c, &appsv1.ControllerRevision{}, "md-server-old"), "no replica runs it")
	assert.True(t, exists(t, c, &appsv1.ControllerRevision{}, "md-server-x"), "not the role's own snapshot")
}

func TestPacerConfirmsADepartureOnTheAPIServer(t *testing.T) {
	// The cache shows r2's replacement admitted; the API server already has Kueue stopping it.
	role, inFlight := modelRole(3, "b", nil), record(replacing(2, workerv1.ReplacementGateAdmitted))
	c := fakecluster.Builder(objects(standing(0, "a"), standing(1, "a"), standing(2, "b"), []client.Object{role, deployment(), inFlight})...).Build()
	stopped := fakecluster.Builder(objects(standing(0, "a"), standing(1, "a"),
		[]client.Object{replicaAt(2, "b"), memberOf(replicaAt(2, "b"), leavingPod), groupOf(2, true), role, deployment(), inFlight})...).Build()
	_, err := (&Pacer{Client: c, Reader: stopped, Recorder: events.NewFakeRecorder(10)}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	assert.True(t, exists(t, c, &v1alpha1.ModelReplica{}, "md-server-r1-a"), "r1 stays while r2's replacement is leaving")

	_, err = (&Pacer{Client: c, Reader: c, Recorder: events.NewFakeRecorder(10)}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
	require.NoError(t, err)
	assert.False(t, exists(t, c, &v1alpha1.ModelReplica{}, "md-server-r1-a"), "confirmed, r1 leaves")
}

func TestPacerLetsAVacatedSlotSettle(t *testing.T) {
	role := modelRole(3, "b", nil)
	departing := memberOf(replicaAt(2, "a"), leavingPod)
	c := fakecluster.Builder(objects(standing(0, "a"), standing(1, "a"),
		[]client.Object{departing, role, deployment(), record(replacing(2, workerv1.ReplacementGateAdmitted))})...).Build()
	now := time.Now()
	p := &Pacer{Client: c, Recorder: events.NewFakeRecorder(10), Now: func() time.Time { return now }}
	pass := func() time.Duration {
		res, err := p.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(role)})
		require.NoError(t, err)
		return res.RequeueAfter
	}
	pass()
	gone := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(departing), gone))
	gone.Finalizers = nil // Kueue lets it go
	require.NoError(t, c.Update(ctx, gone))
	assert.Equal(t, VacancySettle, pass(), "the slot just emptied waits")
	assert.Empty(t, createdReplicas(t, c, objects(standing(0, "a"), standing(1, "a")), "b"))
	now = now.Add(VacancySettle / 2)
	assert.Equal(t, VacancySettle/2, pass())
	now = now.Add(VacancySettle / 2)
	pass()
	assert.Equal(t, []int32{2}, createdReplicas(t, c, objects(standing(0, "a"), standing(1, "a")), "b"), "settled, refilled")
}

// TestARebuildKeepsThePreemptionOnTheRole: rebuilding a preempted replica records on its role who
// Kueue preempted it for, under its slot, for the replacement to read once the replica and Kueue's
// word are gone; near miss: a drain records nothing.
func TestARebuildKeepsThePreemptionOnTheRole(t *testing.T) {
	reported := "Kueue preempted this replica's group for Workload b/big-group of ModelDeployment b/big"
	for _, row := range []struct {
		rule   string
		status string // the replica's PreemptedBy
		member func(*corev1.Pod)
		want   map[string]string
	}{
		{rule: "the replica's own report is kept", status: reported, member: stoppedByKueue("WorkloadEvictedDueToPreempted"),
			want: map[string]string{"r1": reported}},
		{rule: "without a report, Kueue's word on the stopped member is kept", member: stoppedByKueue("WorkloadEvictedDueToPreempted"),
			want: map[string]string{"r1": "Kueue preempted this replica's group for another workload"}},
		{rule: "near miss: a drain is no preemption", member: drainedPod},
	} {
		t.Run(row.rule, func(t *testing.T) {
			r1 := replicaAt(1, "a")
			r1.Status.PreemptedBy = row.status
			role := modelRole(3, "a", nil)
			c := fakecluster.Builder(role, r1, memberOf(r1, leavingPod, row.member), deployment()).Build()
			_, err := (&Departures{Client: c, Recorder: events.NewFakeRecorder(10)}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(r1)})
			require.NoError(t, err)
			assert.False(t, exists(t, c, &v1alpha1.ModelReplica{}, r1.Name), "rebuilt")
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(role), role))
			assert.Equal(t, row.want, role.Status.Preemptions)
		})
	}
}

// TestAPodsReadyTimeoutIsCountedOnTheRole: rebuilding a replica Kueue evicted at the waitForPodsReady
// timeout counts one more in a row for its slot, with the backoff before the slot is filled again,
// once per replica; near miss: an eviction of another cause counts nothing.
func TestAPodsReadyTimeoutIsCountedOnTheRole(t *testing.T) {
	timedOut := stoppedByKueue("WorkloadEvictedDueToPodsReadyTimeout")
	for _, row := range []struct {
		rule   string
		before *v1alpha1.ReadyTimeout
		member func(*corev1.Pod)
		count  int32
	}{
		{rule: "a first eviction counts one", member: timedOut, count: 1},
		{rule: "an eviction of a replica created after the last one counts one more",
			before: &v1alpha1.ReadyTimeout{Count: 1, Evicted: metav1.NewTime(time.Now().Add(-time.Hour))}, member: timedOut, count: 2},
		{rule: "near miss: the same replica's eviction, counted by a pass whose delete was refused, is not counted again",
			before: &v1alpha1.ReadyTimeout{Count: 1, Evicted: metav1.NewTime(time.Now().Add(time.Hour))}, member: timedOut, count: 1},
		{rule: "near miss: a preemption counts nothing", member: stoppedByKueue("WorkloadEvictedDueToPreempted")},
	} {
		t.Run(row.rule, func(t *testing.T) {
			r1 := replicaAt(1, "a")
			r1.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute))
			role := modelRole(3, "a", nil)
			if row.before != nil {
				role.Status.ReadyTimeouts = map[string]v1alpha1.ReadyTimeout{"r1": *row.before}
			}
			c := fakecluster.Builder(role, r1, memberOf(r1, leavingPod, row.member), deployment()).Build()
			recorder := events.NewFakeRecorder(10)
			_, err := (&Departures{Client: c, Recorder: recorder}).Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(r1)})
			require.NoError(t, err)
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(role), role))
			got := role.Status.ReadyTimeouts["r1"]
			assert.Equal(t, row.count, got.Count)
			if row.count > 0 && row.before == nil {
				assert.Equal(t, pacing.ReadyTimeoutBackoff(row.count), got.Until.Sub(got.Evicted.Time), "the slot waits the backoff")
				assert.Contains(t, fakecluster.Events(recorder)[0], "is rebuilt after 1m0s (1 PodsReady timeouts in a row)")
			}
		})
	}
}

// A role that is gone leaves its replicas: the pacer deletes those it controlled, not the garbage
// collector one owner level at a time, and keeps any other role's and those of a role recreated
// under the name, which the API server shows before the cache does.
func TestPacerCollectsTheReplicasOfARoleThatIsGone(t *testing.T) {
	controlledBy := func(r *v1alpha1.ModelReplica, role, uid string) *v1alpha1.ModelReplica {
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.ModelRoleKind,
			Name: role, UID: types.UID(uid), Controller: ptr.To(true)}}
		return r
	}
	cases := []struct {
		rule      string
		recreated bool // the API server holds a role "md-server" of UID "new" the cache does not show
		replicas  []*v1alpha1.ModelReplica
		kept      []string // the replicas standing after the pass, each with its Pod
	}{
		{rule: "every replica the gone role controlled is deleted, with its Pods",
			replicas: []*v1alpha1.ModelReplica{controlledBy(replicaAt(0, "a"), "md-server", "old"), controlledBy(replicaAt(1, "a"), "md-server", "old")}},
		{rule: "near miss: another role's replica stays",
			replicas: []*v1alpha1.ModelReplica{controlledBy(replicaAt(0, "a"), "md-server", "old"), controlledBy(replicaAt(1, "b"), "md-decode", "other")},
			kept:     []string{"md-server-r1-b"}},
		{rule: "near miss: a replica no role controls stays",
			replicas: []*v1alpha1.ModelReplica{replicaAt(0, "a")},
			kept:     []string{"md-server-r0-a"}},
		{rule: "near miss: a role recreated under the name keeps its replicas, not the old role's",
			recreated: true,
			replicas:  []*v1alpha1.ModelReplica{controlledBy(replicaAt(0, "a"), "md-server", "old"), controlledBy(replicaAt(1, "b"), "md-server", "new")},
			kept:      []string{"md-server-r1-b"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			var objs []client.Object
			for _, r := range tc.replicas {
				objs = append(objs, r, memberOf(r))
			}
			if tc.recreated {
				role := modelRole(2, "b", nil)
				role.UID = "new"
				objs = append(objs, role)
			}
			c := fakecluster.Builder(objs...).Build()
			cache := interceptor.NewClient(c, interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*v1alpha1.ModelRole); ok {
						return apierrors.NewNotFound(v1alpha1.SchemeGroupVersion.WithResource("modelroles").GroupResource(), key.Name)
					}
					return c.Get(ctx, key, obj, opts...)
				},
			})
			p := &Pacer{Client: cache, Reader: c, Recorder: events.NewFakeRecorder(10)}
			_, err := p.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "md-server"}})
			require.NoError(t, err)
			list := &v1alpha1.ModelReplicaList{}
			require.NoError(t, c.List(ctx, list))
			var standing, standingPods, keptPods []string
			for _, r := range list.Items {
				standing = append(standing, r.Name)
			}
			assert.ElementsMatch(t, tc.kept, standing)
			pods := &corev1.PodList{}
			require.NoError(t, c.List(ctx, pods))
			for _, p := range pods.Items {
				standingPods = append(standingPods, p.Name)
			}
			for _, r := range tc.kept {
				keptPods = append(keptPods, r+"-m0")
			}
			assert.ElementsMatch(t, keptPods, standingPods, "a deleted replica's Pods go with it; a kept one's stay")
		})
	}
}
