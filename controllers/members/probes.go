package members

import (
	"context"
	"crypto/tls"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/qualification"
)

// probeRetry is how soon a group-forward probe that did not verify is sent again, and probeRecheck
// how often a replica whose probe is in flight looks for its result.
const (
	probeRetry   = 30 * time.Second
	probeRecheck = 2 * time.Second
)

// probes runs the group-forward probes of held multi-member replicas off the reconcile, one at a time
// per replica, and remembers each result for the membership generation it was sent to.
type probes struct {
	mu      sync.Mutex
	client  *http.Client
	results map[types.UID]probeResult
	now     func() time.Time
}

type probeResult struct {
	generation string
	leg        v1alpha1.QualificationLeg
	at         time.Time
	inFlight   bool
}

// newProbes sends probes to each member's address.
func newProbes() *probes {
	// An engine serving TLS has its own, often self-signed, certificate: the probe reads the answer,
	// it does not authenticate the member, whose IP it took from its Pod. No proxy: an environment's
	// HTTP(S)_PROXY must not carry a probe away from the member.
	t := &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // see above
	return &probes{client: &http.Client{Transport: t}, results: map[types.UID]probeResult{}, now: time.Now}
}

// groupForward is the replica's GroupForward leg from its latest probe of this generation, starting
// one when there is none or the last did not verify and is older than probeRetry; recheck is when
// to look again (0: nothing pending).
func (p *probes) groupForward(replica types.UID, e workerv1.Engine, members []*corev1.Pod) (leg v1alpha1.QualificationLeg, recheck time.Duration) {
	generation := qualification.Generation(members)
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.results[replica]
	switch {
	case ok && r.generation == generation && r.inFlight:
		return r.leg, probeRecheck
	case ok && r.generation == generation && (r.leg.State == v1alpha1.LegVerified || p.now().Sub(r.at) < probeRetry):
		if r.leg.State == v1alpha1.LegVerified {
			return r.leg, 0
		}
		return r.leg, probeRetry - p.now().Sub(r.at)
	}
	pending := v1alpha1.QualificationLeg{Type: qualification.LegGroupForward, State: v1alpha1.LegUnknown, Reason: "group-forward probe in flight"}
	if ok && r.generation == generation {
		// A retry reports the last result until its own arrives: a leg flipping to Unknown and
		// back on every retry was two status writes per replica every probeRetry, for as long as
		// the probe fails (measured: most of a 500-replica role's status writes).
		pending = r.leg
	}
	p.results[replica] = probeResult{generation: generation, leg: pending, at: p.now(), inFlight: true}
	sent := make([]*corev1.Pod, len(members))
	for i := range members {
		sent[i] = members[i].DeepCopy()
	}
	go func() {
		leg := qualification.Probe(context.Background(), p.client, e, sent)
		p.mu.Lock()
		defer p.mu.Unlock()
		if cur, ok := p.results[replica]; ok && cur.generation == generation {
			p.results[replica] = probeResult{generation: generation, leg: leg, at: p.now()}
		}
	}()
	return pending, probeRecheck
}

// forget drops what is remembered of a replica.
func (p *probes) forget(replica types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.results, replica)
}
