package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/functions"
	manifests "github.com/mdplane/mdplane/package"
)

// Scheme knows every kind the stack serves that has Go types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, extv1.AddToScheme, kueuev1beta2.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *Stack) startAPIServer(ctx context.Context) error {
	assets := filepath.Join(s.Dir, "assets")
	if err := os.MkdirAll(assets, 0o755); err != nil {
		return err
	}
	for name, target := range map[string]string{
		"kube-apiserver": s.binary("kube-apiserver", KubernetesVersion),
		"etcd":           s.binary("etcd", EtcdVersion),
		"kubectl":        s.binary("kubectl", KubernetesVersion),
	} {
		link := filepath.Join(assets, name)
		_ = os.Remove(link)
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	kueue := s.modules["sigs.k8s.io/kueue"]
	s.env = &envtest.Environment{
		BinaryAssetsDirectory: assets,
		ErrorIfCRDPathMissing: true,
		CRDDirectoryPaths: []string{
			filepath.Join(kueue, "config", "components", "crd", "bases"),
			filepath.Join(s.modules["github.com/crossplane/crossplane/v2"], "cluster", "crds"),
		},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths: []string{filepath.Join(kueue, "config", "components", "webhook", "manifests.yaml")},
		},
	}
	var err error
	if err := s.configureAggregation(); err != nil {
		return err
	}
	if s.opts.Audit {
		if err := s.configureAudit(); err != nil {
			return err
		}
	}
	if s.Config, err = s.env.Start(); err != nil {
		return err
	}
	user, err := s.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return err
	}
	kubeconfig, err := user.KubeConfig()
	if err != nil {
		return err
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	if err := os.WriteFile(s.Kubeconfig, kubeconfig, 0o600); err != nil {
		return err
	}
	scheme, err := Scheme()
	if err != nil {
		return err
	}
	s.Config = user.Config()
	s.Client, err = client.New(s.Config, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, ns := range []string{"kueue-system", "crossplane-system"} {
		if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	return nil
}

// auditPolicy records every write request once, when its response is complete, with its user,
// user agent, verb and object reference, and no other request.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "update", "patch", "delete", "deletecollection"]
  - level: None
`

// AuditLog is the path of the API server's audit log, written when Options.Audit is set. Past
// 100 MB the API server moves it aside, to audit-<time>.log in the same directory.
func (s *Stack) AuditLog() string {
	return filepath.Join(s.Dir, "logs", "audit.log")
}

// configureAudit passes the audit policy and log to the API server envtest starts.
// frontProxyClient is the name of the kube-apiserver's front-proxy client certificate: the one name
// an aggregated API server accepts it under.
const frontProxyClient = "front-proxy-client"

// configureAggregation gives the kube-apiserver a front-proxy CA and client certificate, so that it
// proxies aggregated APIs (the metrics snapshot) and publishes the CA in
// kube-system/extension-apiserver-authentication for them to authenticate it by.
func (s *Stack) configureAggregation() error {
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "certs", "front-proxy")
	if err := ca.issue(dir, frontProxyClient, 2); err != nil {
		return err
	}
	args := s.env.ControlPlane.GetAPIServer().Configure()
	args.Set("requestheader-client-ca-file", filepath.Join(dir, "ca.crt"))
	args.Set("requestheader-allowed-names", frontProxyClient)
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	args.Set("proxy-client-cert-file", filepath.Join(dir, "tls.crt"))
	args.Set("proxy-client-key-file", filepath.Join(dir, "tls.key"))
	return nil
}

func (s *Stack) configureAudit() error {
	policy := filepath.Join(s.Dir, "config", "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	args := s.env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", s.AuditLog())
	args.Set("audit-log-format", "json")
	return nil
}

// serveSecurely starts a component with a loopback health endpoint and waits for it.
func (s *Stack) serveSecurely(ctx context.Context, name, bin, kubeconfig string, args []string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	args = append(args, "--kubeconfig="+kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(port))
	p, err := s.run(name, bin, args)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, 60*time.Second, name, httpOK(fmt.Sprintf("https://127.0.0.1:%d/healthz", port)))
}

// startControllerManager runs the controllers the tests rely on: garbage collection (owner
// references, foreground deletion), namespace deletion, Service endpoints, node lifecycle, which
// lifts the not-ready taint the API server puts on a new node once KWOK reports it Ready, the
// Deployment and ReplicaSet controllers, which run the routers' Deployments, and the
// PersistentVolume binder, which binds a claim to its volume (a claim-delivered ModelArtifact's
// deployment waits for a Bound claim), and the volume and claim protection controllers, which
// release the finalizers the API server puts on both once nothing uses them.
//
// It authenticates as system:kube-controller-manager, the name a cluster's controller manager has
// without --use-service-account-credentials, which mdplane's internal-objects policy lets delete
// what the garbage collector and namespace controller delete.
func (s *Stack) startControllerManager(ctx context.Context) error {
	kubeconfig, err := s.userKubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	return s.serveSecurely(ctx, "kube-controller-manager", s.binary("kube-controller-manager", KubernetesVersion), kubeconfig,
		deviationFlags("kube-controller-manager", s.opts))
}

func (s *Stack) startScheduler(ctx context.Context) error {
	return s.serveSecurely(ctx, "kube-scheduler", s.binary("kube-scheduler", KubernetesVersion), s.Kubeconfig, nil)
}

// Fake nodes: KWOK manages the nodes carrying this annotation and plays kubelet for their Pods.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	// GPUsPerNode is how many nvidia.com/gpu each fake node advertises unless Options say otherwise.
	GPUsPerNode = 8
	// RackLabel is the topology label each fake node carries; there is one rack per two nodes.
	RackLabel = "topology.gpustack.ai/rack"
)

// kwokStages are the stages KWOK plays: nodes turn Ready and keep a heartbeat; Pods bound to them
// run and turn Ready (at once, or after the ReadyDelayEnv a container declares), complete, and go
// away when deleted. The heartbeat is a kubelet's: a node Lease renewed every quarter of
// kwokNodeLease, the status rewritten every ten minutes or so. KWOK's status-only heartbeat (every
// 20 to 45 s, its delay started again by any write to the Node) left gaps past the
// kube-controller-manager's 50 s grace, which marked the node's Pods not Ready for good: no kubelet
// is there to mark them Ready again.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// kwokNodeLease is the duration of the fake nodes' Leases, in seconds: a kubelet's default.
const kwokNodeLease = 40

// ReadyDelayEnv is the env a container of a Pod (a role's env) declares to delay the Pod's turning
// Ready by a duration ("4s"): how a test holds an engine's readiness back.
const ReadyDelayEnv = "KWOK_READY_DELAY"

// readyDelay is the delay of the pod-ready stage: none, unless a container declares ReadyDelayEnv.
const readyDelay = `  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.spec.containers.[].env.[]? | select(.name == "` + ReadyDelayEnv + `") | .value'
`

func (s *Stack) startKWOK(ctx context.Context) error {
	var config []string
	for _, stage := range kwokStages {
		b, err := os.ReadFile(filepath.Join(s.modules["sigs.k8s.io/kwok"], stage))
		if err != nil {
			return err
		}
		doc := string(b)
		if strings.HasSuffix(stage, "/pod-ready.yaml") {
			if !strings.Contains(doc, "\n  next:") {
				return fmt.Errorf("KWOK's %s has no next: the ready delay cannot be added", stage)
			}
			doc = strings.Replace(doc, "\n  next:", "\n"+readyDelay+"  next:", 1)
		}
		config = append(config, doc)
	}
	configFile := filepath.Join(s.Dir, "config", "kwok.yaml")
	if err := os.WriteFile(configFile, []byte(strings.Join(config, "\n---\n")), 0o644); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := s.run("kwok", s.binary("kwok", KWOKVersion), []string{
		"--kubeconfig=" + s.Kubeconfig, "--config=" + configFile,
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		"--server-address=127.0.0.1:" + strconv.Itoa(port),
		"--node-ip=127.0.0.1", "--cidr=10.244.0.0/16",
		"--node-lease-duration-seconds=" + strconv.Itoa(kwokNodeLease),
	})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, p, 30*time.Second, "kwok", httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))); err != nil {
		return err
	}
	for i := range s.opts.Nodes {
		if err := s.Client.Create(ctx, s.fakeNode(i)); err != nil {
			return err
		}
	}
	return waitFor(ctx, p, 60*time.Second, "fake nodes", func() error {
		nodes := &corev1.NodeList{}
		if err := s.Client.List(ctx, nodes); err != nil {
			return err
		}
		schedulable := 0
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(n.Spec.Taints) == 0 {
					schedulable++
				}
			}
		}
		if schedulable < s.opts.Nodes {
			return fmt.Errorf("%d of %d nodes Ready and untainted", schedulable, s.opts.Nodes)
		}
		return nil
	})
}

// startKueue runs the Kueue manager with the pod integration on, its webhooks served on the loopback
// port envtest registered them at.
func (s *Stack) startKueue(ctx context.Context) error {
	webhook := s.env.WebhookInstallOptions
	// Kueue v0.17.0 opens a metrics certificate at a fixed path even with metrics off and internal
	// certificate management disabled; any valid pair will do.
	if err := copyServingCert(webhook.LocalServingCertDir, "/etc/kueue/metrics/certs"); err != nil {
		return fmt.Errorf("kueue needs a certificate in /etc/kueue/metrics/certs (run as root): %w", err)
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	config, err := kueueConfiguration(s.modules["sigs.k8s.io/kueue"], s.opts, health, webhook)
	if err != nil {
		return err
	}
	configFile := filepath.Join(s.Dir, "config", "kueue.yaml")
	if err := os.WriteFile(configFile, config, 0o644); err != nil {
		return err
	}
	kubeconfig, err := s.installKueueRBAC(ctx)
	if err != nil {
		return err
	}
	return s.launch(ctx, &restartable{name: "kueue", bin: s.binary("kueue", KueueVersion), args: append([]string{
		"--config=" + configFile, "--kubeconfig=" + kubeconfig,
	}, deviationFlags("kueue", s.opts)...), ready: func() error {
		if err := httpOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))(); err != nil {
			return err
		}
		return tcpOpen(net.JoinHostPort(webhook.LocalServingHost, strconv.Itoa(webhook.LocalServingPort)))()
	}})
}

// KueueConfig is what the stack's Kueue Configuration sets of the client limit, the controllers'
// workers, leader election and the integrations.
type KueueConfig struct {
	ClientConnection struct {
		QPS   *float64 `json:"qps"`
		Burst *int     `json:"burst"`
	} `json:"clientConnection"`
	Controller struct {
		GroupKindConcurrency map[string]int `json:"groupKindConcurrency"`
	} `json:"controller"`
	LeaderElection struct {
		LeaderElect bool `json:"leaderElect"`
	} `json:"leaderElection"`
	Integrations struct {
		Frameworks []string `json:"frameworks"`
	} `json:"integrations"`
}

// WorkloadWorkers is how many Workloads Kueue's Workload controller reconciles at once (one when
// the Configuration does not say).
func (c KueueConfig) WorkloadWorkers() int {
	return max(c.Controller.GroupKindConcurrency["Workload.kueue.x-k8s.io"], 1)
}

// KueueConfig reads the Configuration the stack started Kueue with.
func (s *Stack) KueueConfig() (KueueConfig, error) {
	var c KueueConfig
	raw, err := os.ReadFile(filepath.Join(s.Dir, "config", "kueue.yaml"))
	if err != nil {
		return c, err
	}
	err = yaml.Unmarshal(raw, &c)
	return c, err
}

// kueueConfiguration is the Configuration Kueue's release installs (its manifests' and chart's
// controller_manager_config.yaml: the controllers' concurrency, the client limit) with only what the
// loopback stack needs changed: health, webhook and certificates on loopback, no metrics, no leader
// election, and the integration docs/install.md asks for. A Configuration written from scratch would
// run Kueue's Workload controller one reconcile at a time, where an installed Kueue runs five.
func kueueConfiguration(module string, opts Options, healthPort int, webhook envtest.WebhookInstallOptions) ([]byte, error) {
	shipped := filepath.Join(module, "config", "components", "manager", "controller_manager_config.yaml")
	raw, err := os.ReadFile(shipped)
	if err != nil {
		return nil, fmt.Errorf("reading Kueue's released configuration: %w", err)
	}
	config := map[string]any{}
	if err := yaml.Unmarshal(raw, &config); err != nil {
		return nil, fmt.Errorf("reading Kueue's released configuration %s: %w", shipped, err)
	}
	config["namespace"] = "kueue-system"
	config["health"] = map[string]any{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort)}
	config["metrics"] = map[string]any{"bindAddress": "0"}
	config["webhook"] = map[string]any{"port": webhook.LocalServingPort, "host": webhook.LocalServingHost, "certDir": webhook.LocalServingCertDir}
	config["leaderElection"] = map[string]any{"leaderElect": false}
	config["internalCertManagement"] = map[string]any{"enable": false}
	config["integrations"] = map[string]any{"frameworks": []string{"pod"}}
	client, _ := config["clientConnection"].(map[string]any)
	if client == nil {
		client = map[string]any{}
	}
	if opts.KueueQPS != 0 {
		client["qps"] = opts.KueueQPS
	}
	if opts.KueueBurst != 0 {
		client["burst"] = opts.KueueBurst
	}
	config["clientConnection"] = client
	return yaml.Marshal(config)
}

// installKueueRBAC applies Kueue's own RBAC manifests (its config/components/rbac, named and
// namespaced as its release manifests name them) and writes a kubeconfig of its ServiceAccount
// kueue-system/kueue-controller-manager: the Kueue manager has the rights a cluster's has.
func (s *Stack) installKueueRBAC(ctx context.Context) (string, error) {
	dir := filepath.Join(s.Dir, "config", "kueue-rbac")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// kustomize takes a base outside its root only through a relative path.
	link := filepath.Join(dir, "rbac")
	_ = os.Remove(link)
	if err := os.Symlink(filepath.Join(s.modules["sigs.k8s.io/kueue"], "config", "components", "rbac"), link); err != nil {
		return "", err
	}
	kustomization := "namespace: kueue-system\nnamePrefix: kueue-\nresources:\n- rbac\n"
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		return "", err
	}
	if _, err := s.Kubectl("apply", "--server-side", "-k", dir); err != nil {
		return "", err
	}
	return s.serviceAccountKubeconfig(ctx, "kueue-system", "kueue-controller-manager")
}

// restartable is a component a test may kill and start again, by pid, with the flags it first ran
// with: "kueue" and "crossplane".
type restartable struct {
	name, bin string
	args, env []string
	// ready passes once the component serves.
	ready   func() error
	process *process
}

// launch starts a restartable component, appending to its log after the first start, and waits
// until it is ready.
func (s *Stack) launch(ctx context.Context, r *restartable) error {
	logMode := os.O_TRUNC
	if r.process != nil {
		logMode = os.O_APPEND
	}
	p, err := s.spawn(r.name, logMode, r.bin, r.args, r.env)
	if err != nil {
		return err
	}
	r.process = p
	if s.restartables == nil {
		s.restartables = map[string]*restartable{}
	}
	s.restartables[r.name] = r
	return waitFor(ctx, p, 60*time.Second, r.name, r.ready)
}

// KillComponent ends a restartable component ("kueue", "crossplane") with SIGKILL to its process
// group, as a crashed or evicted Pod ends: no cleanup, no lease or lock released.
func (s *Stack) KillComponent(name string) error {
	r := s.restartables[name]
	if r == nil {
		return fmt.Errorf("the stack runs no restartable component %s", name)
	}
	r.process.kill()
	return nil
}

// StartComponent starts a killed component again with the same flags and waits until it is ready;
// its output goes on in the same log.
func (s *Stack) StartComponent(ctx context.Context, name string) error {
	r := s.restartables[name]
	if r == nil {
		return fmt.Errorf("the stack runs no restartable component %s", name)
	}
	if r.process.exited() == nil {
		return fmt.Errorf("%s is running", name)
	}
	return s.launch(ctx, r)
}

func copyServingCert(from, to string) error {
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"tls.crt", "tls.key"} {
		b, err := os.ReadFile(filepath.Join(from, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, f), b, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// function is one Function the Compositions call, and where it listens.
type function struct {
	name, address string
	bin           string
	args, env     []string
	process       *process
	starts        int
}

// functions the stack registered, in startFunctions.
func (s *Stack) startFunctions(ctx context.Context) error {
	ca, err := newAuthority()
	if err != nil {
		return err
	}
	s.ca = ca
	certs := filepath.Join(s.Dir, "certs")
	if err := ca.issue(filepath.Join(certs, "crossplane"), "crossplane", 2); err != nil {
		return err
	}
	if err := ca.issue(filepath.Join(certs, "functions"), "functions", 3); err != nil {
		return err
	}

	// Each function runs as the process its package's runtime image would run, built from this
	// checkout; the stack's External runtime publishes it as the Function revision's endpoint.
	here, err := packageDir()
	if err != nil {
		return err
	}
	for _, name := range compositionFunctions() {
		cmd, built := functions.Commands[name]
		if !built {
			return fmt.Errorf("a Composition calls the Function %s, which no command of this checkout serves", name)
		}
		bin := filepath.Join(s.Dir, name)
		build := exec.Command("go", "build", "-o", bin, cmd)
		build.Dir = here
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", cmd, err, out)
		}
		port, err := freePort()
		if err != nil {
			return err
		}
		address := "127.0.0.1:" + strconv.Itoa(port)
		profile, err := s.profileFlag(name, "--pprof-address")
		if err != nil {
			return err
		}
		fn := &function{name: name, address: address, bin: bin, args: append([]string{"--address=" + address, "--metrics-address=", "--debug"}, profile...),
			env: []string{"TLS_SERVER_CERTS_DIR=" + filepath.Join(certs, "functions")}}
		if err := s.launchFunction(ctx, fn); err != nil {
			return err
		}
		s.functions = append(s.functions, fn)
	}
	return nil
}

// ServeFunction runs a Function of another publisher, built by build.sh as name-version, as the
// process its runtime image would run, on the certificates mdplane's functions serve with; the
// External runtime publishes its endpoint on every revision of the Function package pkg (the name
// Crossplane gives it: crossplane-contrib-function-patch-and-transform for
// xpkg.crossplane.io/crossplane-contrib/function-patch-and-transform).
func (s *Stack) ServeFunction(ctx context.Context, pkg, name, version string) error {
	if _, running := s.served.Load(pkg); running {
		return nil
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	address := "127.0.0.1:" + strconv.Itoa(port)
	fn := &function{name: pkg, address: address, bin: s.binary(name, version), args: []string{"--address=" + address},
		env: []string{"TLS_SERVER_CERTS_DIR=" + filepath.Join(s.Dir, "certs", "functions")}}
	if err := s.launchFunction(ctx, fn); err != nil {
		return err
	}
	s.served.Store(pkg, address)
	return nil
}

// RegistryCA is the file of the CA bundle the stack's registry is trusted through (Crossplane's
// --ca-bundle-path), for a client such as the Crossplane CLI to push with (SSL_CERT_FILE).
func (s *Stack) RegistryCA() string { return filepath.Join(s.Dir, "certs", "registry-ca.crt") }

// launchFunction starts a function's process on its address and waits until it listens.
func (s *Stack) launchFunction(ctx context.Context, fn *function) error {
	fn.starts++
	name := fn.name
	if fn.starts > 1 {
		name += "-" + strconv.Itoa(fn.starts)
	}
	p, err := s.run(name, fn.bin, fn.args, fn.env...)
	if err != nil {
		return err
	}
	fn.process = p
	return waitFor(ctx, p, 30*time.Second, name, tcpOpen(fn.address))
}

// KillFunction ends a composition function's process with SIGKILL, as a crashed function Pod ends:
// Crossplane's calls to it fail until StartFunction.
func (s *Stack) KillFunction(name string) error {
	for _, fn := range s.functions {
		if fn.name == name {
			fn.process.kill()
			return nil
		}
	}
	return fmt.Errorf("the stack runs no function %s", name)
}

// FunctionNames are the Functions the stack runs, by the names KillFunction takes.
func (s *Stack) FunctionNames() []string {
	names := make([]string, 0, len(s.functions))
	for _, fn := range s.functions {
		names = append(names, fn.name)
	}
	return names
}

// StartFunction starts a killed function again, on the address its revision publishes.
func (s *Stack) StartFunction(ctx context.Context, name string) error {
	for _, fn := range s.functions {
		if fn.name == name {
			return s.launchFunction(ctx, fn)
		}
	}
	return fmt.Errorf("the stack runs no function %s", name)
}

// compositionFunctions are the Function names every Composition of the package calls.
func compositionFunctions() []string {
	seen := map[string]bool{}
	var names []string
	files, _ := fs.Glob(manifests.FS, "compositions/*.yaml")
	for _, f := range files {
		raw, _ := fs.ReadFile(manifests.FS, f)
		var c struct {
			Spec struct {
				Pipeline []struct {
					FunctionRef struct{ Name string } `json:"functionRef"`
				} `json:"pipeline"`
			} `json:"spec"`
		}
		if yaml.Unmarshal(raw, &c) != nil {
			continue
		}
		for _, step := range c.Spec.Pipeline {
			if !seen[step.FunctionRef.Name] {
				seen[step.FunctionRef.Name] = true
				names = append(names, step.FunctionRef.Name)
			}
		}
	}
	return names
}

// userKubeconfig writes a kubeconfig of a client certificate for user in group system:masters: the
// name admission sees, with every right (standing in for the ClusterRoles a cluster grants the
// component: Deviations lists where), and returns its path.
func (s *Stack) userKubeconfig(file, user string) (string, error) {
	u, err := s.env.AddUser(envtest.User{Name: user, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	raw, err := u.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, "config", file+".kubeconfig")
	return path, os.WriteFile(path, raw, 0o600)
}

// ConfigAs is a client configuration that authenticates as a ServiceAccount the stack runs a
// component as, by its user name (CrossplaneUser, ControllersUser), with a token of that account:
// a test acting as Crossplane has exactly the rights the stack's Crossplane has.
func (s *Stack) ConfigAs(ctx context.Context, user string) (*rest.Config, error) {
	qualified, ok := strings.CutPrefix(user, "system:serviceaccount:")
	namespace, account, found := strings.Cut(qualified, ":")
	if !ok || !found {
		return nil, fmt.Errorf("%s is not a ServiceAccount's user name", user)
	}
	path, err := s.serviceAccountKubeconfig(ctx, namespace, account)
	if err != nil {
		return nil, err
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// startCrossplane runs Crossplane core with the External package runtime (the stack serves the
// Function revisions, see install), trusting the stack's CA for package registries.
func (s *Stack) startCrossplane(ctx context.Context) error {
	lock := &unstructured.Unstructured{}
	lock.SetAPIVersion("pkg.crossplane.io/v1beta1")
	lock.SetKind("Lock")
	lock.SetName("lock")
	if err := s.Client.Create(ctx, lock); err != nil {
		return err
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	metrics, err := freePort()
	if err != nil {
		return err
	}
	bundle := s.RegistryCA()
	if err := os.WriteFile(bundle, s.ca.pem, 0o644); err != nil {
		return err
	}
	// As the chart installs it: its own ServiceAccount with the chart's ClusterRoles, and the RBAC
	// manager granting it each XRD's kind.
	kubeconfig, rbacManager, err := s.installCrossplaneRBAC(ctx)
	if err != nil {
		return err
	}
	if err := s.startRBACManager(ctx, rbacManager); err != nil {
		return err
	}
	// The package manager stores what it pulls here; a missing directory fails every parse.
	cache := filepath.Join(s.Dir, "crossplane-cache")
	for _, d := range []string{"xpkg", "xfn"} {
		if err := os.MkdirAll(filepath.Join(cache, d), 0o755); err != nil {
			return err
		}
	}
	// The flags are the chart's settings (it passes them as env and mounts) and Deviations'.
	return s.launch(ctx, &restartable{name: "crossplane", bin: s.binary("crossplane", CrossplaneVersion), args: append([]string{
		"core", "start",
		"--tls-client-certs-dir=" + filepath.Join(s.Dir, "certs", "crossplane"), "--ca-bundle-path=" + bundle,
		"--xpkg-cache-dir=" + filepath.Join(cache, "xpkg"), "--xfn-cache-dir=" + filepath.Join(cache, "xfn"),
		"--metrics-port=" + strconv.Itoa(metrics), "--health-probe-port=" + strconv.Itoa(health),
	}, deviationFlags("crossplane", s.opts)...), env: []string{"KUBECONFIG=" + kubeconfig, "POD_NAMESPACE=" + CrossplaneNamespace,
		"POD_SERVICE_ACCOUNT=" + crossplaneAccount},
		ready: httpOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))})
}

// compositesServed passes once Crossplane serves every composite kind of the Configuration as an
// established CRD.
func (s *Stack) compositesServed() error {
	for _, name := range []string{"modeldeployments.worker.gpustack.ai", "modelroles.internal.mdplane.io"} {
		crd := &extv1.CustomResourceDefinition{}
		if err := s.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		established := false
		for _, c := range crd.Status.Conditions {
			established = established || c.Type == extv1.Established && c.Status == extv1.ConditionTrue
		}
		if !established {
			return fmt.Errorf("CRD %s not established", name)
		}
	}
	return nil
}

// controllers is how mdplane-controllers was started, so a test can kill it and start it again.
type controllers struct {
	bin     string
	args    []string
	health  int
	process *process
	starts  int
	// slot is the process's slot in the metrics API balancer.
	slot int
	// standby is a second replica, when a test started one.
	standby *replica
}

// replica is one running mdplane-controllers, its health port, its flags and its slot in the
// metrics API balancer.
type replica struct {
	process *process
	health  int
	args    []string
	slot    int
}

// StartControllers starts mdplane-controllers (again, after KillControllers) with the same flags and
// waits until it is ready.
func (s *Stack) StartControllers(ctx context.Context) error {
	if err := s.launchControllers(); err != nil {
		return err
	}
	if err := s.controllersReady(ctx); err != nil {
		return err
	}
	s.metricsAPI.set(s.controllers.slot, metricsAPIAddress(s.controllers.args))
	return nil
}

// metricsAPIAddress is the --metrics-api-bind-address of a replica's flags.
func metricsAPIAddress(args []string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--metrics-api-bind-address="); ok {
			return v
		}
	}
	return ""
}

// ControllersMetricsURL is the metrics endpoint of the stack's mdplane-controllers: the one it
// started, or the standby that took over when a test killed the leader.
func (s *Stack) ControllersMetricsURL() string {
	for _, a := range s.controllers.args {
		if address, ok := strings.CutPrefix(a, "--metrics-bind-address="); ok {
			return "http://" + address + "/metrics"
		}
	}
	return ""
}

func (s *Stack) launchControllers() error {
	s.controllers.starts++
	name := "mdplane-controllers"
	if s.controllers.starts > 1 {
		name += "-" + strconv.Itoa(s.controllers.starts)
	}
	p, err := s.run(name, s.controllers.bin, s.controllers.args)
	s.controllers.process = p
	return err
}

func (s *Stack) controllersReady(ctx context.Context) error {
	p := s.controllers.process
	return waitFor(ctx, p, 60*time.Second, p.name, httpOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", s.controllers.health)))
}

// KillControllers ends mdplane-controllers with SIGKILL, as a crashed or evicted operator ends: no
// cleanup, no graceful shutdown.
func (s *Stack) KillControllers() {
	p := s.controllers.process
	if p == nil {
		return
	}
	p.kill()
	s.metricsAPI.set(s.controllers.slot, "")
}

// StartStandbyControllers starts a second mdplane-controllers, as a Deployment of two replicas runs
// it: the same flags but its own loopback ports, electing a leader with the first. It returns once
// the standby is ready (a replica reports ready while it stands by).
func (s *Stack) StartStandbyControllers(ctx context.Context) error {
	if s.controllers.standby != nil {
		return errors.New("a standby mdplane-controllers runs already")
	}
	health, err := freePort()
	if err != nil {
		return err
	}
	metricsAPI, err := freePort()
	if err != nil {
		return err
	}
	args := withFlag(s.controllers.args, "--health-probe-bind-address", "127.0.0.1:"+strconv.Itoa(health))
	args = withFlag(args, "--metrics-api-bind-address", "127.0.0.1:"+strconv.Itoa(metricsAPI))
	metrics, err := freePort()
	if err != nil {
		return err
	}
	args = withFlag(args, "--metrics-bind-address", "127.0.0.1:"+strconv.Itoa(metrics))
	slot := 1 - s.controllers.slot
	args = withFlag(args, "--pprof-bind-address", "")
	s.controllers.starts++
	p, err := s.run("mdplane-controllers-standby-"+strconv.Itoa(s.controllers.starts), s.controllers.bin, args)
	if err != nil {
		return err
	}
	s.controllers.standby = &replica{process: p, health: health, args: args, slot: slot}
	if err := waitFor(ctx, p, 60*time.Second, p.name, httpOK(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))); err != nil {
		return err
	}
	s.metricsAPI.set(slot, "127.0.0.1:"+strconv.Itoa(metricsAPI))
	return nil
}

// KillLeaderControllers kills, with SIGKILL, whichever of the two mdplane-controllers holds the
// leader lease (the one whose log says it acquired it), and makes the other the stack's
// mdplane-controllers. It returns the name of the process killed.
func (s *Stack) KillLeaderControllers() (string, error) {
	standby := s.controllers.standby
	if standby == nil {
		return "", errors.New("no standby mdplane-controllers: StartStandbyControllers first")
	}
	primary := &replica{process: s.controllers.process, health: s.controllers.health, args: s.controllers.args, slot: s.controllers.slot}
	leader, other := primary, standby
	switch {
	case s.leads(standby.process) && !s.leads(primary.process):
		leader, other = standby, primary
	case !s.leads(primary.process):
		return "", errors.New("neither mdplane-controllers has acquired the leader lease yet")
	}
	leader.process.kill()
	s.metricsAPI.set(leader.slot, "")
	s.controllers.process, s.controllers.health, s.controllers.args, s.controllers.slot, s.controllers.standby = other.process, other.health, other.args, other.slot, nil
	return leader.process.name, nil
}

// Leads reports whether the stack's mdplane-controllers has acquired the leader lease.
func (s *Stack) Leads() bool { return s.leads(s.controllers.process) }

func (s *Stack) leads(p *process) bool {
	raw, err := os.ReadFile(s.LogFile(p.name))
	return err == nil && strings.Contains(string(raw), "Successfully acquired lease")
}

// withFlag sets a flag's value in args, or removes the flag when value is empty.
func withFlag(args []string, flag, value string) []string {
	out := make([]string, 0, len(args)+1)
	for _, a := range args {
		if a != flag && !strings.HasPrefix(a, flag+"=") {
			out = append(out, a)
		}
	}
	if value != "" {
		out = append(out, flag+"="+value)
	}
	return out
}
