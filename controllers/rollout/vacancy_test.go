package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestVacanciesSettle(t *testing.T) {
	t0 := time.Unix(1000, 0)
	type pass struct {
		departing, empty, filled []int32
		at                       time.Duration
		fill                     []int32
		wait                     time.Duration
	}
	cases := []struct {
		rule   string
		passes []pass
	}{
		{rule: "a slot never seen departing is filled at once (a new role, a scale-up, after a restart)",
			passes: []pass{{empty: []int32{0, 1}, fill: []int32{0, 1}}}},
		{rule: "a slot whose departed replica just went waits the settle time",
			passes: []pass{{departing: []int32{2}}, {empty: []int32{2}, at: time.Millisecond, wait: VacancySettle}}},
		{rule: "once settled it is filled",
			passes: []pass{{departing: []int32{2}}, {empty: []int32{2}}, {empty: []int32{2}, at: VacancySettle, fill: []int32{2}}}},
		{rule: "a Workload re-created for the departed Pods starts the settle time again",
			passes: []pass{{departing: []int32{2}}, {empty: []int32{2}}, {departing: []int32{2}, at: VacancySettle / 2},
				{empty: []int32{2}, at: VacancySettle, wait: VacancySettle}}},
		{rule: "the wait is the nearest slot's",
			passes: []pass{{departing: []int32{1, 2}}, {empty: []int32{1}}, {empty: []int32{1, 2}, at: VacancySettle / 4, wait: VacancySettle - VacancySettle/4}}},
		{rule: "a filled slot is forgotten",
			passes: []pass{{departing: []int32{2}}, {filled: []int32{2}}, {empty: []int32{2}, fill: []int32{2}}}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			var v vacancies
			var fill []int32
			var wait time.Duration
			for _, p := range tc.passes {
				fill, wait = v.settle("role", p.departing, p.empty, p.filled, t0.Add(p.at))
			}
			last := tc.passes[len(tc.passes)-1]
			assert.Equal(t, last.fill, fill)
			assert.Equal(t, last.wait, wait)
		})
	}
}
