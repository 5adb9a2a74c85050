package retirement

import (
	"fmt"
	"strconv"

	"github.com/mdplane/mdplane/snapshot"
)

// Read is one read of one answering member's /metrics: its families, or why there are none.
type Read struct {
	Member   string
	Families snapshot.Families
	Err      string
}

// JudgeDrain decides a pass's drain read from two consecutive rounds of reads of the answering
// members: idle only when every expected gauge is present and exactly 0 on every member in both
// rounds; otherwise held, naming the first member and gauge that held it.
func JudgeDrain(gauges []string, rounds ...[]Read) Drain {
	if len(rounds) < 2 {
		return Drain{Held: "the answering members were read fewer than twice"}
	}
	for _, round := range rounds {
		if len(round) == 0 {
			return Drain{Held: "no member of the replica answers HTTP"}
		}
		for _, r := range round {
			if r.Err != "" {
				return Drain{Held: fmt.Sprintf("the drain read of %s failed: %s", r.Member, r.Err)}
			}
			for _, g := range gauges {
				v, ok := r.Families.Sum(nil, g)
				switch {
				case !ok:
					return Drain{Held: fmt.Sprintf("%s does not report %s", r.Member, g)}
				case v != 0:
					return Drain{Held: fmt.Sprintf("%s is busy: %s is %s", r.Member, g, strconv.FormatFloat(v, 'g', -1, 64))}
				}
			}
		}
	}
	return Drain{Idle: true}
}
