// Package cluster starts the real control plane mdplane's end-to-end tests run against, on this
// machine alone: etcd and kube-apiserver (through envtest), kube-controller-manager, kube-scheduler
// and the Kueue manager as processes; a real node (kubelet, containerd, runc, the CNI plugins,
// kube-proxy) running the cluster DNS, Crossplane as its chart installs it, and mdplane installed
// from its images and packages as docs/install.md says (install.go); KWOK with fake GPU nodes for
// scale; a local model hub and an OCI registry. The binaries come from build.sh, built once per
// version from the Go module proxy.
package cluster

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/mdplane/mdplane/internal/hubtest"
)

// KubernetesVersion is the Kubernetes the stack runs: build.sh's pin, or MDPLANE_KUBERNETES, the one
// switch to another release (docs/testing.md, "Another Kubernetes"), which build.sh reads too.
var KubernetesVersion = cmp.Or(os.Getenv("MDPLANE_KUBERNETES"), PinnedKubernetesVersion)

// Versions of the programs the stack runs; build.sh pins the same.
const (
	PinnedKubernetesVersion = "v1.35.3"
	EtcdVersion             = "v3.6.5"
	KueueVersion            = "v0.17.0"
	KWOKVersion             = "v0.8.0"
	CrossplaneVersion       = "v2.4.0"
	// CrossplaneCLIVersion is the Crossplane CLI (crossplane xpkg, crossplane render) a user runs.
	CrossplaneCLIVersion = "v2.5.0"
	// PatchAndTransformVersion is function-patch-and-transform, the team API example's Function.
	PatchAndTransformVersion = "v0.5.0"
	// CoreDNSVersion is the real node's cluster DNS.
	CoreDNSVersion = "v1.14.1"
	// InferenceSimVersion is llm-d-inference-sim, which the engine stand-in image wraps.
	InferenceSimVersion = "v0.10.2"
	// ContainerdVersion, RuncVersion and CNIPluginsVersion are the real node's container runtime
	// and Pod network plugins.
	ContainerdVersion = "v2.2.9"
	RuncVersion       = "v1.5.3"
	CNIPluginsVersion = "v1.10.0"
)

// Options shape a stack.
type Options struct {
	// Dir holds the stack's state: kubeconfig, certificates, configuration, logs. A temporary
	// directory when empty.
	Dir string
	// Nodes is how many fake GPU nodes KWOK runs.
	Nodes int
	// GPUsPerNode and PodsPerNode are each fake node's nvidia.com/gpu and Pod capacity; zero means
	// GPUsPerNode (8) and 110.
	GPUsPerNode, PodsPerNode int
	// Products are the NVIDIA products the fake nodes carry, as GPU feature discovery labels them
	// (nvidia.com/gpu.product and the rest, see NodeOptions.Product): node i gets Products[i %
	// len(Products)]. Empty means DefaultProducts, so that both acceleratable InstanceTypes of
	// examples/cluster.yaml find a node of their accelerator group.
	Products []string
	// KueueQPS and KueueBurst set the client rate limit of the Kueue manager (its Configuration's
	// clientConnection); zero leaves what Kueue's released configuration sets (50 and 100).
	KueueQPS   float64
	KueueBurst int
	// PodsReadyTimeout is Kueue's waitForPodsReady timeout; PodsReadyTimeout (the constant) when
	// zero.
	PodsReadyTimeout time.Duration
	// Audit turns the API server's audit log on (AuditLog): one Metadata-level line per write
	// request (create, update, patch, delete, deletecollection) and nothing else.
	Audit bool
	// Profile serves Go's profiling endpoints (/debug/pprof) of mdplane-controllers and
	// mdplane-webhooks on their Pods' ProfilePort (ProfileAddresses).
	Profile bool
	// CrossplanePollInterval is how often Crossplane reconciles every composite.
	CrossplanePollInterval time.Duration
	// ControllerArgs are extra flags for the controllers' mdplane-controllers process, such as a
	// short --park-after.
	ControllerArgs []string
	// Log receives one line per started component with its startup time.
	Log func(format string, args ...any)
}

// Stack is a running control plane.
type Stack struct {
	// Kubeconfig is the path of an admin kubeconfig for the stack's API server.
	Kubeconfig string
	// Config is the admin client configuration.
	Config *rest.Config
	// Client is an admin client that knows Kubernetes, Kueue, Crossplane and mdplane kinds.
	Client client.Client
	// Dir is the stack's state directory.
	Dir string
	// Registry is the host:port, on the machine's address, of the stack's OCI registry, which the
	// node's images and mdplane's packages are pulled from.
	Registry string
	// Hub is the local model hub (the Hugging Face and ModelScope API subset the ModelArtifact
	// resolver calls) and HubURL its address on the machine: the real hubs are not reachable here.
	// A test points the Settings' hub endpoints at it and seeds it.
	Hub    *hubtest.Hub
	HubURL string
	// MetricsExporter answers the metrics snapshot's scrapes of the stack's Pods; a test sets each
	// Pod's body by its address.
	MetricsExporter *Exporter

	opts      Options
	env       *envtest.Environment
	processes []*process
	// built are the commands of this checkout built for this stack (buildCommand).
	built   sync.Map
	ca      *authority
	stops   []func()
	bin     string
	modules map[string]string
	// restartables are the components a test may kill and start again, by name.
	restartables map[string]*restartable
	// hostIP is the machine's own address, which the API server advertises and the real node has.
	hostIP string
	// images and release report the background builds of the node's images and of this checkout's
	// release (buildInBackground), which cancelBuilds cancels and builds waits for.
	images, release chan error
	cancelBuilds    context.CancelFunc
	builds          sync.WaitGroup
	// attached marks a Stack of Reattach, which reaches a stack another process runs.
	attached bool
	// node is the real node while it runs, and leftovers what it left once stopped.
	node      *realNode
	leftovers []string
}

// Binaries returns the directory build.sh writes to.
func Binaries() (string, error) {
	cache := os.Getenv("MDPLANE_CACHE")
	if cache == "" {
		home, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		cache = filepath.Join(home, "mdplane")
	}
	return filepath.Join(cache, "bin"), nil
}

// Start builds what is missing and starts every component, in dependency order. On error it stops
// what it started.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	var err error
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	if opts.Nodes == 0 {
		opts.Nodes = 2
	}
	if opts.GPUsPerNode == 0 {
		opts.GPUsPerNode = GPUsPerNode
	}
	if opts.PodsPerNode == 0 {
		opts.PodsPerNode = 110
	}
	if len(opts.Products) == 0 {
		opts.Products = DefaultProducts
	}
	if opts.CrossplanePollInterval == 0 {
		opts.CrossplanePollInterval = 30 * time.Second
	}
	if opts.Dir == "" {
		if opts.Dir, err = os.MkdirTemp("", "mdplane-stack-"); err != nil {
			return nil, err
		}
	}
	for _, d := range []string{"logs", "certs", "config"} {
		if err := os.MkdirAll(filepath.Join(opts.Dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	if err := checkListed("mdplane-controllers", opts.ControllerArgs); err != nil {
		return nil, err
	}
	s := &Stack{Dir: opts.Dir, opts: opts}
	started := false
	defer func() {
		if !started {
			s.Stop()
		}
	}()
	total := time.Now()
	if err := s.timed("build (cached binaries are reused)", s.build); err != nil {
		return nil, err
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"etcd, kube-apiserver and CRDs", s.startAPIServer},
		{"kube-controller-manager", s.startControllerManager},
		{"kube-scheduler", s.startScheduler},
		{"the system Pods' logs", s.collectLogs},
		{"registry", s.startRegistry},
		// The builds run while the node and the rest start: the node's images are needed from the
		// cluster DNS on, the release from mdplane's install.
		{"building the node's images and the release", s.buildInBackground},
		{"real node", s.startRealNode},
		{"fake nodes' engines", s.serveFakePods},
		{"kwok and fake nodes", s.startKWOK},
		{"local model hub", s.startHub},
		// Kueue's webhooks judge every Deployment and Pod, the cluster DNS's first.
		{"kueue", s.startKueue},
		{"the node's images pushed", func(context.Context) error { return <-s.images }},
		{"cluster DNS", s.startClusterDNS},
		{"crossplane from its chart", s.installCrossplane},
		{"the release pushed", func(context.Context) error { return <-s.release }},
		{"mdplane from its packages", s.install},
	}
	for _, step := range steps {
		if err := s.timed(step.name, func() error { return step.run(ctx) }); err != nil {
			return nil, fmt.Errorf("starting %s: %w (logs in %s)", step.name, err, filepath.Join(s.Dir, "logs"))
		}
	}
	if err := s.writeState(); err != nil {
		return nil, err
	}
	opts.Log("stack ready in %s; kubeconfig %s", time.Since(total).Round(time.Millisecond), s.Kubeconfig)
	started = true
	return s, nil
}

func (s *Stack) timed(name string, run func() error) error {
	start := time.Now()
	err := run()
	if err == nil {
		s.opts.Log("%-32s %s", name, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// startHub serves the local model hub on the machine's address, where mdplane-controllers reach it
// from their Pods, until the stack stops.
func (s *Stack) startHub(context.Context) error {
	s.Hub = hubtest.New()
	lis, err := net.Listen("tcp", net.JoinHostPort(s.hostIP, "0"))
	if err != nil {
		return err
	}
	srv := &httptest.Server{Listener: lis, Config: &http.Server{Handler: s.Hub, ReadHeaderTimeout: 10 * time.Second}}
	srv.Start()
	s.HubURL = srv.URL
	s.stops = append(s.stops, srv.Close)
	return nil
}

// Stop stops every component in reverse order; the API server stops before etcd.
func (s *Stack) Stop() {
	if s.cancelBuilds != nil {
		s.cancelBuilds()
		s.builds.Wait()
	}
	for i := len(s.processes) - 1; i >= 0; i-- {
		s.processes[i].stop()
	}
	s.processes = nil
	s.stopRealNode()
	for _, stop := range s.stops {
		stop()
	}
	s.stops = nil
	if s.env != nil {
		_ = s.env.Stop()
		s.env = nil
	}
}

// build runs build.sh for every component and resolves the module directories the stack reads
// manifests from.
func (s *Stack) build() error {
	here, err := packageDir()
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(here, "build.sh"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build.sh: %w\n%s", err, out)
	}
	if s.bin, err = Binaries(); err != nil {
		return err
	}
	s.modules = map[string]string{}
	for module, dir := range map[string]string{
		"sigs.k8s.io/kueue":                   here,
		"github.com/crossplane/crossplane/v2": here,
		"sigs.k8s.io/kwok":                    filepath.Join(here, "tools", "kwok"),
		autoscalerAPIs:                        here,
	} {
		if s.modules[module], err = moduleDir(dir, module); err != nil {
			return err
		}
	}
	return nil
}

// moduleDir is the directory of module's source as the Go module in dir requires it.
func moduleDir(dir, module string) (string, error) {
	out, err := exec.Command("go", "-C", dir, "list", "-m", "-f", "{{.Dir}}", module).Output()
	if err != nil {
		return "", fmt.Errorf("locating module %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// packageDir is this package's source directory, where build.sh and tools/ are. The stack runs from
// a checkout (tests, make cluster-up), so the path compiled in is the checkout's.
func packageDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", errors.New("cannot locate the test/cluster sources; run the stack from a checkout, built without -trimpath")
	}
	return filepath.Dir(file), nil
}

// binary is the path of a built program.
func (s *Stack) binary(name, version string) string {
	return filepath.Join(s.bin, name+"-"+version)
}

// process is a child program whose output goes to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

// run starts a component and records it for Stop; its pid goes to <dir>/pids.
func (s *Stack) run(name, bin string, args []string, env ...string) (*process, error) {
	return s.spawn(name, os.O_TRUNC, bin, args, env)
}

// spawn starts a component writing to its log, truncated or appended to (logMode os.O_TRUNC or
// os.O_APPEND).
func (s *Stack) spawn(name string, logMode int, bin string, args, env []string) (*process, error) {
	log, err := os.OpenFile(filepath.Join(s.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|logMode, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), env...)
	// Its own process group, so that a test binary killed by a timeout does not leave it orphaned in
	// the foreground group, and so that Stop reaches anything it forks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	s.processes = append(s.processes, p)
	f, err := os.OpenFile(filepath.Join(s.Dir, "pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		_, _ = fmt.Fprintf(f, "%d %s\n", cmd.Process.Pid, name)
		_ = f.Close()
	}
	return p, nil
}

// kill ends the process group at once, without the grace stop gives it.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *process) stop() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	_ = p.log.Close()
}

// exited reports a component that died while the stack waited for it, with its log's tail.
func (p *process) exited() error {
	select {
	case <-p.done:
		tail, _ := os.ReadFile(p.log.Name())
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return fmt.Errorf("%s exited: %s\n%s", p.name, p.cmd.ProcessState, tail)
	default:
		return nil
	}
}

// waitFor polls check until it succeeds, the process dies, or the timeout passes.
func waitFor(ctx context.Context, p *process, timeout time.Duration, what string, check func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if p != nil {
			if err := p.exited(); err != nil {
				return err
			}
		}
		if last = check(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s: %w", what, timeout, last)
}

// httpOK checks that a URL answers 200; TLS is not verified (the components serve self-signed
// certificates on loopback).
func httpOK(url string) func() error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health checks of self-signed components
	return func() error {
		rsp, err := c.Get(url)
		if err != nil {
			return err
		}
		defer rsp.Body.Close()
		_, _ = io.Copy(io.Discard, rsp.Body)
		if rsp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s answered %s", url, rsp.Status)
		}
		return nil
	}
}

// tcpOpen checks that something accepts connections at addr.
func tcpOpen(addr string) func() error {
	return func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// The ports a component listens on are chosen below the kernel's ephemeral range: a free port
// inside it can be taken by any outgoing connection between the choice and the bind (a component
// starts seconds after its port is chosen), and a component a test restarts binds its port again.
var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// listenPortsFrom and listenPortsTo bound the ports freePort picks, below the Linux default
// ephemeral range (32768 to 60999); ephemeralRangeFile says where this machine's begins.
const (
	listenPortsFrom    = 20000
	listenPortsTo      = 32767
	ephemeralRangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

// freePort returns a loopback port nothing listens on, outside the ephemeral range, and never the
// same one twice in a process.
func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	to := listenPortsTo
	if b, err := os.ReadFile(ephemeralRangeFile); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo <= to {
				to = lo - 1
			}
		}
	}
	if to-listenPortsFrom < 1000 {
		return 0, fmt.Errorf("the ephemeral port range (%s) leaves fewer than 1000 ports from %d for the stack's components to listen on", ephemeralRangeFile, listenPortsFrom)
	}
	for range 1000 {
		port := listenPortsFrom + rand.IntN(to-listenPortsFrom+1)
		if portsGiven[port] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsGiven[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port between %d and %d after 1000 tries", listenPortsFrom, to)
}

// Kubectl runs the stack's kubectl against its API server and returns what it printed.
func (s *Stack) Kubectl(args ...string) (string, error) {
	cmd := exec.Command(s.binary("kubectl", KubernetesVersion), append([]string{"--kubeconfig=" + s.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// KubectlBinary is the path of the stack's kubectl, of the stack's Kubernetes version.
func (s *Stack) KubectlBinary() string {
	return s.binary("kubectl", KubernetesVersion)
}

// Args are the flags a component runs with: a process's of the stack ("kueue", "kubelet", ...), or
// the first container's of a Deployment of the system namespaces ("crossplane",
// "mdplane-controllers", ...); nil for neither.
func (s *Stack) Args(component string) []string {
	for _, p := range s.processes {
		if p.name == component {
			return p.cmd.Args[1:]
		}
	}
	for _, ns := range systemNamespaces {
		d := &appsv1.Deployment{}
		if err := s.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: component}, d); err == nil {
			return d.Spec.Template.Spec.Containers[0].Args
		}
	}
	return nil
}

// ProfileAddresses are the host:port of a component's profiling endpoints, by replica, or none when
// Options.Profile is off: the leading replica of mdplane-controllers ("mdplane-controllers"), or every
// running replica of mdplane-webhooks ("mdplane-webhooks"), serves them on ProfilePort of its Pod.
func (s *Stack) ProfileAddresses(component string) map[string]string {
	if !s.opts.Profile {
		return nil
	}
	var pods []corev1.Pod
	switch component {
	case "mdplane-controllers":
		if leader, err := s.controllersLeader(context.Background()); err == nil {
			pods = []corev1.Pod{*leader}
		}
	case "mdplane-webhooks":
		pods, _ = s.runningPods(context.Background(), Namespace, webhooksSelector)
	}
	out := map[string]string{}
	for _, pod := range pods {
		if pod.Status.PodIP != "" {
			out[pod.Name] = net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(ProfilePort))
		}
	}
	return out
}

// Program is the path of the executable a component runs as a process of the stack, or "" when the
// stack did not start it.
func (s *Stack) Program(component string) string {
	for _, p := range s.processes {
		if p.name == component {
			return p.cmd.Path
		}
	}
	return ""
}

// Binary is the path of a program the stack runs, such as Binary("crossplane", CrossplaneVersion).
func (s *Stack) Binary(name, version string) string {
	return s.binary(name, version)
}

// LogFile is the path of a component's log.
func (s *Stack) LogFile(component string) string {
	return filepath.Join(s.Dir, "logs", component+".log")
}
