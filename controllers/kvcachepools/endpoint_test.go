package kvcachepools

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

const (
	poolName   = "dram"
	mooncake   = "mooncake-dram"
	clientAddr = "mooncake-master.gpustack-system.svc:50051"
	adminAddr  = "mooncake-master.gpustack-system.svc:9003"
)

func pool() *workerv1.KVCachePool {
	return &workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: poolName, Generation: 3}, Spec: workerv1.KVCachePoolSpec{Backends: []string{mooncake}}}
}

func external(endpoints ...workerv1.KVCacheBackendEndpoint) *workerv1.KVCacheBackend {
	if endpoints == nil {
		endpoints = []workerv1.KVCacheBackendEndpoint{{Name: workerv1.KVCacheBackendEndpointNameAdmin, Address: adminAddr},
			{Name: workerv1.KVCacheBackendEndpointNameClient, Address: clientAddr}}
	}
	return &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: mooncake},
		Spec: workerv1.KVCacheBackendSpec{Connection: workerv1.KVCacheBackendConnection{External: &workerv1.KVCacheBackendExternal{Endpoints: endpoints}}}}
}

func managedBackend() *workerv1.KVCacheBackend {
	return &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: mooncake},
		Spec: workerv1.KVCacheBackendSpec{Connection: workerv1.KVCacheBackendConnection{Managed: &workerv1.KVCacheBackendManaged{}}},
		// A managed backend's own status echoes its Service: never copied by mdplane.
		Status: workerv1.KVCacheBackendStatus{Endpoints: []workerv1.KVCacheBackendEndpoint{{Name: workerv1.KVCacheBackendEndpointNameClient, Address: "guessed:1"}}}}
}

func beingDeleted(b *workerv1.KVCacheBackend) *workerv1.KVCacheBackend {
	b.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	b.Finalizers = []string{"example.com/in-use"}
	return b
}

func withEndpoint(p *workerv1.KVCachePool, endpoint string) *workerv1.KVCachePool {
	p.Status.ClientEndpoint = endpoint
	return p
}

func TestPoolStatus(t *testing.T) {
	cases := []struct {
		rule     string
		pool     *workerv1.KVCachePool
		backend  *workerv1.KVCacheBackend
		endpoint string // applied status.clientEndpoint; empty: left out
		phase    string // applied status.phase; empty: left out
		status   metav1.ConditionStatus
		reason   string
		message  string // a part of the condition's message
	}{
		{rule: "an external backend's Client endpoint is published, and the pool is Ready",
			pool: pool(), backend: external(), endpoint: clientAddr, phase: workerv1.KVCachePhaseReady,
			status: metav1.ConditionTrue, reason: workerv1.ReasonExternalBackend, message: "engines connect to " + clientAddr + ", the Client endpoint of external KVCacheBackend \"mooncake-dram\""},
		{rule: "the external backend's spec is authoritative over its status echo",
			pool: pool(), backend: func() *workerv1.KVCacheBackend {
				b := external()
				b.Status.Endpoints = []workerv1.KVCacheBackendEndpoint{{Name: workerv1.KVCacheBackendEndpointNameClient, Address: "stale:1"}}
				return b
			}(), endpoint: clientAddr, phase: workerv1.KVCachePhaseReady, status: metav1.ConditionTrue, reason: workerv1.ReasonExternalBackend},
		{rule: "an external backend without a Client endpoint publishes nothing: the Admin endpoint is never republished",
			pool: pool(), backend: external(workerv1.KVCacheBackendEndpoint{Name: workerv1.KVCacheBackendEndpointNameAdmin, Address: adminAddr}),
			phase: workerv1.KVCachePhaseError, status: metav1.ConditionFalse, reason: workerv1.ReasonNoClientEndpoint, message: "add {name: Client, address: <host:port>}"},
		{rule: "a managed backend's endpoint and phase are its operator's: only the condition says it has not published yet",
			pool: pool(), backend: managedBackend(), status: metav1.ConditionFalse, reason: workerv1.ReasonAwaitingBackendOperator,
			message: "KVCacheBackend \"mooncake-dram\" is managed: its own operator publishes status.clientEndpoint, and has not yet"},
		{rule: "a managed backend's published endpoint is acknowledged, not rewritten",
			pool: withEndpoint(pool(), "master.example:50051"), backend: managedBackend(), status: metav1.ConditionTrue, reason: workerv1.ReasonManagedBackend,
			message: "engines connect to master.example:50051, published by the operator of managed KVCacheBackend \"mooncake-dram\""},
		{rule: "a missing backend is an Error, with no endpoint",
			pool: pool(), phase: workerv1.KVCachePhaseError, status: metav1.ConditionFalse, reason: workerv1.ReasonBackendNotFound,
			message: "spec.backends names KVCacheBackend \"mooncake-dram\", which does not exist"},
		{rule: "an external backend being deleted withdraws its endpoint",
			pool: withEndpoint(pool(), clientAddr), backend: beingDeleted(external()), phase: workerv1.KVCachePhaseError,
			status: metav1.ConditionFalse, reason: workerv1.ReasonBackendDeleting, message: "is being deleted, so its Client endpoint is withdrawn"},
		{rule: "a managed backend being deleted is said in the condition alone",
			pool: withEndpoint(pool(), "master.example:50051"), backend: beingDeleted(managedBackend()),
			status: metav1.ConditionFalse, reason: workerv1.ReasonBackendDeleting, message: "managed KVCacheBackend \"mooncake-dram\" is being deleted"},
		{rule: "a backend with neither connection publishes nothing",
			pool: pool(), backend: &workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: mooncake}},
			phase: workerv1.KVCachePhaseError, status: metav1.ConditionFalse, reason: workerv1.ReasonNoClientEndpoint, message: "sets neither spec.connection.managed nor spec.connection.external"},
	}
	now := metav1.NewTime(time.Unix(100, 0))
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			s := PoolStatus(tc.pool, tc.backend, now)
			assert.Equal(t, tc.endpoint, s.ClientEndpoint, "clientEndpoint")
			assert.Equal(t, tc.phase, s.Phase, "phase")
			c := s.Condition
			assert.Equal(t, workerv1.PoolClientEndpointPublished, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.message)
			assert.Equal(t, int64(3), c.ObservedGeneration, "the pool's generation")
			if tc.phase != "" {
				assert.Equal(t, c.Message, s.PhaseMessage, "the phase says why, as the condition does")
			} else {
				assert.Empty(t, s.PhaseMessage)
			}
			assert.True(t, Changed(tc.pool, s), "a pool without the condition is written")
		})
	}
}

func TestPoolStatusIsWrittenOnlyOnChange(t *testing.T) {
	then, now := metav1.NewTime(time.Unix(1, 0)), metav1.NewTime(time.Unix(100, 0))
	published := func(p *workerv1.KVCachePool, b *workerv1.KVCacheBackend) *workerv1.KVCachePool {
		s := PoolStatus(p, b, then)
		if s.ClientEndpoint != "" {
			p.Status.ClientEndpoint = s.ClientEndpoint
		}
		if s.Phase != "" {
			p.Status.Phase, p.Status.PhaseMessage = s.Phase, s.PhaseMessage
		}
		p.Status.Conditions = []metav1.Condition{s.Condition}
		return p
	}
	cases := []struct {
		rule       string
		pool       *workerv1.KVCachePool
		backend    *workerv1.KVCacheBackend
		changed    bool
		transition metav1.Time
	}{
		{rule: "a pool that already says it is not written", pool: published(pool(), external()), backend: external(), transition: then},
		{rule: "a managed pool that already says it is not written, whoever wrote the phase",
			pool: func() *workerv1.KVCachePool {
				p := published(withEndpoint(pool(), "master.example:50051"), managedBackend())
				p.Status.Phase = workerv1.KVCachePhaseReady
				return p
			}(), backend: managedBackend(), transition: then},
		{rule: "a moved Client endpoint is written, the condition keeping its transition time",
			pool: published(pool(), external()), backend: external(workerv1.KVCacheBackendEndpoint{Name: workerv1.KVCacheBackendEndpointNameClient, Address: "moved:50051"}),
			changed: true, transition: then},
		{rule: "a backend gone is written, the condition's transition stamped now",
			pool: published(pool(), external()), changed: true, transition: now},
		{rule: "a new generation of the pool is written", pool: func() *workerv1.KVCachePool {
			p := published(pool(), external())
			p.Generation++
			return p
		}(), backend: external(), changed: true, transition: then},
		{rule: "a phase another writer changed is taken back for an external backend", pool: func() *workerv1.KVCachePool {
			p := published(pool(), external())
			p.Status.Phase = workerv1.KVCachePhaseError
			return p
		}(), backend: external(), changed: true, transition: then},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			s := PoolStatus(tc.pool, tc.backend, now)
			assert.Equal(t, tc.changed, Changed(tc.pool, s))
			assert.Equal(t, tc.transition, s.Condition.LastTransitionTime)
		})
	}
}
