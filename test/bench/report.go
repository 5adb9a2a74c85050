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
	fmt.Fprintf(out, "\n%d replicas × %d Pods = %d Pods (times from the objects' own timestamps, 1 s resolution; ungated as first seen by a watch)\n\n",
		cfg.Replicas, cfg.Size, cfg.Replicas*cfg.Size)
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
			fmt.Fprintf(out, "  (%s: Pods created when the last of the %d create requests of %d workers returned)\n", f.Name, cfg.Replicas*cfg.Size, floorWorkers)
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
