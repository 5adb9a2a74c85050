// Command mdplane-pause is the sandbox ("pause") container of the test stack's real node: it holds
// a Pod's namespaces open, reaps the orphans that a shared process namespace hands to it, and exits
// when the runtime stops the sandbox. The stack builds it statically into an image in its registry,
// which the node's containerd pulls in place of registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return
		}
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
