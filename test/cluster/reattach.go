package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A stack started by one process (mdplane-stack, under make cluster-up) can serve the tests of
// another (make test-e2e-on-stack), so that running one e2e test costs seconds rather than a
// stack's start. Start writes what a second process needs to reach the stack into its directory;
// Reattach reads it back. The parts of a stack that live in the starting process (the processes it
// kills and restarts, the metrics exporter's bodies, the model hub's repositories, the real node's
// containers) stay that process's: an attached Stack has none of them, and Attached says so.

// stateFile is the file in a stack's directory that Reattach reads.
const stateFile = "stack.json"

// stackState is what Reattach needs of a running stack: where it serves, and the options it runs
// with (the parts of Options that are values).
type stackState struct {
	Registry               string
	HubURL                 string
	HostIP                 string
	Nodes                  int
	GPUsPerNode            int
	PodsPerNode            int
	Products               []string
	CrossplanePollInterval time.Duration
	ControllerArgs         []string
	Audit                  bool
	Profile                bool
}

// writeState records the running stack for Reattach.
func (s *Stack) writeState() error {
	raw, err := json.MarshalIndent(stackState{
		Registry: s.Registry, HubURL: s.HubURL, HostIP: s.hostIP,
		Nodes: s.opts.Nodes, GPUsPerNode: s.opts.GPUsPerNode, PodsPerNode: s.opts.PodsPerNode, Products: s.opts.Products,
		CrossplanePollInterval: s.opts.CrossplanePollInterval, ControllerArgs: s.opts.ControllerArgs,
		Audit: s.opts.Audit, Profile: s.opts.Profile,
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, stateFile), raw, 0o600)
}

// Reattach reaches the stack another process started in dir and keeps running. Stop on the
// returned Stack stops nothing.
func Reattach(ctx context.Context, dir string) (*Stack, error) {
	raw, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no stack in %s: start one with make cluster-up", dir)
	}
	if err != nil {
		return nil, err
	}
	var st stackState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, stateFile), err)
	}
	s := &Stack{
		Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), Registry: st.Registry, HubURL: st.HubURL,
		hostIP: st.HostIP, attached: true,
		opts: Options{Dir: dir, Nodes: st.Nodes, GPUsPerNode: st.GPUsPerNode, PodsPerNode: st.PodsPerNode, Products: st.Products,
			CrossplanePollInterval: st.CrossplanePollInterval, ControllerArgs: st.ControllerArgs, Audit: st.Audit, Profile: st.Profile},
	}
	if s.bin, err = Binaries(); err != nil {
		return nil, err
	}
	if s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig); err != nil {
		return nil, err
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	if s.Client, err = client.New(s.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, err
	}
	if err := s.Client.List(ctx, &corev1.NamespaceList{}, client.Limit(1)); err != nil {
		return nil, fmt.Errorf("the stack in %s does not answer (stopped? make cluster-down, then make cluster-up): %w", dir, err)
	}
	return s, nil
}

// Attached reports a Stack of Reattach: it reaches a stack another process runs, whose processes,
// metrics exporter, model hub and real node it cannot touch.
func (s *Stack) Attached() bool { return s != nil && s.attached }

// RunsWith reports whether the stack runs with opts' values (those Reattach reads), so that a test
// process can refuse a stack started for something else.
func (s *Stack) RunsWith(opts Options) error {
	if s.opts.Nodes != opts.Nodes || s.opts.CrossplanePollInterval != opts.CrossplanePollInterval || !slices.Equal(s.opts.ControllerArgs, opts.ControllerArgs) {
		return fmt.Errorf("the stack in %s runs with %d fake nodes, Crossplane polling every %s and controller flags %v; want %d, %s and %v",
			s.Dir, s.opts.Nodes, s.opts.CrossplanePollInterval, s.opts.ControllerArgs, opts.Nodes, opts.CrossplanePollInterval, opts.ControllerArgs)
	}
	return nil
}
