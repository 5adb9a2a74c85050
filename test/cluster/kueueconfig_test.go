package cluster

import (
	"os/exec"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"
)

// TestKueueRunsItsReleasedConfiguration: the stack's Kueue runs the Configuration its release
// installs (the controllers' concurrency, the client limit), with only the loopback settings and
// the integration docs/install.md asks for changed, and the bench's client limit when one is given.
func TestKueueRunsItsReleasedConfiguration(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue").Output()
	if err != nil {
		t.Fatalf("locating Kueue's module: %v", err)
	}
	module := strings.TrimSpace(string(out))
	webhook := envtest.WebhookInstallOptions{LocalServingPort: 9443, LocalServingHost: "127.0.0.1", LocalServingCertDir: "/certs"}
	type configuration struct {
		Controller struct {
			GroupKindConcurrency map[string]int `json:"groupKindConcurrency"`
		} `json:"controller"`
		ClientConnection struct {
			QPS   float64 `json:"qps"`
			Burst int     `json:"burst"`
		} `json:"clientConnection"`
		LeaderElection struct {
			LeaderElect bool `json:"leaderElect"`
		} `json:"leaderElection"`
		Integrations struct {
			Frameworks []string `json:"frameworks"`
		} `json:"integrations"`
	}
	read := func(opts Options) configuration {
		raw, err := kueueConfiguration(module, opts, 8081, webhook)
		if err != nil {
			t.Fatal(err)
		}
		var c configuration
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	released := read(Options{})
	if got := released.Controller.GroupKindConcurrency["Workload.kueue.x-k8s.io"]; got != 5 {
		t.Errorf("Workload controller workers: %d, want the release's 5", got)
	}
	if released.ClientConnection.QPS != 50 || released.ClientConnection.Burst != 100 {
		t.Errorf("client limit %v / %d, want the release's 50 / 100", released.ClientConnection.QPS, released.ClientConnection.Burst)
	}
	if released.LeaderElection.LeaderElect || strings.Join(released.Integrations.Frameworks, ",") != "pod" {
		t.Errorf("loopback settings not applied: %+v", released)
	}
	raised := read(Options{KueueQPS: 500, KueueBurst: 1000})
	if raised.ClientConnection.QPS != 500 || raised.ClientConnection.Burst != 1000 {
		t.Errorf("client limit %v / %d, want the bench's 500 / 1000", raised.ClientConnection.QPS, raised.ClientConnection.Burst)
	}
}
