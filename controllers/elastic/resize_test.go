package elastic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/elastic"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

// fakeEngine is a master's HTTP server: it records every resize command and answers as told.
type fakeEngine struct {
	mu      sync.Mutex
	calls   []elastic.ScaleCommand
	status  int
	answer  string
	scaling bool
}

func (e *fakeEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch r.URL.Path {
	case "/is_scaling_elastic_ep":
		_, _ = fmt.Fprintf(w, `{"is_scaling_elastic_ep": %t}`, e.scaling)
	case "/scale_elastic_ep":
		var cmd elastic.ScaleCommand
		_ = json.NewDecoder(r.Body).Decode(&cmd)
		e.calls = append(e.calls, cmd)
		w.WriteHeader(e.status)
		_, _ = w.Write([]byte(e.answer))
	default:
		http.NotFound(w, r)
	}
}

func (e *fakeEngine) commands() []elastic.ScaleCommand {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]elastic.ScaleCommand(nil), e.calls...)
}

var t0 = time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)

const mdUID = "md-uid"

func elasticMD(width int32) *workerv1.ModelDeployment {
	return &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "moe", UID: mdUID, Generation: 2},
		Spec: workerv1.ModelDeploymentSpec{Roles: []workerv1.ModelDeploymentRole{{Name: "server",
			ElasticEP: &workerv1.ModelDeploymentRoleElasticEP{Width: width, HeadInstanceType: "cpu"}}}}}
}

// member is the Pod of ordinal n, Ready or not; the master (ordinal 0) booted at boot and serves on
// address (host:port).
func member(n int, ready bool, address string, boot int) *corev1.Pod {
	host, port, _ := net.SplitHostPort(address)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "moe-server-" + strconv.Itoa(n), UID: types.UID("pod-" + strconv.Itoa(n)),
		Labels: map[string]string{workerv1.LabelInstance: "moe", workerv1.LabelComponent: "server", workerv1.LabelPodOrdinal: strconv.Itoa(n)}}}
	if n == 0 {
		p.Annotations = map[string]string{"worker.gpustack.ai/elastic-boot-width": strconv.Itoa(boot), "prometheus.io/port": port}
		p.Status.PodIP = host
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return p
}

func admittedReplica(n int) *v1alpha1.ModelReplica {
	return &v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "moe-server-r" + strconv.Itoa(n), Labels: naming.RoleLabels("moe", "server")},
		Spec: v1alpha1.ModelReplicaSpec{Ordinal: int32(n)}, Status: v1alpha1.ModelReplicaStatus{Admitted: ptr.To(true)}}
}

// stored is an operation record as a previous pass (or a previous controller) left it.
func stored(rec elastic.Operation) *corev1.ConfigMap {
	rec.DeploymentUID, rec.Master = mdUID, elastic.PodRef{Name: "moe-server-0", UID: "pod-0"}
	doc, _ := json.Marshal(rec)
	return elastic.OperationConfigMap(elasticMD(3), string(doc))
}

// cluster is a width-3 deployment whose master booted at 2 and serves at address, with readyMembers
// of its three members Ready and admitted, and extra objects (a stored record).
func cluster(address string, width, boot, readyMembers int, extra ...client.Object) client.Client {
	objs := []client.Object{elasticMD(int32(width))}
	for n := range width {
		objs = append(objs, member(n, n < readyMembers, address, boot), admittedReplica(n))
	}
	return fakecluster.Builder(append(objs, extra...)...).Build()
}

type outcome struct {
	rec       *elastic.Operation
	cond      xpv2.Condition
	obs       elastic.Observation
	requeue   time.Duration
	reconcile error
}

func reconcileAt(t *testing.T, c client.Client, now time.Time) outcome {
	t.Helper()
	r := &elastic.Reconciler{Client: c, Reader: c, Engine: elastic.NewEngine(), Now: func() time.Time { return now }}
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "moe"}})
	out := outcome{requeue: res.RequeueAfter, reconcile: err}
	md := &workerv1.ModelDeployment{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: "moe"}, md))
	out.cond = md.Status.GetCondition(elastic.ConditionResize)
	cm := &corev1.ConfigMap{}
	if c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: elastic.OperationName(mdUID)}, cm) == nil {
		assert.Equal(t, "true", cm.Labels[elastic.LabelOperation])
		assert.Equal(t, types.UID(mdUID), metav1.GetControllerOf(cm).UID)
		out.rec = &elastic.Operation{}
		require.NoError(t, json.Unmarshal([]byte(cm.Data[elastic.OperationKey]), out.rec))
	}
	obs := &corev1.ConfigMap{}
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "team", Name: naming.ElasticObservationName(mdUID)}, obs))
	require.NoError(t, json.Unmarshal([]byte(obs.Data[elastic.ObservationKey]), &out.obs))
	return out
}

// TestResize: the rules of the native resize, each pass against an engine that records what it
// was asked and a fake API server holding the record between passes (and across restarts: every
// pass is a new controller).
func TestResize(t *testing.T) {
	applied := func(e *fakeEngine) {
		e.status, e.answer = http.StatusOK, `{"message": "Scaled to 3 data parallel engines"}`
	}
	refusing := func(e *fakeEngine) {
		e.status, e.answer = http.StatusInternalServerError, `{"message": "engine core busy"}`
	}
	cases := []struct {
		rule   string
		engine func(*fakeEngine)
		// width, boot and ready: the spec's width, the master's boot width, the Ready members.
		width, boot, ready int
		record             *elastic.Operation
		at                 time.Duration
		// calls are the commands the engine received in the pass.
		calls int
		check func(t *testing.T, o outcome)
	}{
		{rule: "a widening is asked once every new member is admitted and Ready, with the target and the drain timeout",
			engine: applied, width: 3, boot: 2, ready: 3, calls: 1, check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateCompleted, o.rec.State)
				assert.Equal(t, elastic.Widths{Old: 2, Target: 3}, o.rec.Width)
				assert.True(t, o.rec.CommandSent)
				assert.Equal(t, "Scaled to 3 data parallel engines", o.rec.Message)
				assert.Len(t, o.rec.Members, 3)
				assert.Equal(t, metav1.ConditionTrue, metav1.ConditionStatus(o.cond.Status))
				assert.Equal(t, elastic.ReasonNoRefusal, string(o.cond.Reason))
				assert.Contains(t, o.cond.Message, elastic.NoRefusalMessage+"; the engine resized from 2 to 3 data-parallel engines: Scaled to 3")
				assert.Equal(t, elastic.StateCompleted, o.obs.State)
				assert.Equal(t, 3, o.obs.StableWidth)
				assert.Empty(t, o.obs.Reason)
			}},
		{rule: "near miss: a widening waits while a new member is not Ready", engine: applied, width: 3, boot: 2, ready: 2, calls: 0,
			check: func(t *testing.T, o outcome) {
				assert.Nil(t, o.rec)
				assert.Contains(t, o.obs.Reason, elastic.HoldMembers+": 2 of 3 members are admitted and Ready")
				assert.Equal(t, 2, o.obs.StableWidth)
				assert.Equal(t, elastic.NoRefusalMessage, o.cond.Message)
			}},
		{rule: "an engine at the wanted width is not asked", engine: applied, width: 3, boot: 3, ready: 3, calls: 0,
			check: func(t *testing.T, o outcome) {
				assert.Nil(t, o.rec)
				assert.Equal(t, 3, o.obs.StableWidth)
				assert.Equal(t, elastic.ReasonNoRefusal, string(o.cond.Reason))
			}},
		{rule: "a completed resize is not asked again", engine: applied, width: 3, boot: 2, ready: 3, calls: 0,
			record: &elastic.Operation{State: elastic.StateCompleted, CommandSent: true, Width: elastic.Widths{Old: 2, Target: 3}, Message: "done"},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateCompleted, o.rec.State)
				assert.Equal(t, 3, o.obs.StableWidth)
			}},
		{rule: "a refusal is recorded with the engine's message and asked again after 15s", engine: refusing, width: 3, boot: 2, ready: 3, calls: 1,
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateRecorded, o.rec.State)
				assert.False(t, o.rec.CommandSent)
				assert.Equal(t, 1, o.rec.Attempts)
				assert.Equal(t, "HTTP 500: engine core busy", o.rec.LastError)
				assert.Equal(t, t0.Add(15*time.Second), o.rec.NextAttemptTime.UTC())
				assert.Equal(t, 15*time.Second, o.requeue)
				assert.Equal(t, elastic.ReasonNoRefusal, string(o.cond.Reason))
				assert.Contains(t, o.cond.Message, "the engine refused attempt 1 of 5: HTTP 500: engine core busy; asking again at 2030-01-01T12:00:15Z")
			}},
		{rule: "near miss: a refused command is not asked again before its backoff has passed", engine: applied, width: 3, boot: 2, ready: 3, calls: 0,
			record: &elastic.Operation{State: elastic.StateRecorded, Width: elastic.Widths{Old: 2, Target: 3}, Attempts: 2, LastError: "HTTP 503: reconfiguring",
				CommandIntent: elastic.ScaleCommand{NewDataParallelSize: 3, DrainTimeout: 120}, NextAttemptTime: &metav1.Time{Time: t0.Add(10 * time.Second)}},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, 2, o.rec.Attempts)
				assert.Equal(t, 10*time.Second, o.requeue)
			}},
		{rule: "a refused command is asked again once its backoff has passed and the engine is not scaling", engine: applied, width: 3, boot: 2, ready: 3, calls: 1,
			record: &elastic.Operation{State: elastic.StateRecorded, Width: elastic.Widths{Old: 2, Target: 3}, Attempts: 2, LastError: "HTTP 503: reconfiguring",
				CommandIntent: elastic.ScaleCommand{NewDataParallelSize: 3, DrainTimeout: 120}, NextAttemptTime: &metav1.Time{Time: t0.Add(-time.Second)}},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateCompleted, o.rec.State)
				assert.Equal(t, 2, o.rec.Attempts)
			}},
		{rule: "near miss: a refused command is not asked again while the engine is scaling", width: 3, boot: 2, ready: 3, calls: 0,
			engine: func(e *fakeEngine) { applied(e); e.scaling = true },
			record: &elastic.Operation{State: elastic.StateRecorded, Width: elastic.Widths{Old: 2, Target: 3}, Attempts: 1, LastError: "HTTP 503: reconfiguring",
				CommandIntent: elastic.ScaleCommand{NewDataParallelSize: 3, DrainTimeout: 120}, NextAttemptTime: &metav1.Time{Time: t0.Add(-time.Second)}},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateRecorded, o.rec.State)
				assert.Contains(t, o.obs.Reason, "the engine is scaling")
			}},
		{rule: "the fifth refusal abandons the resize: ScaleRefused carrying the engine's last refusal", engine: refusing, width: 3, boot: 2, ready: 3, calls: 1,
			record: &elastic.Operation{State: elastic.StateRecorded, Width: elastic.Widths{Old: 2, Target: 3}, Attempts: 4, LastError: "HTTP 503: reconfiguring",
				CommandIntent: elastic.ScaleCommand{NewDataParallelSize: 3, DrainTimeout: 120}, NextAttemptTime: &metav1.Time{Time: t0.Add(-time.Second)}},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateAbandoned, o.rec.State)
				assert.Equal(t, 5, o.rec.Attempts)
				assert.Equal(t, metav1.ConditionFalse, metav1.ConditionStatus(o.cond.Status))
				assert.Equal(t, elastic.ReasonScaleRefused, string(o.cond.Reason))
				assert.Contains(t, o.cond.Message, "refused the resize from 2 to 3 data-parallel engines 5 times; its last refusal: HTTP 500: engine core busy")
				assert.Equal(t, elastic.StateAbandoned, o.obs.State)
				assert.Equal(t, 2, o.obs.StableWidth, "a resize refused for good leaves the engine at its old width")
			}},
		{rule: "an abandoned resize is not asked again at the same width", engine: applied, width: 3, boot: 2, ready: 3, calls: 0,
			record: &elastic.Operation{State: elastic.StateAbandoned, Width: elastic.Widths{Old: 2, Target: 3}, Attempts: 5, LastError: "HTTP 500: engine core busy"},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.ReasonScaleRefused, string(o.cond.Reason))
				assert.Contains(t, o.obs.Reason, "was abandoned")
			}},
		{rule: "a new width after an abandoned resize is a new operation from the engine's width", engine: applied, width: 4, boot: 2, ready: 4, calls: 1,
			record: &elastic.Operation{State: elastic.StateAbandoned, Width: elastic.Widths{Old: 2, Target: 3}, Attempts: 5, LastError: "HTTP 500: engine core busy"},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateCompleted, o.rec.State)
				assert.Equal(t, elastic.Widths{Old: 2, Target: 4}, o.rec.Width)
				assert.Equal(t, 0, o.rec.Attempts)
				assert.Equal(t, elastic.ReasonNoRefusal, string(o.cond.Reason))
			}},
		{rule: "a restart mid-operation never sends the command again: it waits while the engine scales", width: 3, boot: 2, ready: 3, calls: 0,
			engine: func(e *fakeEngine) { applied(e); e.scaling = true },
			record: &elastic.Operation{State: elastic.StateCommandSent, CommandSent: true, Width: elastic.Widths{Old: 2, Target: 3},
				CommandIntent: elastic.ScaleCommand{NewDataParallelSize: 3, DrainTimeout: 120}},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateCommandSent, o.rec.State)
				assert.Contains(t, o.cond.Message, "the command is sent")
				assert.Equal(t, 0, o.obs.StableWidth, "the width is unknown while the command is in flight")
			}},
		{rule: "a restart mid-operation never sends the command again: once the engine stops scaling its width is unprovable", engine: applied, width: 3, boot: 2, ready: 3, calls: 0,
			record: &elastic.Operation{State: elastic.StateCommandSent, CommandSent: true, Width: elastic.Widths{Old: 2, Target: 3},
				CommandIntent: elastic.ScaleCommand{NewDataParallelSize: 3, DrainTimeout: 120}},
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateAbandoned, o.rec.State)
				assert.True(t, o.rec.AnswerLost)
				assert.Equal(t, metav1.ConditionUnknown, metav1.ConditionStatus(o.cond.Status))
				assert.Equal(t, elastic.ReasonWorldUnprovable, string(o.cond.Reason))
				assert.Contains(t, o.cond.Message, "it is not sent again")
			}},
		{rule: "an answer without a message is lost: the command stays sent, never sent again", width: 3, boot: 2, ready: 3, calls: 1,
			engine: func(e *fakeEngine) { e.status, e.answer = http.StatusOK, `{}` },
			check: func(t *testing.T, o outcome) {
				assert.Equal(t, elastic.StateCommandSent, o.rec.State)
				assert.Contains(t, o.rec.LastError, "the answer was lost: HTTP 200 without a string message")
			}},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			e := &fakeEngine{}
			c.engine(e)
			srv := httptest.NewServer(e)
			defer srv.Close()
			var extra []client.Object
			if c.record != nil {
				extra = append(extra, stored(*c.record))
			}
			o := reconcileAt(t, cluster(srv.Listener.Addr().String(), c.width, c.boot, c.ready, extra...), t0.Add(c.at))
			require.NoError(t, o.reconcile)
			calls := e.commands()
			require.Len(t, calls, c.calls)
			for _, cmd := range calls {
				assert.Equal(t, elastic.ScaleCommand{NewDataParallelSize: c.width, DrainTimeout: 120}, cmd)
			}
			c.check(t, o)
		})
	}
}

// TestUnreachableMaster: a master no connection reaches was sent nothing; the command is tried
// again on the backoff curve without counting as a refusal, and goes once the master answers.
func TestUnreachableMaster(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	address := l.Addr().String()
	require.NoError(t, l.Close())
	c := cluster(address, 3, 2, 3)
	o := reconcileAt(t, c, t0)
	require.NoError(t, o.reconcile)
	assert.Equal(t, elastic.StateRecorded, o.rec.State)
	assert.Equal(t, 0, o.rec.Attempts)
	assert.Equal(t, 1, o.rec.Unreachable)
	assert.Contains(t, o.cond.Message, "the engine is unreachable: ")
	assert.Equal(t, 15*time.Second, o.requeue)

	e := &fakeEngine{status: http.StatusOK, answer: `{"message": "Scaled"}`}
	l, err = net.Listen("tcp", address)
	require.NoError(t, err)
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: e}}
	srv.Start()
	defer srv.Close()
	assert.Empty(t, e.commands(), "nothing is sent before the backoff has passed")
	o = reconcileAt(t, c, t0.Add(16*time.Second))
	require.NoError(t, o.reconcile)
	assert.Len(t, e.commands(), 1)
	assert.Equal(t, elastic.StateCompleted, o.rec.State)
}

// TestBackoff: min(15s × 2^(n−1), 4m) after the n-th refusal.
func TestBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 15 * time.Second, 2: 30 * time.Second, 3: time.Minute, 4: 2 * time.Minute, 5: 4 * time.Minute, 9: 4 * time.Minute} {
		assert.Equal(t, want, elastic.Backoff(n), "refusal %d", n)
	}
}

// TestAdmissionIsReadFromTheGroupsWorkload: a replica reports its admission only with a later change
// its role reads; where Kueue has built the group's Workload, the Workload's admission counts.
func TestAdmissionIsReadFromTheGroupsWorkload(t *testing.T) {
	group := func(n int, admitted bool) *kueue.Workload {
		wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: workerv1.GroupName("team", "moe", "server", int32(n))}}
		if admitted {
			wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadAdmitted, Status: metav1.ConditionTrue, Reason: "Admitted"}}
		}
		return wl
	}
	unreported := admittedReplica(2)
	unreported.Status.Admitted = ptr.To(false)
	for _, row := range []struct {
		rule     string
		objs     []client.Object
		admitted int
	}{
		{"an admitted Workload counts before its replica reports it", []client.Object{group(2, true)}, 3},
		{"near miss: a Workload not admitted counts as not admitted, whatever its replica last reported", []client.Object{group(0, false), group(2, true)}, 2},
	} {
		t.Run(row.rule, func(t *testing.T) {
			objs := []client.Object{elasticMD(3)}
			for n := range 3 {
				r := admittedReplica(n)
				if n == 2 {
					r = unreported.DeepCopy()
				}
				objs = append(objs, member(n, true, "", 3), r)
			}
			o := reconcileAt(t, fakecluster.Builder(append(objs, row.objs...)...).Build(), time.Now())
			assert.Equal(t, elastic.Layer{Known: true, Value: row.admitted}, o.obs.Admitted)
		})
	}
}
