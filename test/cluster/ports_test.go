package cluster

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestComponentPortsLieOutsideTheEphemeralRange: the ports the stack's components listen on are
// below the range outgoing connections take their local ports from, and each is handed out once.
func TestComponentPortsLieOutsideTheEphemeralRange(t *testing.T) {
	ephemeralFrom := 32768
	if b, err := os.ReadFile(ephemeralRangeFile); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			ephemeralFrom, _ = strconv.Atoi(f[0])
		}
	}
	seen := map[int]bool{}
	for range 200 {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		if port < listenPortsFrom || port >= ephemeralFrom {
			t.Errorf("port %d is not in [%d, %d)", port, listenPortsFrom, ephemeralFrom)
		}
		if seen[port] {
			t.Errorf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
