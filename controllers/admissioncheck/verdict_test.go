package admissioncheck

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

var t0 = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

// pendingWorkload builds a Workload with this check Pending since pendingSince; reservedAt zero means it
// holds no quota.
func pendingWorkload(name string, reservedAt time.Time, pendingSince time.Time) *kueue.Workload {
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}}
	if !reservedAt.IsZero() {
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(reservedAt)}}
	}
	wl.Status.AdmissionChecks = []kueue.AdmissionCheckState{{Name: CheckName, State: kueue.CheckStatePending, LastTransitionTime: metav1.NewTime(pendingSince)}}
	return wl
}

func held(name string, at time.Time) *kueue.Workload { return pendingWorkload(name, at, at) }

func queued(name string) *kueue.Workload { return pendingWorkload(name, time.Time{}, t0) }

// provisioning adds a provisioning check in state to a Workload.
func provisioning(wl *kueue.Workload, state kueue.CheckState, message string) *kueue.Workload {
	wl.Status.AdmissionChecks = append(wl.Status.AdmissionChecks, kueue.AdmissionCheckState{Name: "mdplane-provisioning-x", State: state, Message: message})
	return wl
}

func TestJudge(t *testing.T) {
	pd := map[string]int32{"prefill": 2, "decode": 2}
	cases := []struct {
		rule     string
		set      Set
		now      time.Time
		state    kueue.CheckState
		message  string
		admitted bool
		first    time.Time
		park     bool
		parkIn   time.Duration
	}{
		{
			rule:    "a deployment of one replica group is Ready at once",
			set:     Set{Declared: map[string]int32{"server": 1}, Groups: []Group{{"server", 0, queued("a")}}},
			state:   kueue.CheckStateReady,
			message: "single replica group",
		},
		{
			rule: "every group holding quota turns the set Ready, reporting the first reservation",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"prefill", 1, held("p1", t0.Add(time.Second))},
				{"decode", 0, held("d0", t0.Add(2*time.Second))}, {"decode", 1, held("d1", t0.Add(3*time.Second))},
			}},
			now:      t0.Add(4 * time.Second),
			state:    kueue.CheckStateReady,
			message:  "all 4 replica groups of the deployment hold quota; admitted together",
			admitted: true,
			first:    t0,
		},
		{
			rule: "a whole set some of whose groups wait for their nodes to be provisioned is held, never parked",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"prefill", 1, provisioning(held("p1", t0), kueue.CheckStatePending, "Waiting for capacity")},
				{"decode", 0, provisioning(held("d0", t0), kueue.CheckStateReady, "")}, {"decode", 1, held("d1", t0)},
			}},
			now:   t0.Add(time.Hour),
			state: kueue.CheckStatePending,
			message: "held until every replica group's other admission checks are Ready: 1 of 4 replica groups wait (prefill 1 of 2); " +
				"check mdplane-provisioning-x on p1: Waiting for capacity",
		},
		{
			rule: "near miss: every group's nodes provisioned turns the set Ready",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, provisioning(held("p0", t0), kueue.CheckStateReady, "")}, {"prefill", 1, provisioning(held("p1", t0), kueue.CheckStateReady, "")},
				{"decode", 0, provisioning(held("d0", t0), kueue.CheckStateReady, "")}, {"decode", 1, provisioning(held("d1", t0), kueue.CheckStateReady, "")},
			}},
			now:      t0.Add(time.Hour),
			state:    kueue.CheckStateReady,
			message:  "all 4 replica groups of the deployment hold quota; admitted together",
			admitted: true,
			first:    t0,
		},
		{
			rule: "a group without quota holds the set, named by role",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"prefill", 1, held("p1", t0)}, {"decode", 0, held("d0", t0)}, {"decode", 1, queued("d1")},
			}},
			now:     t0.Add(time.Minute),
			state:   kueue.CheckStatePending,
			message: "held until the whole set has reserved quota: 1 of 4 replica groups still lack quota (decode 1 of 2)",
			parkIn:  29 * time.Minute,
		},
		{
			rule: "a group whose Pods have no Workload yet is assembling",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"prefill", 1, nil}, {"decode", 0, held("d0", t0)}, {"decode", 1, held("d1", t0)},
			}},
			state:   kueue.CheckStatePending,
			message: "1 of 4 replica groups are still assembling their Pods (prefill 1 of 2)",
		},
		{
			rule: "a declared replica with no Pods at all is assembling",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"decode", 0, held("d0", t0)}, {"decode", 1, held("d1", t0)},
			}},
			state:   kueue.CheckStatePending,
			message: "(prefill 1 of 2)",
		},
		{
			rule: "an evicted reservation does not count",
			set: Set{Declared: map[string]int32{"server": 2}, Groups: []Group{
				{"server", 0, held("s0", t0)}, {"server", 1, func() *kueue.Workload {
					wl := held("s1", t0)
					wl.Status.Conditions = append(wl.Status.Conditions, metav1.Condition{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue})
					return wl
				}()},
			}},
			now:     t0,
			state:   kueue.CheckStatePending,
			message: "still lack quota (server 1 of 2)",
			parkIn:  30 * time.Minute,
		},
		{
			rule: "a departing ordinal above replicas is not part of the set",
			set: Set{Declared: map[string]int32{"server": 2}, Groups: []Group{
				{"server", 0, held("s0", t0)}, {"server", 1, held("s1", t0)}, {"server", 2, queued("s2")},
			}},
			state:    kueue.CheckStateReady,
			admitted: true,
		},
		{
			rule: "a settled set held past the park time is parked rather than held",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"prefill", 1, held("p1", t0)}, {"decode", 0, held("d0", t0)}, {"decode", 1, queued("d1")},
			}},
			now:     t0.Add(30 * time.Minute),
			state:   kueue.CheckStatePending,
			message: "parked rather than held: 1 of 4 replica groups still lacked quota after 30m0s (decode 1 of 2)",
			park:    true,
		},
		{
			rule: "a set whose only groups holding quota are admitted is never parked: it holds nothing it is not using",
			set: Set{Declared: map[string]int32{"server": 3}, Groups: []Group{
				{"server", 0, admitted("s0", t0)}, {"server", 1, queued("s1")}, {"server", 2, queued("s2")},
			}},
			now:     t0.Add(time.Hour),
			state:   kueue.CheckStatePending,
			message: "2 of 3 replica groups still lack quota (server 2 of 3)",
			parkIn:  30 * time.Minute,
		},
		{
			rule: "an admitted group beside one waiting past the park time does not keep the set from parking",
			set: Set{Declared: map[string]int32{"server": 3}, Groups: []Group{
				{"server", 0, admitted("s0", t0)}, {"server", 1, held("s1", t0)}, {"server", 2, queued("s2")},
			}},
			now:     t0.Add(30 * time.Minute),
			state:   kueue.CheckStatePending,
			message: "parked rather than held: 1 of 3 replica groups still lacked quota after 30m0s (server 1 of 3)",
			park:    true,
		},
		{
			rule: "a group queued again after parking waits from its new reservation, not from its old Pending check",
			set: Set{Declared: map[string]int32{"server": 3}, Groups: []Group{
				{"server", 0, admitted("s0", t0)}, {"server", 1, pendingWorkload("s1", t0.Add(40*time.Minute), t0)}, {"server", 2, queued("s2")},
			}},
			now:     t0.Add(41 * time.Minute),
			state:   kueue.CheckStatePending,
			message: "held until the whole set has reserved quota: 1 of 3 replica groups still lack quota (server 1 of 3)",
			parkIn:  29 * time.Minute,
		},
		{
			rule: "an assembling set is never parked",
			set: Set{Declared: pd, Groups: []Group{
				{"prefill", 0, held("p0", t0)}, {"prefill", 1, nil}, {"decode", 0, held("d0", t0)}, {"decode", 1, queued("d1")},
			}},
			now:   t0.Add(time.Hour),
			state: kueue.CheckStatePending,
		},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			v := Judge(tc.set, CheckName, tc.now, DefaultParkAfter)
			assert.Equal(t, tc.state, v.State)
			assert.Contains(t, v.Message, tc.message)
			assert.Equal(t, tc.admitted, v.Admitted)
			assert.Equal(t, tc.park, v.Park)
			assert.Equal(t, tc.parkIn, v.ParkIn)
			if !tc.first.IsZero() {
				assert.Equal(t, tc.first, v.FirstReserved)
			}
		})
	}
}
