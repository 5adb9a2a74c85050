package plan

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/engine"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/pacing"
)

// Action is what an edit does to a role's replicas.
type Action string

// The actions.
const (
	ActionRolls          Action = "rolls"            // every replica is replaced
	ActionScales         Action = "scales"           // replicas are added or removed; survivors are untouched
	ActionRollsAndScales Action = "rolls and scales" // both
	ActionUnchanged      Action = "unchanged"
)

// Input is what a plan is made from: the stored and the edited deployment rendered down to their
// Pods, and, against a cluster, what the rollout controller would observe.
type Input struct {
	Namespace, Deployment string
	// Refusals are admission's refusals of the edit, one line each; a refused edit rolls nothing.
	Refusals []string
	Stored   Render
	Edited   Render
	// Manufacturers maps an InstanceType name to its accelerator manufacturer (for the vLLM-Ascend
	// shared transfer document).
	Manufacturers map[string]string
	// Live is, by role name, what the cluster holds; nil offline, where every stored replica is
	// taken to run the stored configuration, admitted and Ready.
	Live map[string]LiveRole
	// Free is what the deployment's queue has free now, per resource; nil when unknown (offline).
	Free corev1.ResourceList
	// Borrowing is what the roles' InstanceTypes say while their queues borrow from their cohort,
	// one line per type; nil offline.
	Borrowing []string
}

// LiveRole is a role as the rollout controller observes it on a cluster.
type LiveRole struct {
	// Slots are read with pacing.SlotsOf against the edited render's ModelRole, so Outdated means
	// outdated against the edit.
	Slots []pacing.Slot
	// InFlight is the ordinal the role remembers replacing, or -1.
	InFlight int32
	// Role is the live ModelRole; nil when the role is not rendered yet.
	Role *v1alpha1.ModelRole
	// Held is, by ordinal, the requests of the replica's own Pods on the cluster.
	Held map[int32]corev1.ResourceList
}

// Plan is what applying the edit does. Its JSON form is `mdplane plan -o json`'s, documented in
// docs/rollout.md.
type Plan struct {
	Deployment string   `json:"deployment"`
	Namespace  string   `json:"namespace"`
	Admitted   bool     `json:"admitted"`
	Refusals   []string `json:"refusals"`
	Warnings   []string `json:"warnings"`
	Cadence    string   `json:"cadence"`
	// Offline is true when the plan assumed every stored replica admitted and Ready.
	Offline bool   `json:"offline"`
	Roles   []Role `json:"roles"`
}

// Role is one role's part of the plan.
type Role struct {
	Name   string   `json:"name"`
	Kind   string   `json:"kind"`
	Action Action   `json:"action"`
	Why    []string `json:"why"`
	// Replicas is the role's replica count before and after the edit.
	Replicas FromTo `json:"replicas"`
	// Leaving is the ordinals a scale-down retires, in the order they leave (highest first, before
	// any replacement); Created the ordinals a scale-up creates at once.
	Leaving []int32 `json:"leaving"`
	Created []int32 `json:"created"`
	// Order is the ordinals replaced, in the order the rollout controller takes them.
	Order      []int32    `json:"order"`
	Steps      []Step     `json:"steps"`
	Quota      Quota      `json:"quota"`
	PodChanges PodChanges `json:"podChanges"`
	// Unresolved says where the simulation stopped short of replacing every outdated replica.
	Unresolved string `json:"unresolved,omitempty"`
}

// FromTo is a count before and after the edit.
type FromTo struct {
	From int32 `json:"from"`
	To   int32 `json:"to"`
}

// Step is one replacement of the rollout.
type Step struct {
	Replace int32 `json:"replace"`
	// ServingAtLeast is the fewest of the role's replicas serving while this replica is replaced;
	// ServingOnceReady how many serve once every earlier replacement is Ready.
	ServingAtLeast   int32 `json:"servingAtLeast"`
	ServingOnceReady int32 `json:"servingOnceReady"`
	// Waits is what the step waits for before the replica leaves; empty when it leaves at once.
	Waits string `json:"waits,omitempty"`
	// Note is the rollout controller's own words for the step.
	Note string `json:"note"`
}

// Quota is what one replacement needs from the queue against what it has free.
type Quota struct {
	PerReplacement map[corev1.ResourceName]resource.Quantity `json:"perReplacement"`
	// Departing is what the departing replica held: freed before its replacement is created.
	Departing map[corev1.ResourceName]resource.Quantity `json:"departing"`
	Free      map[corev1.ResourceName]resource.Quantity `json:"free"`
	// WaitsForCapacity is null when the free quota is unknown, or the role does not roll.
	WaitsForCapacity *bool `json:"waitsForCapacity"`
	// ScaleUp is what the added replicas need together, and whether they wait for it.
	ScaleUp      map[corev1.ResourceName]resource.Quantity `json:"scaleUp,omitempty"`
	ScaleUpWaits *bool                                     `json:"scaleUpWaits,omitempty"`
	Short        []string                                  `json:"short,omitempty"`
}

// Make makes the plan of an edit.
func Make(in Input) Plan {
	p := Plan{Deployment: in.Deployment, Namespace: in.Namespace, Refusals: append([]string{}, in.Refusals...),
		Warnings: []string{}, Roles: []Role{}, Admitted: len(in.Refusals) == 0, Offline: in.Live == nil,
		Cadence: string(workerv1.RolloutCadenceAdmission)}
	if !p.Admitted || in.Edited.Deployment == nil || in.Stored.Deployment == nil {
		return p
	}
	edited := in.Edited.Deployment
	cadence := workerv1.CadenceOf(edited.Annotations)
	p.Cadence = string(cadence)
	moved := movedFields(in.Stored.Deployment, edited)
	for index, declared := range edited.Spec.Roles {
		role := planRole(in, moved, index, declared, cadence)
		p.Roles = append(p.Roles, role)
		p.Warnings = append(p.Warnings, roleWarnings(in, role)...)
	}
	if w := ascendWarning(in); w != "" {
		p.Warnings = append(p.Warnings, w)
	}
	for _, b := range in.Borrowing {
		p.Warnings = append(p.Warnings, "borrowed quota: "+b)
	}
	return p
}

func planRole(in Input, moved map[string]string, index int, declared workerv1.ModelDeploymentRole, cadence workerv1.RolloutCadence) Role {
	out := Role{Name: declared.Name, Kind: string(declared.Kind), Why: []string{}, Leaving: []int32{}, Created: []int32{},
		Order: []int32{}, Steps: []Step{}, Action: ActionUnchanged}
	newRole := in.Edited.role(declared.Name)
	oldRole := in.Stored.role(declared.Name)
	if newRole == nil {
		out.Why = append(out.Why, "the edited deployment renders no ModelRole for this role")
		return out
	}
	if out.Kind == "" {
		out.Kind = string(newRole.Spec.Kind)
	}
	out.Replicas = FromTo{To: newRole.Spec.Replicas}
	if oldRole != nil {
		out.Replicas.From = oldRole.Spec.Replicas
	}
	slots, inFlight := observedSlots(in, declared.Name, newRole)
	if live, ok := in.Live[declared.Name]; ok && live.Role != nil {
		out.Replicas.From = live.Role.Spec.Replicas
	}
	sim := simulate(newRole.Spec.Revision, newRole.Spec.Replicas, slots, inFlight, cadence)
	out.Leaving, out.Created, out.Unresolved = append(out.Leaving, sim.leaving...), append(out.Created, sim.created...), sim.unresolved
	for _, s := range sim.steps {
		out.Order = append(out.Order, s.Replace)
	}
	out.Steps = sim.steps
	rolls := len(sim.steps) > 0 || sim.unresolved != ""
	scales := out.Replicas.From != out.Replicas.To
	switch {
	case rolls && scales:
		out.Action = ActionRollsAndScales
	case rolls:
		out.Action = ActionRolls
	case scales:
		out.Action = ActionScales
	}
	out.Why = why(in, moved, index, newRole, oldRole, rolls, scales)
	out.Quota = quota(in, declared.Name, sim, rolls)
	out.PodChanges = podChanges(in.Stored.leader(declared.Name), in.Edited.leader(declared.Name))
	return out
}

// observedSlots is the role's slots: the cluster's, or offline every stored replica on its stored
// revision, admitted and Ready.
func observedSlots(in Input, name string, newRole *v1alpha1.ModelRole) ([]pacing.Slot, int32) {
	if in.Live != nil {
		live := in.Live[name]
		if live.Role == nil && live.Slots == nil {
			return nil, -1
		}
		return live.Slots, live.InFlight
	}
	var slots []pacing.Slot
	for _, r := range in.Stored.replicasOf(name) {
		slots = append(slots, pacing.Slot{Ordinal: r.Spec.Ordinal, Replica: r.Name, Revision: r.Spec.Revision,
			Outdated: newRole.Spec.Elastic == nil && !r.Spec.UpToDate(newRole.Spec), Admitted: true, EverAdmitted: true, Ready: true})
	}
	return slots, -1
}

// why names what moved: the role's own fields, the deployment's, or, when none did though the role
// rolls, the render baseline, a Setting or a referenced object.
func why(in Input, moved map[string]string, index int, newRole, oldRole *v1alpha1.ModelRole, rolls, scales bool) []string {
	var out []string
	fields := rolePaths(moved, index)
	if scales {
		out = append(out, fmt.Sprintf("spec.roles[%d].replicas: %s", index, moved[fmt.Sprintf("spec.roles[%d].replicas", index)]))
	}
	if !rolls {
		if len(fields) > 0 && newRole.Spec.Elastic != nil {
			out = append(out, "an Elastic EP role is outside the rollout: "+strings.Join(fields, ", ")+" reach only members created later")
		}
		return out
	}
	for _, f := range fields {
		out = append(out, f+": "+moved[f])
	}
	for _, f := range deploymentPaths(moved) {
		out = append(out, f+": "+moved[f])
	}
	base := oldRole
	if live, ok := in.Live[newRole.Spec.RoleName]; ok && live.Role != nil {
		base = live.Role
	}
	if base != nil && base.Spec.ConfigDigest != "" && base.Spec.ConfigDigest == newRole.Spec.ConfigDigest && base.Spec.Revision != newRole.Spec.Revision {
		return append(out, fmt.Sprintf("only the render baseline moved (render-version %d → %d, floor %d → %d)",
			base.Spec.RenderVersion, newRole.Spec.RenderVersion, base.Spec.MinRenderVersion, newRole.Spec.MinRenderVersion))
	}
	if len(out) > 0 && (!scales || len(out) > 1) {
		return out
	}
	if others := otherRolePaths(moved, len(in.Edited.Deployment.Spec.Roles), index); len(others) > 0 {
		return append(out, "another role's fields reach this role's Pods (the shared transfer document): "+strings.Join(others, ", "))
	}
	if base != nil && base.Spec.Revision == newRole.Spec.Revision {
		return append(out, "no field moved: a rollout already in progress continues onto revision "+newRole.Spec.Revision)
	}
	return append(out, "no field of the deployment moved: a Setting or a referenced object (InstanceType, KVCachePoolBinding, KVCachePool, ModelArtifact) moved")
}

// simulation is the rollout controller's sequence for one role.
type simulation struct {
	leaving, created []int32
	steps            []Step
	unresolved       string
}

// simulate runs pacing.Pace until nothing is outdated: a replacement is taken as created on the
// new revision and not yet admitted (so the next step shows the gate it waits at); a wait is
// recorded on the next step and taken as resolved (every replica on the new revision admitted and
// Ready, empty slots filled). A wait that resolving does not move ends the simulation.
func simulate(revision string, replicas int32, observed []pacing.Slot, inFlight int32, cadence workerv1.RolloutCadence) simulation {
	var sim simulation
	var slots []pacing.Slot
	present := map[int32]bool{}
	serving := int32(0)
	for _, s := range observed {
		if s.Ordinal >= replicas {
			sim.leaving = append(sim.leaving, s.Ordinal)
			continue
		}
		present[s.Ordinal] = true
		if s.Replica != "" && s.EverAdmitted && s.Ready {
			serving++
		}
		slots = append(slots, s)
	}
	sort.Slice(sim.leaving, func(i, j int) bool { return sim.leaving[i] > sim.leaving[j] })
	if len(observed) > 0 {
		// A slot never occupied is a scale-up (or a new role): it is filled at once.
		for ordinal := range replicas {
			if !present[ordinal] && ordinal >= maxOrdinal(observed)+1 {
				sim.created = append(sim.created, ordinal)
				slots = append(slots, pacing.Slot{Ordinal: ordinal, Replica: fmt.Sprintf("r%d-new", ordinal), Revision: revision})
			}
		}
	}
	capacity := serving + int32(len(sim.created))
	var waits []string
	stuck := false
	k := int32(0) // replacements of serving replicas so far
	for range 4*len(slots) + 8 {
		step := pacing.Pace(revision, replicas, slots, inFlight, cadence)
		inFlight = step.InFlight
		if step.Replace != "" {
			i := indexOf(slots, step.Ordinal)
			st := Step{Replace: step.Ordinal, Note: step.Message, Waits: strings.Join(waits, "; ")}
			if slots[i].EverAdmitted && slots[i].Ready {
				st.ServingOnceReady = capacity - 1
				st.ServingAtLeast = capacity - 1
				if cadence != workerv1.RolloutCadenceCapacity {
					st.ServingAtLeast = max(0, capacity-1-k)
				}
				k++
			} else {
				// The replica serves nothing: replacing it costs no capacity.
				st.ServingOnceReady = capacity
				st.ServingAtLeast = capacity
				if cadence != workerv1.RolloutCadenceCapacity {
					st.ServingAtLeast = max(0, capacity-k)
				}
			}
			sim.steps = append(sim.steps, st)
			slots[i] = pacing.Slot{Ordinal: step.Ordinal, Replica: fmt.Sprintf("r%d-new", step.Ordinal), Revision: revision}
			waits, stuck = nil, false
			continue
		}
		if !pending(replicas, slots) {
			return sim
		}
		if stuck {
			sim.unresolved = step.Message
			return sim
		}
		waits = append(waits, step.Message)
		slots = resolve(revision, replicas, slots)
		stuck = true
	}
	sim.unresolved = "the simulation did not converge"
	return sim
}

func maxOrdinal(slots []pacing.Slot) int32 {
	highest := int32(-1)
	for _, s := range slots {
		highest = max(highest, s.Ordinal)
	}
	return highest
}

func indexOf(slots []pacing.Slot, ordinal int32) int {
	for i, s := range slots {
		if s.Ordinal == ordinal && s.Replica != "" {
			return i
		}
	}
	return -1
}

// pending reports a declared slot outdated, empty, broken or not yet admitted and Ready.
func pending(replicas int32, slots []pacing.Slot) bool {
	filled := map[int32]bool{}
	for _, s := range slots {
		if s.Ordinal < replicas && s.Replica != "" {
			filled[s.Ordinal] = true
			if s.Outdated || s.Broken || !s.Admitted {
				return true
			}
		}
	}
	return int32(len(filled)) < replicas
}

// resolve takes every wait as resolved: empty slots filled on the new revision, and every replica
// on it (or once admitted on an older one) admitted and Ready, nothing broken.
func resolve(revision string, replicas int32, slots []pacing.Slot) []pacing.Slot {
	filled := map[int32]bool{}
	for i := range slots {
		s := &slots[i]
		if s.Replica == "" {
			*s = pacing.Slot{Ordinal: s.Ordinal, Replica: fmt.Sprintf("r%d-new", s.Ordinal), Revision: revision}
		}
		filled[s.Ordinal] = true
		if !s.Outdated || s.EverAdmitted {
			s.Admitted, s.EverAdmitted, s.Ready = true, true, true
		}
		s.Broken = false
	}
	for ordinal := range replicas {
		if !filled[ordinal] {
			slots = append(slots, pacing.Slot{Ordinal: ordinal, Replica: fmt.Sprintf("r%d-new", ordinal), Revision: revision,
				Admitted: true, EverAdmitted: true, Ready: true})
		}
	}
	return slots
}

// quota is what one replacement (and a scale-up) needs against what the queue has free. A
// replacement's admission is fresh, but its predecessor's reservation is freed before it is created,
// so it waits on capacity only when it needs more than free plus what the departing replica held.
func quota(in Input, name string, sim simulation, rolls bool) Quota {
	q := Quota{PerReplacement: requests(in.Edited.podsOf(name, 0)), Departing: requests(in.Stored.podsOf(name, 0))}
	// What each step's departing replica frees: offline, a stored replica's requests; on a cluster,
	// its own admitted Pods' (a queued replica holds nothing).
	departing := func(ordinal int32) corev1.ResourceList { return q.Departing }
	if live, ok := in.Live[name]; ok {
		departing = func(ordinal int32) corev1.ResourceList { return live.Held[ordinal] }
		q.Departing = corev1.ResourceList{}
		if len(sim.steps) > 0 && live.Held[sim.steps[0].Replace] != nil {
			q.Departing = live.Held[sim.steps[0].Replace]
		}
	}
	if len(sim.created) > 0 {
		q.ScaleUp = corev1.ResourceList{}
		for range sim.created {
			add(q.ScaleUp, q.PerReplacement)
		}
	}
	if in.Free == nil {
		return q
	}
	q.Free = in.Free
	if rolls {
		short := map[string][]string{} // the shortfall → the replacements it holds back
		for _, step := range sim.steps {
			held := departing(step.Replace)
			for res, need := range q.PerReplacement {
				free, covered := in.Free[res]
				if !covered {
					continue // a resource the queue does not cover is not counted
				}
				free = free.DeepCopy()
				free.Add(held[res])
				if need.Cmp(free) > 0 {
					key := fmt.Sprintf("%s: needs %s, %s free with the departing replica's", res, need.String(), free.String())
					short[key] = append(short[key], fmt.Sprintf("r%d", step.Replace))
				}
			}
		}
		waits := len(short) > 0
		q.WaitsForCapacity = &waits
		for shortfall, replicas := range short {
			q.Short = append(q.Short, shortfall+" ("+strings.Join(replicas, ", ")+")")
		}
	}
	if len(sim.created) > 0 {
		waits := false
		for res, need := range q.ScaleUp {
			if free, covered := in.Free[res]; covered && need.Cmp(free) > 0 {
				waits = true
				q.Short = append(q.Short, fmt.Sprintf("%s: the scale-up needs %s, %s free", res, need.String(), free.String()))
			}
		}
		q.ScaleUpWaits = &waits
	}
	sort.Strings(q.Short)
	return q
}

// roleWarnings are the spec's warnings that apply to a role's part of the plan.
func roleWarnings(in Input, r Role) []string {
	var out []string
	rolls := r.Action == ActionRolls || r.Action == ActionRollsAndScales
	if rolls && r.Replicas.To == 1 {
		out = append(out, fmt.Sprintf("role %s has one replica: serving stops until the replacement is ready", r.Name))
	}
	if rolls && r.Replicas.To > 1 && in.Edited.Deployment != nil && workerv1.CadenceOf(in.Edited.Deployment.Annotations) != workerv1.RolloutCadenceCapacity {
		out = append(out, fmt.Sprintf("role %s: under the admission cadence the next replica may leave before the previous replacement is Ready; the capacity-preserving cadence (%s: %s) keeps at least %d serving",
			r.Name, workerv1.AnnotationRolloutCadence, workerv1.RolloutCadenceCapacity, r.Replicas.To-1))
	}
	departs := len(r.Order) + len(r.Leaving)
	if departs > 0 && in.Edited.Deployment != nil && in.Edited.Deployment.Spec.KVCache != nil {
		out = append(out, fmt.Sprintf("role %s: each of the %d departing replicas costs its siblings the cache blocks it held (leased for the %s kv_lease_duration window, then lost)",
			r.Name, departs, pacing.LeaseWindow))
	}
	if w := r.Quota.WaitsForCapacity; w != nil && *w {
		out = append(out, fmt.Sprintf("role %s: the rollout will wait for capacity (%s)", r.Name, strings.Join(r.Quota.Short, "; ")))
	} else if w := r.Quota.ScaleUpWaits; w != nil && *w {
		out = append(out, fmt.Sprintf("role %s: the scale-up will wait for capacity (%s)", r.Name, strings.Join(r.Quota.Short, "; ")))
	}
	if r.Unresolved != "" {
		out = append(out, fmt.Sprintf("role %s: the plan cannot see past: %s", r.Name, r.Unresolved))
	}
	return append(out, liveWarnings(r.Name, in.Live[r.Name].Role)...)
}

// liveWarnings are what a role's live status says keeps its replicas waiting: a preemption, a
// backoff after PodsReady timeouts, a node that stopped reporting.
func liveWarnings(name string, live *v1alpha1.ModelRole) []string {
	if live == nil {
		return nil
	}
	var out []string
	if live.Status.PreemptedBy != "" {
		out = append(out, fmt.Sprintf("role %s: preempted, waiting for quota: %s", name, live.Status.PreemptedBy))
	}
	for _, slot := range slices.Sorted(maps.Keys(live.Status.ReadyTimeouts)) {
		t := live.Status.ReadyTimeouts[slot]
		out = append(out, fmt.Sprintf("role %s: %s waits until %s after %d eviction(s) in a row at Kueue's waitForPodsReady timeout",
			name, slot, t.Until.UTC().Format(time.RFC3339), t.Count))
	}
	if live.Status.LostNode != "" {
		out = append(out, fmt.Sprintf("role %s: a replica waits on a node that stopped reporting: %s", name, live.Status.LostNode))
	}
	if live.Status.Provisioning != "" {
		out = append(out, fmt.Sprintf("role %s: a replica waits for its nodes: %s", name, live.Status.Provisioning))
	}
	return out
}

// ascendWarning is the spec's warning for the vLLM-Ascend shared transfer document: a degree edit
// renders into the document both halves of the prefill/decode pair carry, so it rolls the pair.
func ascendWarning(in Input) string {
	was, is := in.Stored.Deployment, in.Edited.Deployment
	if !engine.RendersAscendLeg(is.Spec.Engine.Name, is.Spec.Router, is.Spec.Roles, in.Manufacturers) {
		return ""
	}
	if reflect.DeepEqual(engine.PairDegreesOf(was.Spec.Engine.Name, was.Spec.Roles), engine.PairDegreesOf(is.Spec.Engine.Name, is.Spec.Roles)) {
		return ""
	}
	return "the vLLM-Ascend shared transfer document changes: both halves of the prefill/decode pair roll; the router keeps selecting the old document's Pods until the new one has a Ready prefill and a Ready decode, then only the new one's (docs/rollout.md, coherent pairs)"
}
