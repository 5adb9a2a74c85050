package bench

import (
	"fmt"
	"io"
	"time"
)

// Report prints the run's table: each milestone of the deployment beside the floor's, and their ratio.
func Report(out io.Writer, cfg Config, create *CreateResult, floor *FloorResult) {
	show := func(m Milestone) string {
		if m.After < 0 {
			return fmt.Sprintf("not reached (%d/%d)", m.Done, m.Want)
		}
		return fmt.Sprintf("%.1f s", m.After.Seconds())
	}
	floorOf := map[string]Milestone{}
	if floor != nil {
		for _, m := range floor.Milestones {
			floorOf[m.Name] = m
		}
	}
	fmt.Fprintf(out, "\n%d replicas × %d Pods = %d Pods (times from the objects' own timestamps, 1 s resolution; ungated as first seen by a watch)\n\n",
		cfg.Replicas, cfg.Size, cfg.Replicas*cfg.Size)
	fmt.Fprintf(out, "  %-30s %-24s %-24s %s\n", "milestone", "mdplane", "client-go floor", "mdplane/floor")
	for _, m := range create.Milestones {
		f, ok := floorOf[m.Name]
		fs, ratio := "-", "-"
		if ok {
			fs = show(f)
			switch {
			case m.After < 0 || f.After < 0:
			case f.After < 2*time.Second:
				ratio = "- (floor within the 1 s resolution)"
			default:
				ratio = fmt.Sprintf("%.1f×", m.After.Seconds()/f.After.Seconds())
			}
		}
		fmt.Fprintf(out, "  %-30s %-24s %-24s %s\n", m.Name, show(m), fs, ratio)
	}
	if floor != nil {
		fmt.Fprintf(out, "  (floor's Pods created: when the last of the %d create requests of %d workers returned)\n", cfg.Replicas*cfg.Size, floorWorkers)
	}
	if created := create.Milestones[0]; created.After > 0 {
		fmt.Fprintf(out, "  mdplane: %d Pods created in %.1f s: %.1f Pods/s\n", created.Done, created.After.Seconds(), float64(created.Done)/created.After.Seconds())
	} else if create.Elapsed > 0 {
		fmt.Fprintf(out, "  mdplane: %d Pods created in the %s the phase lasted: %.1f Pods/s\n",
			create.Created, create.Elapsed.Round(time.Second), float64(create.Created)/create.Elapsed.Seconds())
	}
}
