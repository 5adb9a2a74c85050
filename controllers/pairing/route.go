package pairing

import (
	"fmt"
	"sort"
	"time"
)

// Member is one engine Pod of a deployment as the routing decision reads it.
type Member struct {
	Name string
	// Half is "prefill" or "decode" for a Pod of the pair, "" for a Pod of any other role.
	Half string
	// Config is the Pod's transfer configuration (TransferConfiguration); "" for a half started
	// without the document, which is a configuration of its own.
	Config string
	// Serving is true for a member the router selects endpoints among (a leader, or a serving rank).
	Serving bool
	Ready   bool
	Leaving bool
	Created time.Time
	// Routed is true when the Pod carries workerv1.LabelTransferRouted.
	Routed bool
}

// Decision is which transfer configuration the router selects, and the Pods whose routed label
// changes: Unroute first, then Route, so the router never selects two configurations at once.
type Decision struct {
	Config  string
	Unroute []string
	Route   []string
	Message string
}

// Decide picks the configuration the router selects: the newest one with a Ready serving prefill and
// a Ready serving decode (newest by its newest standing Pod), else the one routed now, else the
// newest there is. Every Pod of that configuration and every Pod outside the pair is routed; every
// other half is not, leaving ones included; a leaving Pod is never given the label.
func Decide(members []Member) Decision {
	d := choose(tally(members))
	for _, m := range members {
		want := m.Half == "" || m.Config == d.Config
		switch {
		case m.Routed && !want:
			d.Unroute = append(d.Unroute, m.Name)
		case !m.Routed && want && !m.Leaving:
			d.Route = append(d.Route, m.Name)
		}
	}
	sort.Strings(d.Unroute)
	sort.Strings(d.Route)
	return d
}

// configuration is what the decision needs of one transfer configuration's Pods.
type configuration struct {
	name            string
	newest          time.Time
	prefill, decode bool // a Ready serving member of each half stands
	routed          bool
}

// tally is the pair's configurations, newest first (a tie broken by name, so passes decide alike).
func tally(members []Member) []*configuration {
	byName := map[string]*configuration{}
	var out []*configuration
	for _, m := range members {
		if m.Half == "" {
			continue
		}
		c := byName[m.Config]
		if c == nil {
			c = &configuration{name: m.Config}
			byName[m.Config] = c
			out = append(out, c)
		}
		c.routed = c.routed || m.Routed
		if m.Leaving {
			continue
		}
		if m.Created.After(c.newest) {
			c.newest = m.Created
		}
		if m.Serving && m.Ready {
			c.prefill = c.prefill || m.Half == "prefill"
			c.decode = c.decode || m.Half == "decode"
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].newest.Equal(out[j].newest) {
			return out[i].newest.After(out[j].newest)
		}
		return out[i].name < out[j].name
	})
	return out
}

// choose is the configuration to route, with why.
func choose(configs []*configuration) Decision {
	var routed []*configuration
	for _, c := range configs {
		if c.prefill && c.decode {
			return Decision{Config: c.name, Message: fmt.Sprintf("transfer configuration %q has a Ready prefill and a Ready decode", c.name)}
		}
		if c.routed {
			routed = append(routed, c)
		}
	}
	switch {
	case len(configs) == 0:
		return Decision{Message: "no Pod of the pair"}
	case len(routed) == 1:
		return Decision{Config: routed[0].name, Message: fmt.Sprintf("no configuration has a Ready prefill and a Ready decode; %q stays routed", routed[0].name)}
	}
	return Decision{Config: configs[0].name, Message: fmt.Sprintf("no configuration has a Ready prefill and a Ready decode; the newest, %q, is routed", configs[0].name)}
}
