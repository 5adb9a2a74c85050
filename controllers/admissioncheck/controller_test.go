package admissioncheck

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// deployment is a ModelDeployment "md" at generation 3 with one role of the given replicas.
func deployment(replicas int32) *workerv1.ModelDeployment {
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "team-a", Generation: 3}}
	md.Spec.Roles = []workerv1.ModelDeploymentRole{{Name: "server", Replicas: replicas, InstanceType: "a10g"}}
	return md
}

// member is a replica Pod of md's role "server" in the group of its Workload.
func member(ordinal int32, group string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "md-server-r" + strconv.Itoa(int(ordinal)) + "-m0", Namespace: "team-a", Labels: map[string]string{
		workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "md", workerv1.LabelComponent: "server",
		workerv1.LabelPodGroupName: group, workerv1.LabelPodOrdinal: strconv.Itoa(int(ordinal)),
	}}}
}

// admitted is a Workload Kueue admitted with this check Ready.
func admitted(name string, at time.Time) *kueue.Workload {
	wl := held(name, at)
	wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)})
	wl.Status.AdmissionChecks[0].State = kueue.CheckStateReady
	wl.Status.AdmissionChecks[0].Message = "all 2 replica groups of the deployment hold quota; admitted together"
	return wl
}

// parkedAtGen marks a Workload parked at a deployment generation.
func parkedAtGen(wl *kueue.Workload, generation string) *kueue.Workload {
	wl.Annotations = map[string]string{workerv1.AnnotationParkedGeneration: generation}
	wl.Spec.Active = ptr.To(false)
	return wl
}

// built sets when Kueue built a Workload.
func built(wl *kueue.Workload, at time.Time) *kueue.Workload {
	wl.CreationTimestamp = metav1.NewTime(at)
	return wl
}

// saying gives a Workload's check a message, as an earlier verdict wrote it.
func saying(wl *kueue.Workload, message string) *kueue.Workload {
	wl.Status.AdmissionChecks[0].Message = message
	return wl
}

// lackingQuota is the held message of a set of one role "server" of which lacking groups of total
// have no quota yet.
func lackingQuota(lacking, total int) string {
	return "held until the whole set has reserved quota: " + strconv.Itoa(lacking) + " of " + strconv.Itoa(total) +
		" replica groups still lack quota (server " + strconv.Itoa(lacking) + " of " + strconv.Itoa(total) + ")"
}

// parkedOneOfThree is the parked message of a three-replica set one of whose groups lacks quota.
const parkedOneOfThree = "parked rather than held: 1 of 3 replica groups still lacked quota after 30m0s (server 1 of 3); its groups not admitted are deactivated so their quota goes to others (admitted ones keep serving), and an edit of the ModelDeployment queues them again"

func TestReconcile(t *testing.T) {
	later := t0.Add(DefaultParkAfter)
	cases := []struct {
		rule   string
		objs   []client.Object
		now    time.Time
		checks map[string]string // Workload → check state and message it ends with ("" : no check)
		active map[string]bool
		parked map[string]string // Workload → parked-generation annotation
		// untouched are Workloads the reconcile must not write at all.
		untouched []string
		events    []string
		requeue   time.Duration
	}{
		{rule: "a Workload whose ClusterQueue does not ask for the check is left alone",
			objs:   []client.Object{&kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "team-a"}}},
			checks: map[string]string{"a": ""}},
		{rule: "a Workload that is not a deployment's replica group is Ready at once",
			objs:   []client.Object{queued("a")},
			checks: map[string]string{"a": "Ready: not a ModelDeployment replica group; nothing to hold it for"}},
		{rule: "the groups of a deleted deployment are not admitted: their Pods are going",
			objs:   []client.Object{member(0, "a"), queued("a")},
			checks: map[string]string{"a": ""}},
		{rule: "a deployment of one replica group is Ready at once",
			objs:   []client.Object{deployment(1), member(0, "a"), queued("a")},
			checks: map[string]string{"a": "Ready: the ModelDeployment declares a single replica group; nothing to hold it for"}},
		{rule: "a group without quota holds the whole set, and the set is looked at again when it would be parked",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), held("a", t0), queued("b")}, now: t0.Add(time.Minute),
			checks: map[string]string{
				"a": "Pending: held until the whole set has reserved quota: 1 of 2 replica groups still lack quota (server 1 of 2)",
				"b": "Pending: held until the whole set has reserved quota: 1 of 2 replica groups still lack quota (server 1 of 2)"},
			requeue: DefaultParkAfter - time.Minute},
		{rule: "every group holding quota turns the set Ready together, reported once",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), held("a", t0), held("b", t0)}, now: t0.Add(time.Minute),
			checks: map[string]string{
				"a": "Ready: all 2 replica groups of the deployment hold quota; admitted together",
				"b": "Ready: all 2 replica groups of the deployment hold quota; admitted together"},
			events: []string{"Normal ReplicaSetAdmitted all 2 replica groups of the deployment hold quota; admitted together"}},
		{rule: "an admitted member keeps its Ready check while a replacement in the set waits for quota",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), admitted("a", t0), queued("b")}, now: t0.Add(time.Minute),
			checks: map[string]string{
				"a": "Ready: all 2 replica groups of the deployment hold quota; admitted together",
				"b": "Pending: held until the whole set has reserved quota: 1 of 2 replica groups still lack quota (server 1 of 2)"},
			requeue: DefaultParkAfter},
		{rule: "a waiting member keeps its message while only the counts move",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"), member(2, "c"),
				saying(held("a", t0), lackingQuota(2, 3)), held("b", t0), queued("c")}, now: t0.Add(time.Minute),
			checks:    map[string]string{"a": "Pending: " + lackingQuota(2, 3), "b": "Pending: " + lackingQuota(1, 3), "c": "Pending: " + lackingQuota(1, 3)},
			untouched: []string{"a"}, requeue: DefaultParkAfter - time.Minute},
		{rule: "a waiting member whose wait changed in kind is written",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"), member(2, "c"),
				saying(held("a", t0), "held until the whole set has reserved quota: 1 of 3 replica groups are still assembling their Pods (server 1 of 3)"),
				held("b", t0), queued("c")}, now: t0.Add(time.Minute),
			checks:  map[string]string{"a": "Pending: " + lackingQuota(1, 3)},
			requeue: DefaultParkAfter - time.Minute},
		{rule: "a set that moved within the settle tells no waiting member yet: it may turn Ready at once",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"),
				built(held("a", t0), t0), built(queued("b"), t0.Add(time.Minute-4*time.Second))}, now: t0.Add(time.Minute),
			checks:    map[string]string{"a": "", "b": ""},
			untouched: []string{"a", "b"}, requeue: time.Second},
		{rule: "a set that has stood still for the settle tells every waiting member why",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"),
				built(held("a", t0), t0), built(queued("b"), t0.Add(time.Minute-waitSettle))}, now: t0.Add(time.Minute),
			checks: map[string]string{
				"a": "Pending: held until the whole set has reserved quota: 1 of 3 replica groups are still assembling their Pods (server 1 of 3)",
				"b": "Pending: held until the whole set has reserved quota: 1 of 3 replica groups are still assembling their Pods (server 1 of 3)"}},
		{rule: "a quota reservation within the settle is the set moving",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"),
				built(held("a", t0.Add(time.Minute-3*time.Second)), t0), built(queued("b"), t0)}, now: t0.Add(time.Minute),
			checks:    map[string]string{"a": "", "b": ""},
			untouched: []string{"a", "b"}, requeue: 2 * time.Second},
		{rule: "a set settled and still for the settle is told it lacks quota",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), built(held("a", t0), t0), built(queued("b"), t0.Add(time.Minute-waitSettle))}, now: t0.Add(time.Minute),
			checks:  map[string]string{"a": "Pending: " + lackingQuota(1, 2), "b": "Pending: " + lackingQuota(1, 2)},
			requeue: DefaultParkAfter - time.Minute},
		{rule: "a member waiting for the limit is told while its set still moves; the others are not yet",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"),
				built(queued("a"), t0.Add(time.Minute-waitLimit)), built(queued("b"), t0.Add(time.Minute-time.Second))}, now: t0.Add(time.Minute),
			checks: map[string]string{
				"a": "Pending: held until the whole set has reserved quota: 1 of 3 replica groups are still assembling their Pods (server 1 of 3)",
				"b": ""},
			untouched: []string{"b"}, requeue: 4 * time.Second},
		{rule: "a settled set held past the park time is parked rather than held",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), held("a", t0), queued("b")}, now: later,
			checks: map[string]string{
				"a": "Pending: parked rather than held: 1 of 2 replica groups still lacked quota after 30m0s (server 1 of 2); its groups not admitted are deactivated so their quota goes to others (admitted ones keep serving), and an edit of the ModelDeployment queues them again"},
			active: map[string]bool{"a": false, "b": false},
			parked: map[string]string{"a": "3", "b": "3"},
			events: []string{"Warning ReplicaSetParked parked rather than held: 1 of 2 replica groups still lacked quota after 30m0s (server 1 of 2); its groups not admitted are deactivated so their quota goes to others (admitted ones keep serving), and an edit of the ModelDeployment queues them again"}},
		{rule: "parking spares an admitted member: it stays active and Ready while the groups still waiting are parked",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"), member(2, "c"), admitted("a", t0), held("b", t0), queued("c")}, now: later,
			checks: map[string]string{
				"a": "Ready: all 2 replica groups of the deployment hold quota; admitted together",
				"b": "Pending: " + parkedOneOfThree,
				"c": "Pending: " + parkedOneOfThree},
			active:    map[string]bool{"a": true, "b": false, "c": false},
			parked:    map[string]string{"a": "", "b": "3", "c": "3"},
			untouched: []string{"a"},
			events:    []string{"Warning ReplicaSetParked " + parkedOneOfThree}},
		{rule: "a fresh set with no admitted member is parked whole",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"), member(2, "c"), held("a", t0), held("b", t0), queued("c")}, now: later,
			checks: map[string]string{
				"a": "Pending: " + parkedOneOfThree,
				"b": "Pending: " + parkedOneOfThree,
				"c": "Pending: " + parkedOneOfThree},
			active: map[string]bool{"a": false, "b": false, "c": false},
			parked: map[string]string{"a": "3", "b": "3", "c": "3"},
			events: []string{"Warning ReplicaSetParked " + parkedOneOfThree}},
		{rule: "a parked set stays parked until its deployment is edited",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), parkedAtGen(held("a", t0), "3"), parkedAtGen(queued("b"), "3")}, now: later,
			active: map[string]bool{"a": false, "b": false},
			parked: map[string]string{"a": "3", "b": "3"}},
		{rule: "an edit of the deployment queues its parked set again",
			objs: []client.Object{deployment(2), member(0, "a"), member(1, "b"), parkedAtGen(held("a", t0), "2"), parkedAtGen(queued("b"), "2")}, now: later,
			active: map[string]bool{"a": true, "b": true},
			parked: map[string]string{"a": "", "b": ""}},
		{rule: "a set parked beside an admitted member stays so until its deployment is edited",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"), member(2, "c"), admitted("a", t0), parkedAtGen(held("b", t0), "3"), parkedAtGen(queued("c"), "3")}, now: later,
			active:    map[string]bool{"a": true, "b": false, "c": false},
			parked:    map[string]string{"a": "", "b": "3", "c": "3"},
			untouched: []string{"a", "b", "c"}},
		{rule: "an edit queues again only the members parking deactivated; the admitted one is not written",
			objs: []client.Object{deployment(3), member(0, "a"), member(1, "b"), member(2, "c"), admitted("a", t0), parkedAtGen(held("b", t0), "2"), parkedAtGen(queued("c"), "2")}, now: later,
			active:    map[string]bool{"a": true, "b": true, "c": true},
			parked:    map[string]string{"a": "", "b": "", "c": ""},
			untouched: []string{"a"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(tc.objs...).Build()
			before := map[string]string{}
			for _, name := range tc.untouched {
				before[name] = getWorkload(t, c, name).ResourceVersion
			}
			recorder := events.NewFakeRecorder(10)
			r := &Reconciler{pods: filedPods(t, c), Client: c, Recorder: recorder, Clock: clocktesting.NewFakePassiveClock(tc.now), ParkAfter: DefaultParkAfter}
			res, err := r.Reconcile(context.Background(), judgmentOf(t, c, "a"))
			require.NoError(t, err)
			assert.Equal(t, tc.requeue, res.RequeueAfter)
			for name, want := range tc.checks {
				wl := getWorkload(t, c, name)
				got := ""
				if s := CheckState(wl, CheckName); s != nil && (s.State != kueue.CheckStatePending || s.Message != "") {
					got = string(s.State) + ": " + s.Message
				}
				assert.Equal(t, want, got, "check on %s", name)
			}
			for name, want := range tc.active {
				assert.Equal(t, want, ptr.Deref(getWorkload(t, c, name).Spec.Active, true), "%s active", name)
			}
			for name, want := range tc.parked {
				assert.Equal(t, want, getWorkload(t, c, name).Annotations[workerv1.AnnotationParkedGeneration], "%s parked at", name)
			}
			for name, rv := range before {
				assert.Equal(t, rv, getWorkload(t, c, name).ResourceVersion, "%s written", name)
			}
			assert.Equal(t, tc.events, fakecluster.Events(recorder))
		})
	}
}

// TestEveryMemberEventQueuesItsSet: the events of a set's members all queue the same judgment, so the
// work queue holds a set once however many of its members changed; a Workload no deployment's Pods
// claim is judged alone.
func TestEveryMemberEventQueuesItsSet(t *testing.T) {
	c := fakecluster.Builder(deployment(2), member(0, "a"), member(1, "b"), queued("a"), queued("b"), queued("lone")).Build()
	set := Judgment{Namespace: "team-a", Deployment: "md"}
	assert.Equal(t, set, judgmentOf(t, c, "a"), "a member")
	assert.Equal(t, set, judgmentOf(t, c, "b"), "another member of the same set")
	assert.Equal(t, Judgment{Namespace: "team-a", Workload: "lone"}, judgmentOf(t, c, "lone"), "a Workload without a deployment's Pods")
	assert.Equal(t, []Judgment{set}, judgmentOfDeployment(context.Background(), deployment(2)), "the deployment itself")
}

// TestAWorkloadJudgedAloneBeforeItsPodsWereCachedIsJudgedWithItsSet: a Workload whose event found
// no Pods yet is queued alone; when its Pods are there by the judgment, its set is judged at once
// (a set of one group has no other member whose event would judge it).
func TestAWorkloadJudgedAloneBeforeItsPodsWereCachedIsJudgedWithItsSet(t *testing.T) {
	c := fakecluster.Builder(deployment(1), member(0, "a"), queued("a")).Build()
	r := &Reconciler{pods: filedPods(t, c), Client: c, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(t0), ParkAfter: DefaultParkAfter}
	_, err := r.Reconcile(context.Background(), Judgment{Namespace: "team-a", Workload: "a"})
	require.NoError(t, err)
	assert.Equal(t, "the ModelDeployment declares a single replica group; nothing to hold it for", CheckState(getWorkload(t, c, "a"), CheckName).Message)
}

func TestAnUnchangedVerdictWritesNothing(t *testing.T) {
	c := fakecluster.Builder(deployment(2), member(0, "a"), member(1, "b"), held("a", t0), queued("b")).Build()
	r := &Reconciler{pods: filedPods(t, c), Client: c, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), ParkAfter: DefaultParkAfter}
	req := judgmentOf(t, c, "b")
	_, err := r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	before := getWorkload(t, c, "a")
	r.Clock = clocktesting.NewFakePassiveClock(t0.Add(2 * time.Minute))
	_, err = r.Reconcile(context.Background(), req)
	require.NoError(t, err)
	after := getWorkload(t, c, "a")
	assert.Equal(t, before.ResourceVersion, after.ResourceVersion)
	assert.Equal(t, t0.Unix(), CheckState(after, CheckName).LastTransitionTime.Unix(), "the transition time is kept while the state holds (Pending since t0)")
}

func TestTheCheckStaysActive(t *testing.T) {
	mine := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: string(CheckName), Generation: 1}, Spec: kueue.AdmissionCheckSpec{ControllerName: ControllerName}}
	theirs := mine.DeepCopy()
	theirs.Spec.ControllerName = "example.com/other"
	cases := []struct {
		rule   string
		objs   []client.Object
		status metav1.ConditionStatus
		reason string
	}{
		{"the check naming this controller is Active", []client.Object{mine}, metav1.ConditionTrue, "Active"},
		{"a check naming another controller says how to get it back", []client.Object{theirs}, metav1.ConditionFalse, "ControllerNameMismatch"},
		{"a deleted check is put back", nil, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(tc.objs...).Build()
			_, err := (&CheckReconciler{Client: c}).Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: string(CheckName)}})
			require.NoError(t, err)
			ac := &kueue.AdmissionCheck{}
			require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: string(CheckName)}, ac))
			if tc.reason == "" {
				assert.Equal(t, ControllerName, ac.Spec.ControllerName)
				return
			}
			require.Len(t, ac.Status.Conditions, 1)
			assert.Equal(t, tc.status, ac.Status.Conditions[0].Status)
			assert.Equal(t, tc.reason, ac.Status.Conditions[0].Reason)
		})
	}
}

// judgmentOf is the judgment an event of the Workload name queues, as the controller maps it.
func judgmentOf(t *testing.T, c client.Client, name string) Judgment {
	t.Helper()
	js := (&Reconciler{pods: filedPods(t, c), Client: c}).judgmentOf(context.Background(), &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name}})
	require.Len(t, js, 1)
	return js[0]
}

func getWorkload(t *testing.T, c client.Client, name string) *kueue.Workload {
	t.Helper()
	wl := &kueue.Workload{}
	require.NoError(t, c.Get(context.Background(), types.NamespacedName{Namespace: "team-a", Name: name}, wl))
	return wl
}

// TestASetTurnsReadyWithItsWritesSideBySide: the verdict of a set turning Ready is written to its
// members concurrently, verdictWriters at once, not one round trip after another. Each write waits
// until all of them are in flight (or a shared deadline passes, which one-after-another writes would
// reach), so the test fails if the writes are made in turn.
func TestASetTurnsReadyWithItsWritesSideBySide(t *testing.T) {
	objs := []client.Object{deployment(verdictWriters)}
	for i := range verdictWriters {
		name := "g" + strconv.Itoa(i)
		objs = append(objs, member(int32(i), name), held(name, t0))
	}
	var mu sync.Mutex
	inFlight, most := 0, 0
	all := make(chan struct{})
	deadline := make(chan struct{})
	time.AfterFunc(10*time.Second, func() { close(deadline) })
	c := interceptor.NewClient(fakecluster.Builder(objs...).Build(), interceptor.Funcs{
		SubResourceApply: func(ctx context.Context, c client.Client, sub string, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
			mu.Lock()
			inFlight++
			most = max(most, inFlight)
			if inFlight == verdictWriters {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-deadline:
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			return c.SubResource(sub).Apply(ctx, obj, opts...)
		},
	})
	r := &Reconciler{pods: filedPods(t, c), Client: c, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), ParkAfter: DefaultParkAfter}
	_, err := r.Reconcile(context.Background(), judgmentOf(t, c, "g0"))
	require.NoError(t, err)
	assert.Equal(t, verdictWriters, most, "writes in flight at once")
	for i := range verdictWriters {
		assert.Equal(t, kueue.CheckStateReady, CheckState(getWorkload(t, c, "g"+strconv.Itoa(i)), CheckName).State)
	}
}

// TestALoneWorkloadOfMdplanesPodsWaitsForTheCache: a Workload whose Pods the cache does not show
// yet is judged alone only if its owner Pod, read from the API server, is not mdplane's: a group of
// a deployment's waits, unjudged, rather than being admitted apart from its set.
func TestALoneWorkloadOfMdplanesPodsWaitsForTheCache(t *testing.T) {
	ownedBy := func(pod string) *kueue.Workload {
		wl := queued("lone")
		wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod, UID: types.UID(pod)}}
		return wl
	}
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "batch-0", Namespace: "team-a", Labels: map[string]string{"app": "batch"}}}
	mdplanes := member(0, "lone")
	cases := []struct {
		rule    string
		owner   *corev1.Pod // on the API server, not in the cache
		state   kueue.CheckState
		requeue time.Duration
	}{
		{rule: "a group of mdplane's Pods the cache does not show yet waits, unjudged", owner: mdplanes,
			state: kueue.CheckStatePending, requeue: podsUnseenRetry},
		{rule: "near miss: a group of another controller's Pods is judged alone", owner: foreign, state: kueue.CheckStateReady},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			wl := ownedBy(tc.owner.Name)
			c := fakecluster.Builder(wl).Build()
			server := fakecluster.Builder(wl, tc.owner).Build()
			r := &Reconciler{pods: filedPods(t, c), Client: c, Reader: server, Recorder: events.NewFakeRecorder(10), Clock: clocktesting.NewFakePassiveClock(t0), ParkAfter: DefaultParkAfter}
			res, err := r.Reconcile(context.Background(), Judgment{Namespace: "team-a", Workload: "lone"})
			require.NoError(t, err)
			assert.Equal(t, tc.requeue, res.RequeueAfter)
			assert.Equal(t, tc.state, CheckState(getWorkload(t, c, "lone"), CheckName).State)
		})
	}
}
