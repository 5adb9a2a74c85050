package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Report prints the run's table: each milestone of the deployment beside each floor's, and their
// ratios. The client-go floor is plain Pods Kueue never sees; the Kueue floor is the same pod groups
// admitted by Kueue without mdplane's check; the joint floor is those groups held together as a set
// by a check of the harness's own.
func Report(out io.Writer, cfg Config, create *CreateResult, floors ...*FloorResult) {
	show := func(m Milestone) string {
		if m.After < 0 {
			return fmt.Sprintf("not reached (%d/%d)", m.Done, m.Want)
		}
		return fmt.Sprintf("%.1f s", m.After.Seconds())
	}
	fmt.Fprintf(out, "\n%d roles × %d replicas × %d Pods = %d Pods (times from the objects' own timestamps, 1 s resolution; ungated as first seen by a watch)\n\n",
		max(1, cfg.Roles), cfg.Replicas, cfg.Size, cfg.Groups()*cfg.Size)
	header := fmt.Sprintf("  %-30s %-22s", "milestone", "mdplane")
	for _, f := range floors {
		if f != nil {
			header += fmt.Sprintf(" %-22s %-14s", f.Name, "mdplane/floor")
		}
	}
	fmt.Fprintln(out, strings.TrimRight(header, " "))
	for _, m := range create.Milestones {
		line := fmt.Sprintf("  %-30s %-22s", m.Name, show(m))
		for _, floor := range floors {
			if floor == nil {
				continue
			}
			fs, ratio := "-", "-"
			if f, ok := floor.milestone(m.Name); ok {
				fs = show(f)
				switch {
				case m.After < 0 || f.After < 0:
				case f.After < 2*time.Second:
					ratio = "- (< 1 s res.)"
				default:
					ratio = fmt.Sprintf("%.1f×", m.After.Seconds()/f.After.Seconds())
				}
			}
			line += fmt.Sprintf(" %-22s %-14s", fs, ratio)
		}
		fmt.Fprintln(out, strings.TrimRight(line, " "))
	}
	for _, f := range floors {
		if f != nil {
			fmt.Fprintf(out, "  (%s: Pods created when the last of the %d create requests of %d workers returned)\n", f.Name, cfg.Groups()*cfg.Size, floorWorkers)
		}
	}
	if created := create.Milestones[0]; created.After > 0 {
		fmt.Fprintf(out, "  mdplane: %d Pods created in %.1f s: %.1f Pods/s\n", created.Done, created.After.Seconds(), float64(created.Done)/created.After.Seconds())
	} else if create.Elapsed > 0 {
		fmt.Fprintf(out, "  mdplane: %d Pods created in the %s the phase lasted: %.1f Pods/s\n",
			create.Created, create.Elapsed.Round(time.Second), float64(create.Created)/create.Elapsed.Seconds())
	}
}

// milestone is the floor's milestone of a name, if it measured one.
func (f *FloorResult) milestone(name string) (Milestone, bool) {
	for _, m := range f.Milestones {
		if m.Name == name {
			return m, true
		}
	}
	return Milestone{}, false
}

// Target is one of the run's goals: a measured figure beside its bound (a figure of zero was not
// measured).
type Target struct {
	Name         string
	Got, AtMost  float64
	Unit, Figure string
}

// PrintTargets prints each target, its figure and whether the run met it.
func PrintTargets(out io.Writer, targets []Target) {
	fmt.Fprintln(out, "\nTargets:")
	for _, t := range targets {
		verdict := "met"
		switch {
		case t.Got <= 0:
			verdict = "not measured"
		case t.Got > t.AtMost:
			verdict = "MISSED"
		}
		fmt.Fprintf(out, "  %-62s %6.2f%s (≤ %.2f%s) %-12s %s\n", t.Name, t.Got, t.Unit, t.AtMost, t.Unit, verdict, t.Figure)
	}
}

// Ratio is mdplane's milestone over a floor's, 0 where either was not reached.
func Ratio(create *CreateResult, floor *FloorResult, name string) (float64, string) {
	if create == nil || floor == nil {
		return 0, ""
	}
	var m Milestone
	for _, c := range create.Milestones {
		if c.Name == name {
			m = c
		}
	}
	f, ok := floor.milestone(name)
	if !ok || m.After <= 0 || f.After <= 0 {
		return 0, ""
	}
	return m.After.Seconds() / f.After.Seconds(), fmt.Sprintf("%.1f s / %.1f s", m.After.Seconds(), f.After.Seconds())
}

// WritesPerPod is the create phase's writes by Crossplane and mdplane-controllers per Pod created.
func (c *CreateResult) WritesPerPod() float64 {
	if c == nil || c.Created == 0 {
		return 0
	}
	ours, _ := c.Writes.ours()
	return float64(ours) / float64(c.Created)
}
