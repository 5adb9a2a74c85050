package rollout

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/pacing"
)

// The rollout sequence simulation drives the pacer's pure pass (decide: Pace, readSlots, the
// vacant slots it fills, the scale-down) and the departures' wait rule through seeded random orders
// of what the cluster does: the members controller creating a replica's gated Pods (and, on a
// lagging cache, re-creating a retired replica's Pod), Kueue building, admitting, ungating and
// evicting groups, the garbage collector and the Workload reaper, Pods terminating, and edits and
// scale changes arriving mid-rollout. After every event it checks the rollout's invariants; after
// the random phase it lets the cluster settle and checks that the role converges. A failure names
// its seed; rerun it alone with -run 'TestRolloutSequence/seed=N$'.

const (
	simSeeds     = 500
	simEvents    = 100  // random events per seed, edits, scales and evictions among them
	simSettle    = 5000 // events allowed to converge once the edits stop
	simEdits     = 3
	simScales    = 2
	simEvictions = 2
	chaosOdds    = 10
)

type simReplica struct {
	name, revision string
	uid            types.UID
	ordinal        int32
	leaving        bool
}

type simPod struct {
	name           string
	owner          types.UID
	revision       string // stamped at creation; a Pod is never updated in place
	ordinal        int32
	gated, leaving bool
}

// simGroup is the Kueue Workload of an ordinal's pod group, built for the Pods of one replica.
type simGroup struct {
	owner    types.UID
	admitted bool
}

type sim struct {
	t           *testing.T
	seed        uint64
	rng         *rand.Rand
	size        int
	replicas    int32
	revision    string
	edits       int
	scales      int
	evicted     int
	replacement v1alpha1.Replacement // the role's replacement, as the deployment's record holds it
	rs          []*simReplica
	pods        []*simPod
	groups      map[int32]*simGroup
	retired     []*simReplica // replicas the pacer retired, whose Pods a lagging cache may have re-created once
	serial      int
	trace       []string
	stats       *simStats
}

// simStats show the simulation reaches what it checks.
type simStats struct {
	settle, departures, midRollout int
}

func newSim(t *testing.T, seed uint64, stats *simStats) *sim {
	rng := rand.New(rand.NewPCG(seed, 0x6d64706c616e65))
	s := &sim{t: t, seed: seed, rng: rng, size: 1 + rng.IntN(2), replicas: 1 + rng.Int32N(4), revision: "rev0",
		groups: map[int32]*simGroup{}, stats: stats}
	s.log("start: %d replicas of %d Pods on %s", s.replicas, s.size, s.revision)
	return s
}

func (s *sim) log(format string, args ...any) {
	s.trace = append(s.trace, fmt.Sprintf(format, args...))
}

func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	tail := s.trace[max(0, len(s.trace)-40):]
	s.t.Fatalf("seed %d: %s\nreproduce: go test ./controllers/rollout -run 'TestRolloutSequence/seed=%d$'\nlast events:\n  %s",
		s.seed, fmt.Sprintf(format, args...), s.seed, strings.Join(tail, "\n  "))
}

func (s *sim) standing(ordinal int32) *simReplica {
	for _, r := range s.rs {
		if r.ordinal == ordinal && !r.leaving {
			return r
		}
	}
	return nil
}

func (s *sim) replicaByUID(uid types.UID) *simReplica {
	for _, r := range s.rs {
		if r.uid == uid {
			return r
		}
	}
	return nil
}

func (s *sim) podsOf(pred func(*simPod) bool) []*simPod {
	var out []*simPod
	for _, p := range s.pods {
		if pred(p) {
			out = append(out, p)
		}
	}
	return out
}

// serving is the ground truth the invariants are stated in: a replica serves when all its members
// stand ungated in a group admitted for them.
func (s *sim) serving(r *simReplica) bool {
	if r == nil || r.leaving {
		return false
	}
	g := s.groups[r.ordinal]
	own := s.podsOf(func(p *simPod) bool { return p.owner == r.uid && !p.leaving && !p.gated })
	return g != nil && g.admitted && g.owner == r.uid && len(own) == s.size
}

// event is one thing the cluster may do now; apply does it. Events are listed in a fixed order (map
// keys sorted), so that a seed replays the same run.
type event struct {
	name  string
	apply func()
}

// events lists what the cluster's controllers may do in the current state.
func (s *sim) events() []event {
	var out []event
	add := func(name string, apply func()) { out = append(out, event{name, apply}) }
	for _, r := range s.rs {
		members := s.podsOf(func(p *simPod) bool { return p.owner == r.uid })
		if !r.leaving && len(members) < s.size {
			add("the members controller creates a gated Pod of "+r.name, func() { s.createPod(r, true) })
		}
		if r.leaving {
			for _, p := range s.podsOf(func(p *simPod) bool { return p.owner == r.uid && !p.leaving }) {
				add("the garbage collector deletes "+p.name+" of departing "+r.name, func() { p.leaving = true })
			}
			if len(members) == 0 { // deleted in the foreground: it goes after its Pods
				add(r.name+" is gone", func() { s.rs = slices.DeleteFunc(s.rs, func(x *simReplica) bool { return x == r }) })
			}
		}
	}
	for _, r := range s.retired {
		if len(s.podsOf(func(p *simPod) bool { return p.owner == r.uid })) == 0 {
			add("the members controller, on a lagging cache, re-creates a Pod of retired "+r.name, func() {
				s.retired = slices.DeleteFunc(s.retired, func(x *simReplica) bool { return x == r })
				g := s.groups[r.ordinal]
				s.createPod(r, g == nil || !g.admitted || g.owner != r.uid)
			})
		}
	}
	out = append(out, s.kueueEvents()...)
	out = append(out, s.cleanupEvents()...)
	add("the pacer reconciles", s.pace)
	return out
}

// kueueEvents build a group's Workload for the Pods of one replica, admit it once they are all
// there, ungate its Pods (the members of the replica it was built for only) and retire a replica
// that lost its members, unless another replacement is in flight.
func (s *sim) kueueEvents() []event {
	var out []event
	for _, p := range s.pods {
		if s.groups[p.ordinal] == nil && !p.leaving {
			out = append(out, event{"Kueue builds the Workload of r" + strconv.Itoa(int(p.ordinal)) + " for " + p.name, func() {
				s.groups[p.ordinal] = &simGroup{owner: p.owner}
			}})
		}
	}
	for _, ordinal := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[ordinal]
		members := s.podsOf(func(p *simPod) bool { return p.owner == g.owner && !p.leaving })
		if !g.admitted && len(members) == s.size {
			out = append(out, event{fmt.Sprintf("Kueue admits r%d", ordinal), func() { g.admitted = true }})
		}
		if g.admitted && slices.ContainsFunc(members, func(p *simPod) bool { return p.gated }) {
			out = append(out, event{fmt.Sprintf("Kueue ungates r%d", ordinal), func() {
				for _, p := range members {
					p.gated = false
				}
			}})
		}
	}
	for _, r := range s.rs {
		lost := slices.ContainsFunc(s.pods, func(p *simPod) bool { return p.owner == r.uid && p.leaving })
		if !r.leaving && lost && !waitsBehind(inFlightOf(s.replacement), r.ordinal) {
			out = append(out, event{"the departures retire " + r.name + ", which lost a member", func() { r.leaving = true }})
		}
	}
	return out
}

// cleanupEvents: the reaper deletes a group whose Pods are all leaving; a group none of whose own
// Pods is left is garbage-collected, or rebuilt by Kueue for the slot's next Pods; a leaving Pod
// goes once no Workload holds it for its replica (gone, built for another replica, or replaced by
// another replica's standing Pods); the garbage collector deletes a Pod whose replica is gone.
func (s *sim) cleanupEvents() []event {
	var out []event
	for _, ordinal := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[ordinal]
		pods := s.podsOf(func(p *simPod) bool { return p.ordinal == ordinal })
		standing := s.podsOf(func(p *simPod) bool { return p.ordinal == ordinal && !p.leaving })
		switch {
		case len(pods) > 0 && len(standing) == 0:
			out = append(out, event{fmt.Sprintf("the reaper deletes the Workload of r%d", ordinal), func() { delete(s.groups, ordinal) }})
		case len(pods) == 0:
			out = append(out, event{fmt.Sprintf("the garbage collector deletes the Workload of r%d", ordinal), func() { delete(s.groups, ordinal) }})
		case !slices.ContainsFunc(pods, func(p *simPod) bool { return p.owner == g.owner }):
			out = append(out, event{fmt.Sprintf("Kueue rebuilds the Workload of r%d for %s", ordinal, standing[0].name), func() {
				s.groups[ordinal] = &simGroup{owner: standing[0].owner}
			}})
		}
	}
	for _, p := range s.pods {
		g := s.groups[p.ordinal]
		replaced := slices.ContainsFunc(s.pods, func(o *simPod) bool { return o.ordinal == p.ordinal && o.owner != p.owner && !o.leaving })
		if p.leaving && (g == nil || g.owner != p.owner || replaced) {
			out = append(out, event{p.name + " is gone", func() { s.pods = slices.DeleteFunc(s.pods, func(x *simPod) bool { return x == p }) }})
		}
		if !p.leaving && s.replicaByUID(p.owner) == nil {
			out = append(out, event{"the garbage collector deletes " + p.name, func() { p.leaving = true }})
		}
	}
	return out
}

func (s *sim) chaosEvents() []event {
	var out []event
	if s.edits < simEdits {
		out = append(out, event{"the deployment is edited", func() {
			if slices.ContainsFunc(s.rs, func(r *simReplica) bool { return r.revision != s.revision }) {
				s.stats.midRollout++
			}
			s.edits++
			s.revision = "rev" + strconv.Itoa(s.edits)
		}})
	}
	if s.scales < simScales {
		n := 1 + s.rng.Int32N(4)
		out = append(out, event{fmt.Sprintf("the role is scaled to %d", n), func() {
			s.scales++
			s.replicas = n
		}})
	}
	for _, ordinal := range slices.Sorted(maps.Keys(s.groups)) {
		g := s.groups[ordinal]
		if g.admitted && s.evicted < simEvictions {
			out = append(out, event{fmt.Sprintf("Kueue evicts r%d", ordinal), func() {
				s.evicted++
				g.admitted = false
				for _, p := range s.podsOf(func(p *simPod) bool { return p.ordinal == ordinal }) {
					p.leaving = true
				}
			}})
		}
	}
	return out
}

func (s *sim) createReplica(ordinal int32) {
	s.serial++
	name := fmt.Sprintf("r%d-%s-%d", ordinal, s.revision, s.serial)
	s.rs = append(s.rs, &simReplica{name: name, revision: s.revision, uid: types.UID(name), ordinal: ordinal})
}

func (s *sim) createPod(r *simReplica, gated bool) {
	s.serial++
	s.pods = append(s.pods, &simPod{name: fmt.Sprintf("%s-m%d", r.name, s.serial), owner: r.uid, revision: r.revision, ordinal: r.ordinal, gated: gated})
}

// pace runs one pacer pass on the objects as the API server has them, checks what it decided, and
// applies it: the retired ModelReplicas are deleted, the vacant slots filled, the role's replacement
// recorded.
func (s *sim) pace() {
	role := &v1alpha1.ModelRole{
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server", Replicas: s.replicas, Size: int32(s.size), Revision: s.revision}}
	replicas := make([]v1alpha1.ModelReplica, 0, len(s.rs))
	admitted := map[int32]bool{}
	for _, r := range s.rs {
		mr := v1alpha1.ModelReplica{ObjectMeta: metav1.ObjectMeta{Name: r.name, UID: r.uid},
			Spec: v1alpha1.ModelReplicaSpec{Ordinal: r.ordinal, Revision: r.revision}}
		if r.leaving {
			mr.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		replicas = append(replicas, mr)
		if g := s.groups[r.ordinal]; g != nil {
			admitted[r.ordinal] = g.admitted
		}
	}
	pods := make([]corev1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{workerv1.LabelPodOrdinal: strconv.Itoa(int(p.ordinal))},
			OwnerReferences: []metav1.OwnerReference{{UID: p.owner, Controller: ptr.To(true)}}}}
		if p.gated {
			pod.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: pacing.AdmissionGate}}
		}
		if p.leaving {
			pod.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}
		pods = append(pods, pod)
	}
	slots, present := pacing.ReadSlots(role, replicas, pods, admitted)
	d := decide(observed{role: role, slots: slots, occupied: present, replacement: s.replacement})
	s.log("the pacer: %s", d.step.Message)
	for _, sl := range d.scaledDown {
		s.retire(sl.Replica, "scale-down")
	}
	for _, ordinal := range d.vacant {
		s.createReplica(ordinal)
		s.log("  creates %s", s.rs[len(s.rs)-1].name)
	}
	s.replacement = d.replacement
	if d.step.Replace != "" {
		s.checkDeparture(d.step.Replace)
		s.stats.departures++
		s.retire(d.step.Replace, "rollout")
	}
}

func (s *sim) retire(name, why string) {
	for _, r := range s.rs {
		if r.name == name && !r.leaving {
			r.leaving = true
			s.retired = append(s.retired, r)
			s.log("  retires %s (%s)", name, why)
		}
	}
}

// checkDeparture holds the pacer to the spec when it takes a replica away for a rollout: only an
// outdated replica leaves, and a serving one only while every other declared replica serves (one
// replica missing at a time; the previous replacement freshly admitted, through its own Pods).
func (s *sim) checkDeparture(name string) {
	s.t.Helper()
	i := slices.IndexFunc(s.rs, func(r *simReplica) bool { return r.name == name })
	if i < 0 {
		s.fail("the pacer retired %s, which does not exist", name)
	}
	r := s.rs[i]
	if r.revision == s.revision {
		s.fail("the pacer retired %s, which is on the current revision %s", name, s.revision)
	}
	if !s.serving(r) {
		return // a replica that serves nothing may be replaced at once
	}
	for ordinal := range s.replicas {
		if ordinal != r.ordinal && !s.serving(s.standing(ordinal)) {
			s.fail("one replica missing at a time: the pacer retired serving %s while r%d does not serve", name, ordinal)
		}
	}
}

// checkState holds after every event: an instance runs one configuration (the members standing
// ungated in a slot are one replica's), no Pod changed configuration in place, and no two
// replicas stand in one slot.
func (s *sim) checkState() {
	s.t.Helper()
	for ordinal := range int32(8) {
		var owners []types.UID
		for _, p := range s.pods {
			if p.ordinal == ordinal && !p.leaving && !p.gated && !slices.Contains(owners, p.owner) {
				owners = append(owners, p.owner)
			}
		}
		if len(owners) > 1 {
			s.fail("one configuration per instance: r%d runs members of %v", ordinal, owners)
		}
		standing := 0
		for _, r := range s.rs {
			if r.ordinal == ordinal && !r.leaving {
				standing++
			}
		}
		if standing > 1 {
			s.fail("two replicas stand in r%d", ordinal)
		}
	}
	for _, p := range s.pods {
		if r := s.replicaByUID(p.owner); r != nil && r.revision != p.revision {
			s.fail("%s was updated in place: it runs %s, its replica %s", p.name, p.revision, r.revision)
		}
	}
}

// converged: every declared replica serves on the current revision, nothing else stands, and no
// replacement is remembered in flight.
func (s *sim) converged() bool {
	for ordinal := range s.replicas {
		r := s.standing(ordinal)
		if !s.serving(r) || r.revision != s.revision {
			return false
		}
	}
	return len(s.rs) == int(s.replicas) && len(s.pods) == int(s.replicas)*s.size && s.replacement.Ordinal == nil
}

// step picks the next event at random; an edit, a scale change or an eviction comes about once in
// chaosOdds events, so that it lands in the middle of a rollout.
func (s *sim) step(chaos bool) {
	var evs []event
	if chaos && s.rng.IntN(chaosOdds) == 0 {
		evs = s.chaosEvents()
	}
	if len(evs) == 0 {
		evs = s.events()
	}
	e := evs[s.rng.IntN(len(evs))]
	s.log("%s", e.name)
	e.apply()
	s.checkState()
}

func TestRolloutSequence(t *testing.T) {
	start := time.Now()
	stats := &simStats{}
	for seed := range uint64(simSeeds) {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			s := newSim(t, seed, stats)
			for range simEvents {
				s.step(true)
			}
			for i := 0; !s.converged(); i++ {
				if i == simSettle {
					s.fail("did not converge in %d events: %d replicas on %s wanted", simSettle, s.replicas, s.revision)
				}
				s.step(false)
				stats.settle++
			}
		})
	}
	t.Logf("%d seeds, %d events (%d to settle) in %s; %d rollout departures checked, %d edits mid-rollout",
		simSeeds, simSeeds*simEvents+stats.settle, stats.settle, time.Since(start).Round(time.Millisecond), stats.departures, stats.midRollout)
	if stats.departures == 0 || stats.midRollout == 0 {
		// A simulation that never retires a replica or never edits mid-rollout checks nothing.
		t.Errorf("the simulation reached %d rollout departures and %d edits mid-rollout; it must reach both", stats.departures, stats.midRollout)
	}
}
