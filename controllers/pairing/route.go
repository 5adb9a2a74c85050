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
	// Config is the Pod's transfer configuration (workerv1.LabelTransferConfig); "" on a half
	// rendered before the label existed, which is a configuration of its own.
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
// a Ready serving decode (newest by its newest Pod), else the one routed now, else the newest there
// is. Every Pod of that configuration and every Pod outside the pair is routed; every other half is
// not, leaving ones included.
func Decide(members []Member) Decision {
	type config struct {
		newest          time.Time
		prefill, decode bool
		routed          int
	}
	configs := map[string]*config{}
	for _, m := range members {
		if m.Half == "" {
			continue
		}
		c := configs[m.Config]
		if c == nil {
			c = &config{}
			configs[m.Config] = c
		}
		if m.Routed {
			c.routed++
		}
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
	names := make([]string, 0, len(configs))
	for name := range configs {
		names = append(names, name)
	}
	// Newest first; a tie is broken by name, so two passes decide alike.
	sort.Slice(names, func(i, j int) bool {
		a, b := configs[names[i]], configs[names[j]]
		if !a.newest.Equal(b.newest) {
			return a.newest.After(b.newest)
		}
		return names[i] < names[j]
	})
	var routedNow []string
	for _, name := range names {
		if configs[name].routed > 0 {
			routedNow = append(routedNow, name)
		}
	}
	complete := ""
	for _, name := range names {
		if configs[name].prefill && configs[name].decode {
			complete = name
			break
		}
	}
	d := Decision{}
	switch {
	case len(names) == 0:
		d.Message = "no Pod of the pair"
	case complete != "":
		d.Config = complete
		d.Message = fmt.Sprintf("transfer configuration %q has a Ready prefill and a Ready decode", d.Config)
	case len(routedNow) == 1:
		d.Config = routedNow[0]
		d.Message = fmt.Sprintf("no configuration has a Ready prefill and a Ready decode; %q stays routed", d.Config)
	default:
		d.Config = names[0]
		d.Message = fmt.Sprintf("no configuration has a Ready prefill and a Ready decode; the newest, %q, is routed", d.Config)
	}
	for _, m := range members {
		// A leaving Pod keeps the label it has (its configuration's), and is given none.
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
