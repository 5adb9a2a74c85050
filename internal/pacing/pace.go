package pacing

import (
	"fmt"
	"sort"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Slot is one replica of a role as the pacer sees it: the ModelReplica in the ordinal's slot, the
// revision it was stamped from, and its group's admission.
type Slot struct {
	Ordinal  int32
	Replica  string // the ModelReplica's name; empty when the slot is empty
	Revision string
	// Outdated is true when the replica's configuration or render baseline needs replacing.
	Outdated bool
	// Admitted is true while the group's Workload is admitted; EverAdmitted once it has been.
	Admitted     bool
	EverAdmitted bool
	// Broken is true when a member of the replica is being deleted: the departures controller
	// rebuilds the whole instance once no other replacement of its role is in flight.
	Broken bool
	// Ready is true when as many of the replica's own members as its revision gives it stand and are
	// Ready (engine health): the capacity-preserving cadence's gate.
	Ready bool
}

// Step is what the pacer does next for a role.
type Step struct {
	// Replace names the ModelReplica to delete now; empty means wait (or nothing to do).
	Replace string
	Ordinal int32
	// InFlight is the ordinal whose replacement is unresolved after this step, or -1.
	InFlight int32
	// Gate is the gate the next departure waits at (workerv1.ReplacementGateAdmitted or
	// ReplacementGateReady), or empty when the step does not wait on a replacement.
	Gate    string
	Message string
}

// Pace decides a role's next replacement. One replica is missing at a time; the next outdated replica
// leaves only when every declared replica holds an admitted Workload (and, under the
// capacity-preserving cadence, every replica on the current revision is Ready); a replica that was
// never admitted (a queued replacement a newer edit superseded, or a group still waiting for its
// first admission) is replaced without waiting, since it serves nothing; otherwise the highest
// outdated ordinal goes first (under the capacity-preserving cadence, the highest one that is not
// Ready, which serves nothing either, before any Ready one). inFlight is the remembered unresolved
// ordinal, or -1.
func Pace(current string, replicas int32, slots []Slot, inFlight int32, cadence workerv1.RolloutCadence) Step {
	byOrdinal := declared(replicas, slots)
	outdated := outdatedSlots(byOrdinal, cadence)
	gate, reach := workerv1.ReplacementGateAdmitted, "admission"
	if cadence == workerv1.RolloutCadenceCapacity {
		gate, reach = workerv1.ReplacementGateReady, "its members to be Ready (capacity-preserving cadence)"
	}
	// One replica missing at a time: an empty slot is a replacement (or a new ordinal) whose Pods
	// are still going or whose ModelReplica is still being created.
	if ordinal, ok := firstMissing(replicas, byOrdinal, false); ok {
		step := Step{InFlight: inFlight, Message: fmt.Sprintf("replica r%d is being replaced: waiting for its Pods and its group's Workload to go and its replacement to be created", ordinal)}
		if inFlight >= 0 {
			step.Gate = gate // a replacement in flight, not a new role's or a scale-up's slot
		}
		return step
	}
	// A queued replica on an old revision serves nothing: replace it without waiting for admission.
	for _, s := range outdated {
		if !s.EverAdmitted {
			return Step{Replace: s.Replica, Ordinal: s.Ordinal, InFlight: s.Ordinal,
				Message: fmt.Sprintf("replica r%d on revision %s was never admitted; replaced by revision %s at once", s.Ordinal, s.Revision, current)}
		}
	}
	if s, ok := byOrdinal[inFlight]; ok && inFlight >= 0 && !s.Outdated && (!s.Admitted || gate == workerv1.ReplacementGateReady && !s.Ready) {
		return Step{InFlight: inFlight, Gate: gate, Message: fmt.Sprintf("replica r%d's replacement waits for %s before the next replica leaves", inFlight, reach)}
	}
	// A broken replica does not jump the queue, and is not overtaken either: once the replacement in
	// flight is resolved, naming its ordinal lets the departures controller rebuild it, and no
	// healthy replica leaves meanwhile.
	if s, ok := brokenSlot(replicas, byOrdinal); ok {
		return Step{InFlight: s.Ordinal, Message: fmt.Sprintf("replica r%d lost a member; it is rebuilt whole before another replica leaves", s.Ordinal)}
	}
	if len(outdated) == 0 {
		return Step{InFlight: -1, Message: "every replica is on the current revision"}
	}
	if ordinal, ok := firstMissing(replicas, byOrdinal, true); ok {
		return Step{InFlight: -1, Gate: workerv1.ReplacementGateAdmitted, Message: fmt.Sprintf("%d replicas are outdated; the next leaves once every replica is admitted (r%d is not)", len(outdated), ordinal)}
	}
	if ordinal, ok := firstUnready(replicas, byOrdinal); ok && gate == workerv1.ReplacementGateReady {
		return Step{InFlight: -1, Gate: gate, Message: fmt.Sprintf("%d replicas are outdated; the next leaves once every replica on revision %s is Ready (r%d is not; capacity-preserving cadence)", len(outdated), current, ordinal)}
	}
	next := outdated[0]
	return Step{Replace: next.Replica, Ordinal: next.Ordinal, InFlight: next.Ordinal,
		Message: fmt.Sprintf("replacing replica r%d (revision %s) with revision %s; %d outdated", next.Ordinal, next.Revision, current, len(outdated))}
}

// declared is the slots of the declared ordinals, by ordinal.
func declared(replicas int32, slots []Slot) map[int32]Slot {
	byOrdinal := map[int32]Slot{}
	for _, s := range slots {
		if s.Ordinal < replicas {
			byOrdinal[s.Ordinal] = s
		}
	}
	return byOrdinal
}

// outdatedSlots is the occupied outdated slots in the order they are replaced: highest ordinal first,
// and under the capacity-preserving cadence the ones that are not Ready before the Ready ones.
func outdatedSlots(byOrdinal map[int32]Slot, cadence workerv1.RolloutCadence) []Slot {
	var outdated []Slot
	for _, s := range byOrdinal {
		if s.Replica != "" && s.Outdated {
			outdated = append(outdated, s)
		}
	}
	sort.Slice(outdated, func(i, j int) bool {
		if cadence == workerv1.RolloutCadenceCapacity && outdated[i].Ready != outdated[j].Ready {
			return !outdated[i].Ready
		}
		return outdated[i].Ordinal > outdated[j].Ordinal
	})
	return outdated
}

// firstUnready is the lowest declared ordinal whose replica is on the current revision and not Ready.
func firstUnready(replicas int32, byOrdinal map[int32]Slot) (int32, bool) {
	for ordinal := range replicas {
		if s, ok := byOrdinal[ordinal]; ok && s.Replica != "" && !s.Outdated && !s.Ready {
			return ordinal, true
		}
	}
	return 0, false
}

// brokenSlot is the lowest declared ordinal whose replica lost a member.
func brokenSlot(replicas int32, byOrdinal map[int32]Slot) (Slot, bool) {
	for ordinal := range replicas {
		if s, ok := byOrdinal[ordinal]; ok && s.Replica != "" && s.Broken {
			return s, true
		}
	}
	return Slot{}, false
}

// firstMissing is the lowest declared ordinal whose slot is empty (or, when admitted is set, whose
// replica is not admitted either).
func firstMissing(replicas int32, byOrdinal map[int32]Slot, admitted bool) (int32, bool) {
	for ordinal := range replicas {
		if s, ok := byOrdinal[ordinal]; !ok || s.Replica == "" || (admitted && !s.Admitted) {
			return ordinal, true
		}
	}
	return 0, false
}
