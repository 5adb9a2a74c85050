package pairing

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

var t0 = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// leader is a Ready serving Pod of a half on a configuration, created at minute.
func leader(name, half, config string, minute int, routed bool) Member {
	return Member{Name: name, Half: half, Config: config, Serving: true, Ready: true, Created: t0.Add(time.Duration(minute) * time.Minute), Routed: routed}
}

func TestDecide(t *testing.T) {
	starting := func(m Member) Member { m.Ready = false; return m }
	leaving := func(m Member) Member { m.Leaving = true; return m }
	worker := func(m Member) Member { m.Serving = false; return m }
	cases := []struct {
		rule           string
		members        []Member
		config         string
		unroute, route []string
	}{
		{"a new deployment's one configuration is routed as it comes up",
			[]Member{starting(leader("p0", "prefill", "a", 0, false)), starting(leader("d0", "decode", "a", 0, false))},
			"a", nil, []string{"d0", "p0"}},
		{"a Pod outside the pair is always routed",
			[]Member{leader("e0", "", "", 0, false), leader("p0", "prefill", "a", 0, true), leader("d0", "decode", "a", 0, true)},
			"a", nil, []string{"e0"}},
		{"a new prefill alone does not move the routing: its decode is not Ready",
			[]Member{leader("p0", "prefill", "a", 0, true), leader("d0", "decode", "a", 0, true), leader("p1", "prefill", "b", 5, false), starting(leader("d1", "decode", "b", 5, false))},
			"a", nil, nil},
		{"the new configuration is routed once it has a Ready prefill and a Ready decode, the old one taken out",
			[]Member{leader("p0", "prefill", "a", 0, true), leader("d0", "decode", "a", 0, true), leader("p1", "prefill", "b", 5, false), leader("d1", "decode", "b", 6, false)},
			"b", []string{"d0", "p0"}, []string{"d1", "p1"}},
		{"a worker of the routed configuration is routed too: endpoints decide by their own terms",
			[]Member{leader("p1", "prefill", "b", 5, true), leader("d1", "decode", "b", 6, true), worker(leader("d1-m1", "decode", "b", 6, false))},
			"b", nil, []string{"d1-m1"}},
		{"the routed configuration stays while no configuration has both halves Ready",
			[]Member{starting(leader("p0", "prefill", "a", 0, true)), leader("d0", "decode", "a", 0, true), leader("p1", "prefill", "b", 5, false)},
			"a", nil, nil},
		{"a leaving Pod of another configuration is taken out, and a leaving one is never routed",
			[]Member{leaving(leader("p0", "prefill", "a", 0, true)), leader("p1", "prefill", "b", 5, true), leader("d1", "decode", "b", 5, true), leaving(leader("d2", "decode", "b", 1, false))},
			"b", []string{"p0"}, nil},
		{"Pods rendered before the label are a configuration of their own",
			[]Member{leader("p0", "prefill", "", 0, false), leader("d0", "decode", "", 0, false)},
			"", nil, []string{"d0", "p0"}},
		{"two configurations routed at once (an interrupted switch) settle on the newest complete one",
			[]Member{leader("p0", "prefill", "a", 0, true), leader("d0", "decode", "a", 0, true), leader("p1", "prefill", "b", 5, true), leader("d1", "decode", "b", 5, false)},
			"b", []string{"d0", "p0"}, []string{"d1"}},
		{"an edit reverted: the newest Pods decide, whatever the configuration's name",
			[]Member{leader("p0", "prefill", "a", 0, false), leader("d0", "decode", "b", 3, true), leader("p1", "prefill", "b", 3, true), leader("d2", "decode", "a", 9, false)},
			"a", []string{"d0", "p1"}, []string{"d2", "p0"}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			d := Decide(tc.members)
			assert.Equal(t, tc.config, d.Config, d.Message)
			assert.Equal(t, tc.unroute, d.Unroute, "unrouted")
			assert.Equal(t, tc.route, d.Route, "routed")
			assert.NotEmpty(t, d.Message)
		})
	}
}
