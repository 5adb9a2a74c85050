package cluster

import (
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// TestKueueRunsItsReleasedConfiguration: the stack's Kueue runs the Configuration its release
// installs (the controllers' concurrency, the client limit), with only the loopback settings and
// the integration docs/install.md asks for changed, and the bench's client limit when one is given.
func TestKueueRunsItsReleasedConfiguration(t *testing.T) {
	module, err := moduleDir(".", "sigs.k8s.io/kueue")
	if err != nil {
		t.Fatal(err)
	}
	webhook := envtest.WebhookInstallOptions{LocalServingPort: 9443, LocalServingHost: "127.0.0.1", LocalServingCertDir: "/certs"}
	read := func(opts Options) KueueConfig {
		raw, err := kueueConfiguration(module, opts, 8081, webhook)
		if err != nil {
			t.Fatal(err)
		}
		var c KueueConfig
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	released := read(Options{})
	if got := released.WorkloadWorkers(); got != 5 {
		t.Errorf("Workload controller workers: %d, want the release's 5", got)
	}
	if c := released.ClientConnection; *c.QPS != 50 || *c.Burst != 100 {
		t.Errorf("client limit %v / %d, want the release's 50 / 100", *c.QPS, *c.Burst)
	}
	if released.LeaderElection.LeaderElect || strings.Join(released.Integrations.Frameworks, ",") != "batch/job,pod" {
		t.Errorf("loopback settings not applied: %+v", released)
	}
	raised := read(Options{KueueQPS: 500, KueueBurst: 1000})
	if c := raised.ClientConnection; *c.QPS != 500 || *c.Burst != 1000 {
		t.Errorf("client limit %v / %d, want the bench's 500 / 1000", *c.QPS, *c.Burst)
	}
}
