package admissioncheck

import (
	"cmp"
	"fmt"
	"sort"
	"strings"
	"time"

	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/internal/workload"
)

// ParkedMarker is in the message of every check of a parked set; runbooks and tests search for it.
const ParkedMarker = "parked rather than held"

// Group is one replica group of a deployment as observed: the role and ordinal its Pods carry, and
// the Workload Kueue built for it (nil while its Pods are still assembling).
type Group struct {
	Role     string
	Ordinal  int32
	Workload *kueue.Workload
}

// Set is what the check judges: the replica count each role declares and the groups observed.
type Set struct {
	// Declared maps each role to its replicas.
	Declared map[string]int32
	Groups   []Group
}

// Verdict is the check state every Workload of a set gets.
type Verdict struct {
	State   kueue.CheckState
	Message string
	// Admitted is true when the set turns Ready; FirstReserved is then the earliest reservation.
	Admitted      bool
	FirstReserved time.Time
	// Park is true when the set has waited past the park time: its Workloads not admitted are
	// deactivated, its admitted ones keep serving.
	Park bool
	// ParkIn is how long until the set would be parked, when it is waiting and settled.
	ParkIn time.Duration
}

// reserved reports whether a Workload holds a quota reservation that is not being given up.
func reserved(wl *kueue.Workload) bool {
	return workload.HoldsQuota(wl)
}

// CheckState returns the state of the named check on a Workload, or nil.
func CheckState(wl *kueue.Workload, check kueue.AdmissionCheckReference) *kueue.AdmissionCheckState {
	for i := range wl.Status.AdmissionChecks {
		if wl.Status.AdmissionChecks[i].Name == check {
			return &wl.Status.AdmissionChecks[i]
		}
	}
	return nil
}

// roleCounts renders "decode 1 of 2, prefill 2 of 2" in role order.
func roleCounts(short, declared map[string]int32) string {
	roles := make([]string, 0, len(short))
	for r := range short {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	parts := make([]string, 0, len(roles))
	for _, r := range roles {
		parts = append(parts, fmt.Sprintf("%s %d of %d", r, short[r], declared[r]))
	}
	return strings.Join(parts, ", ")
}

// Judge decides the check of a whole set at now: Ready when every declared group holds a quota
// reservation and every other admission check on them is Ready (an autoscaled pool has provisioned
// their nodes), else Pending with what is missing; a settled set (every group has its Workload) one of
// whose groups has held quota with the check Pending for parkAfter is parked. The check is never
// Retry or Rejected: Retry would evict the reservations the set is assembling, Rejected would end
// the deployment.
func Judge(set Set, check kueue.AdmissionCheckReference, now time.Time, parkAfter time.Duration) Verdict {
	var total int32
	for _, n := range set.Declared {
		total += n
	}
	if total < 2 {
		return Verdict{State: kueue.CheckStateReady, Message: "the ModelDeployment declares a single replica group; nothing to hold it for"}
	}
	t := count(set, check)
	switch {
	case t.nAssembling == 0 && t.nLacking == 0 && t.nWaiting == 0:
		return Verdict{State: kueue.CheckStateReady, Admitted: true, FirstReserved: t.first,
			Message: fmt.Sprintf("all %d replica groups of the deployment hold quota; admitted together", total)}
	case t.nAssembling > 0:
		return Verdict{State: kueue.CheckStatePending, Message: fmt.Sprintf(
			"held until the whole set has reserved quota: %d of %d replica groups are still assembling their Pods (%s)",
			t.nAssembling, total, roleCounts(t.assembling, set.Declared))}
	case t.nLacking == 0:
		// Every group holds quota and some wait for another check (nodes being provisioned): the
		// set is whole, so nothing is parked; it is admitted once every group may start.
		return Verdict{State: kueue.CheckStatePending, Message: fmt.Sprintf(
			"held until every replica group's other admission checks are Ready: %d of %d replica groups wait (%s); %s",
			t.nWaiting, total, roleCounts(t.waiting, set.Declared), t.firstWait)}
	}
	return lacking(t, total, set.Declared, now, parkAfter)
}

// tally is a set's declared groups counted: those still assembling (no Workload), those lacking
// quota, those holding quota while another admission check on them is not Ready yet, the earliest
// reservation and the earliest time a group has held quota with the check Pending.
type tally struct {
	assembling, lacking, waiting    map[string]int32
	nAssembling, nLacking, nWaiting int32
	first, pendingSince             time.Time
	// firstWait is what the first group waiting for another check is told by it.
	firstWait string
}

// latest is each declared (role, ordinal)'s Workload: of several groups in one slot, the one with a
// Workload, and of those the one holding quota. A departing ordinal (at or above replicas) is not
// part of the set.
func latest(set Set) map[string]map[int32]*kueue.Workload {
	seen := map[string]map[int32]*kueue.Workload{}
	for _, g := range set.Groups {
		if g.Ordinal >= set.Declared[g.Role] {
			continue
		}
		if seen[g.Role] == nil {
			seen[g.Role] = map[int32]*kueue.Workload{}
		}
		if prev, ok := seen[g.Role][g.Ordinal]; !ok || (prev == nil && g.Workload != nil) || (!reserved(prev) && reserved(g.Workload)) {
			seen[g.Role][g.Ordinal] = g.Workload
		}
	}
	return seen
}

// count tallies every declared group of a set.
func count(set Set, check kueue.AdmissionCheckReference) tally {
	seen := latest(set)
	t := tally{assembling: map[string]int32{}, lacking: map[string]int32{}, waiting: map[string]int32{}}
	for role, replicas := range set.Declared {
		for ordinal := range replicas {
			t.add(role, seen[role][ordinal], check)
		}
	}
	return t
}

// add counts one declared group by its Workload.
func (t *tally) add(role string, wl *kueue.Workload, check kueue.AdmissionCheckReference) {
	switch {
	case wl == nil:
		t.assembling[role]++
		t.nAssembling++
	case !reserved(wl):
		t.lacking[role]++
		t.nLacking++
	default:
		reservedAt, _ := workload.QuotaReservedSince(wl)
		t.first = earliest(t.first, reservedAt)
		// A group waits from the later of its reservation and its check going Pending: a group queued
		// again after parking keeps the Pending check it was parked with, and has held nothing since.
		if s := CheckState(wl, check); s != nil && s.State == kueue.CheckStatePending {
			t.pendingSince = earliest(t.pendingSince, latestOf(reservedAt, s.LastTransitionTime.Time))
		}
		if other := otherCheckWaiting(wl, check); other != nil {
			t.waiting[role]++
			t.nWaiting++
			if t.firstWait == "" {
				t.firstWait = fmt.Sprintf("check %s on %s: %s", other.Name, wl.Name, cmp.Or(other.Message, string(other.State)))
			}
		}
	}
}

// otherCheckWaiting is the first admission check on a Workload, other than check, that is not
// Ready: Kueue admits a group only when all of them are.
func otherCheckWaiting(wl *kueue.Workload, check kueue.AdmissionCheckReference) *kueue.AdmissionCheckState {
	for i := range wl.Status.AdmissionChecks {
		if s := &wl.Status.AdmissionChecks[i]; s.Name != check && s.State != kueue.CheckStateReady {
			return s
		}
	}
	return nil
}

// earliest is the earlier of a (zero: unset) and b.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

// latestOf is the later of a and b.
func latestOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// lacking is the verdict of a settled set some of whose groups lack quota: Pending, parked once a
// group has held quota with the check Pending for parkAfter, else with the time left until then.
func lacking(t tally, total int32, declared map[string]int32, now time.Time, parkAfter time.Duration) Verdict {
	v := Verdict{State: kueue.CheckStatePending, Message: fmt.Sprintf(
		"held until the whole set has reserved quota: %d of %d replica groups still lack quota (%s)",
		t.nLacking, total, roleCounts(t.lacking, declared))}
	if t.pendingSince.IsZero() {
		v.ParkIn = parkAfter
		return v
	}
	if waited := now.Sub(t.pendingSince); waited >= parkAfter {
		v.Park = true
		v.Message = fmt.Sprintf("%s: %d of %d replica groups still lacked quota after %s (%s); its groups not admitted are deactivated so their quota goes to others (admitted ones keep serving), and an edit of the ModelDeployment queues them again",
			ParkedMarker, t.nLacking, total, parkAfter, roleCounts(t.lacking, declared))
	} else {
		v.ParkIn = parkAfter - waited
	}
	return v
}
