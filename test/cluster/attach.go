package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cluster is a running cluster reached through a kubeconfig, with no process of it under the test's
// control: a platform team's own cluster (make conformance), or the stack reached the same way.
type Cluster struct {
	// Kubeconfig is the kubeconfig (a list of files, as KUBECONFIG holds), and Context the context of
	// it in use ("" for its current).
	Kubeconfig, Context string
	Config              *rest.Config
	// Client knows Kubernetes, Kueue, Crossplane and mdplane kinds.
	Client client.Client
	// kubectl is the program Kubectl runs.
	kubectl string
}

// Attach reaches the cluster of a kubeconfig (its current context, or context), with the stack's
// kubectl when build.sh built one and else the kubectl on PATH.
func Attach(kubeconfig, context string) (*Cluster, error) {
	// A KUBECONFIG of several files merges them, as kubectl does.
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig %s: %w", kubeconfig, err)
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	kubectl, err := exec.LookPath("kubectl")
	if dir, binErr := Binaries(); binErr == nil {
		if built := filepath.Join(dir, "kubectl-"+KubernetesVersion); isExecutable(built) {
			kubectl, err = built, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("no kubectl: neither build.sh's nor one on PATH: %w", err)
	}
	return &Cluster{Kubeconfig: kubeconfig, Context: context, Config: cfg, Client: c, kubectl: kubectl}, nil
}

// Kubectl runs kubectl against the cluster and returns what it printed.
func (c *Cluster) Kubectl(args ...string) (string, error) {
	var flags []string
	if c.Context != "" {
		flags = append(flags, "--context="+c.Context)
	}
	cmd := exec.Command(c.kubectl, append(flags, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Attach is the stack reached as a cluster of its own kubeconfig: what a conformance test gets.
func (s *Stack) Attach() (*Cluster, error) { return Attach(s.Kubeconfig, "") }

func isExecutable(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0
}
