// Command coredns is CoreDNS with only the plugins the test stack's cluster DNS needs: it answers
// for the cluster's Services and Pods (kubernetes) and has no forward plugin, so a name outside the
// cluster is never sent off the machine.
package main

import (
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
