package cluster

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	extv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	autoscalingv1 "k8s.io/autoscaler/cluster-autoscaler/apis/provisioningrequest/autoscaling.x-k8s.io/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	manifests "github.com/mdplane/mdplane/package"
)

// Scheme knows every kind the stack serves that has Go types.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, extv1.AddToScheme, kueuev1beta2.AddToScheme, autoscalingv1.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// autoscalerAPIs is cluster-autoscaler's API module, the source of the ProvisioningRequest CRD, at
// the version Kueue requires.
const autoscalerAPIs = "k8s.io/autoscaler/cluster-autoscaler/apis"

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
			// cluster-autoscaler's ProvisioningRequest, installed before Kueue starts: Kueue runs its
			// ProvisioningRequest admission check only when the API exists at its start.
			filepath.Join(s.modules[autoscalerAPIs], "config", "crd"),
		},
	}
	// Kueue serves its webhooks here, started a while after the API server and restarted by tests.
	webhookPort, err := freePort()
	if err != nil {
		return err
	}
	s.env.WebhookInstallOptions = envtest.WebhookInstallOptions{
		Paths:            []string{filepath.Join(kueue, "config", "components", "webhook", "manifests.yaml")},
		LocalServingHost: "127.0.0.1",
		LocalServingPort: webhookPort,
	}
	if err := s.configureAPIServer(); err != nil {
		return err
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
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kueue-system"}}); err != nil {
		return err
	}
	// The system namespaces' Pods run on the real node (Deviations says why), by the
	// PodNodeSelector admission plugin's annotation; mdplane-system is made here so that its Pods
	// have it from the first, and the install manifest's apply adds its own labels.
	for _, ns := range systemNamespaces {
		namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(namespace), namespace)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		metav1.SetMetaDataAnnotation(&namespace.ObjectMeta, "scheduler.alpha.kubernetes.io/node-selector", corev1.LabelHostname+"="+RealNodeName)
		if namespace.ResourceVersion == "" {
			err = s.Client.Create(ctx, namespace)
		} else {
			err = s.Client.Update(ctx, namespace)
		}
		if err != nil {
			return err
		}
	}
	// What kubeadm grants the API server's own client of the kubelets (logs, exec, port-forward).
	return s.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver-kubelet-client"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClient}}})
}

// kubeletClient is the user the API server authenticates to the kubelets as.
const kubeletClient = "kube-apiserver-kubelet-client"

// configureServing makes the API server reachable from the real node's Pods as a cluster's is: it
// listens on every address and advertises the machine's own as the endpoint of the kubernetes
// Service, with a serving certificate of the stack's CA for that address and the Service's names;
// it authorizes the node's kubelet through the Node authorizer and NodeRestriction, mounts every Pod
// its ServiceAccount's token (the ServiceAccount admission plugin envtest turns off), and reaches
// the kubelet with a client certificate of its own.
func (s *Stack) configureServing() error {
	var err error
	if s.ca, err = newAuthority(); err != nil {
		return err
	}
	if _, s.hostIP, err = machineAddress(); err != nil {
		return err
	}
	dir := filepath.Join(s.Dir, "certs", "apiserver")
	if err := s.ca.issue(dir, "kube-apiserver", 10, s.hostIP, firstServiceIP, "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc."+ClusterDomain); err != nil {
		return err
	}
	signer := filepath.Join(s.Dir, "certs", "service-accounts")
	if err := s.ca.issue(signer, "service-account-signer", 11); err != nil {
		return err
	}
	kubelet := filepath.Join(s.Dir, "certs", kubeletClient)
	if err := s.ca.issue(kubelet, kubeletClient, 12); err != nil {
		return err
	}
	for from, to := range map[string]string{
		filepath.Join(dir, "tls.crt"): "apiserver.crt", filepath.Join(dir, "tls.key"): "apiserver.key",
		filepath.Join(signer, "tls.crt"): "sa-signer.crt", filepath.Join(signer, "tls.key"): "sa-signer.key",
	} {
		raw, err := os.ReadFile(from)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, to), raw, 0o600); err != nil {
			return err
		}
	}
	api := s.env.ControlPlane.GetAPIServer()
	// envtest keeps a serving certificate it finds in its directory, and its clients trust CA.
	api.CertDir = dir
	api.CA = s.ca.pem
	args := api.Configure()
	args.Set("bind-address", "0.0.0.0")
	args.Set("advertise-address", s.hostIP)
	args.Set("service-cluster-ip-range", ServiceCIDR)
	args.Set("authorization-mode", "Node,RBAC")
	args.Set("enable-admission-plugins", "NodeRestriction,PodNodeSelector")
	args.Disable("disable-admission-plugins")
	args.Set("kubelet-client-certificate", filepath.Join(kubelet, "tls.crt"))
	args.Set("kubelet-client-key", filepath.Join(kubelet, "tls.key"))
	args.Set("kubelet-preferred-address-types", "InternalIP")
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

// configureAPIServer sets the API server's serving, aggregation, audit (when asked for) and log.
func (s *Stack) configureAPIServer() error {
	if err := s.configureServing(); err != nil {
		return err
	}
	if err := s.configureAggregation(); err != nil {
		return err
	}
	if s.opts.Audit {
		if err := s.configureAudit(); err != nil {
			return err
		}
	}
	return s.keepAPIServerLog()
}

// keepAPIServerLog writes the API server's log beside the other components' at -v=1, where it names
// each watch it closes because the client took its events too slowly (the watch's buffer full):
// on a loaded stack that happens to the controllers' and KWOK's watches alike, and each client then
// watches or lists again.
func (s *Stack) keepAPIServerLog() error {
	log, err := os.OpenFile(s.LogFile("kube-apiserver"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	s.stops = append(s.stops, func() { _ = log.Close() })
	api := s.env.ControlPlane.GetAPIServer()
	api.Out, api.Err = log, log
	api.Configure().Set("v", "1")
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
// Deployment and ReplicaSet controllers, which run the routers' Deployments, the Job controller,
// which runs the batch Jobs a cohort's batch queue admits beside mdplane's, and the
// PersistentVolume binder, which binds a claim to its volume (a claim-delivered ModelArtifact's
// deployment waits for a Bound claim), the volume and claim protection controllers, which release
// the finalizers the API server puts on both once nothing uses them, and for the real node's Pods
// the ServiceAccount and root CA publishers, Pod garbage collection and taint eviction (the list
// is Deviations').
//
// It runs as a cluster's does (kubeadm's flags): as system:kube-controller-manager, with the
// bootstrap ClusterRole of that name alone, and each controller as its own ServiceAccount in
// kube-system (--use-service-account-credentials) with its bootstrap role system:controller:<name>,
// the identities mdplane's internal-objects policy lets delete what the garbage collector and the
// namespace controller delete.
func (s *Stack) startControllerManager(ctx context.Context) error {
	kubeconfig, err := s.identityKubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	// The CA the Pods' ServiceAccount volumes carry (kube-root-ca.crt): the one of the API server's
	// serving certificate.
	rootCA := filepath.Join(s.Dir, "certs", "apiserver", "ca.crt")
	return s.serveSecurely(ctx, "kube-controller-manager", s.binary("kube-controller-manager", KubernetesVersion), kubeconfig,
		append([]string{"--root-ca-file=" + rootCA}, deviationFlags("kube-controller-manager", s.opts)...))
}

// startScheduler runs kube-scheduler as system:kube-scheduler, with the bootstrap ClusterRoles a
// cluster binds that name to (system:kube-scheduler, system:volume-scheduler).
func (s *Stack) startScheduler(ctx context.Context) error {
	kubeconfig, err := s.identityKubeconfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	return s.serveSecurely(ctx, "kube-scheduler", s.binary("kube-scheduler", KubernetesVersion), kubeconfig, nil)
}

// Fake nodes: KWOK plays kubelet for them and their Pods. Each of the stack's own nodes has a KWOK of
// its own, as each node has its own kubelet watching its own Pods (kwokNodeLabel=kwokOwnNode); the
// nodes a test adds share one KWOK, which manages the nodes labelled kwokNodeLabel=kwokSharedNode.
const (
	kwokNodeLabel  = "kwok.x-k8s.io/node"
	kwokSharedNode = "fake"
	kwokOwnNode    = "own"
	// GPUsPerNode is how many nvidia.com/gpu each fake node advertises unless Options say otherwise.
	GPUsPerNode = 8
	// RackLabel is the topology label each fake node carries; there is one rack per two nodes.
	RackLabel = "topology.gpustack.ai/rack"
	// PoolLabel=PoolStack marks the stack's own fake nodes (gpu-node-<i>), not the nodes a test
	// adds (AddNode): a flavor selecting it keeps its Pods off the nodes a test counts as its own.
	PoolLabel = "mdplane.test/pool"
	PoolStack = "stack"
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

// kwokOptions is KWOK's configuration, formatted with how many Pod stages it plays at once; every
// other option is at KWOK's own default, which a configuration given to KWOK does not get by itself.
const kwokOptions = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: %d
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enableDebuggingHandlers: true
  enableProfilingHandler: true
  enableContentionProfiling: false
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
  manageAllNodes: false
`

// Pod stages played at once: a node's own KWOK writes its Pods' status one at a time, as a
// kubelet's status manager does; the shared KWOK, standing in for the kubelets of every node the
// tests add, at KWOK's own default.
const (
	kwokOwnNodeWorkers = 1
	kwokSharedWorkers  = 4
)

// maxStackNodes is how many of the stack's own nodes the lower half of FakePodCIDR has a /23 for,
// and maxPodsPerStackNode how many Pod addresses a /23 holds.
const (
	maxStackNodes       = 64
	maxPodsPerStackNode = 510
)

// stackNodePodCIDR is the stack's node i's Pod range, a /23 of FakePodCIDR's lower half: its KWOK
// gives its Pods their addresses from it, so no two Pods of the stack share one.
func stackNodePodCIDR(i int) string {
	return fmt.Sprintf("10.245.%d.0/23", 2*i)
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

// CompleteDelayAnnotation is KWOK's own annotation of the delay before a Job's Pod completes ("1h"):
// without it a Job's Pod on a fake node succeeds as soon as it runs, and a test that needs a Job to
// hold its quota (a cohort's borrower) sets it.
const CompleteDelayAnnotation = "pod-complete.stage.kwok.x-k8s.io/delay"

// completeDelay is the delay of the pod-complete stage: none, unless the Pod is annotated.
const completeDelay = `  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["` + CompleteDelayAnnotation + `"]'
`

func (s *Stack) startKWOK(ctx context.Context) error {
	if s.opts.Nodes > maxStackNodes || s.opts.PodsPerNode > maxPodsPerStackNode {
		return fmt.Errorf("the stack holds at most %d nodes of at most %d Pods each (asked %d of %d): each node has a /23 of %s's lower half",
			maxStackNodes, maxPodsPerStackNode, s.opts.Nodes, s.opts.PodsPerNode, FakePodCIDR)
	}
	shared, err := s.writeKWOKConfig("kwok-shared.yaml", kwokSharedWorkers)
	if err != nil {
		return err
	}
	own, err := s.writeKWOKConfig("kwok-own-node.yaml", kwokOwnNodeWorkers)
	if err != nil {
		return err
	}
	wait, err := s.runKWOK("kwok", shared, "--manage-nodes-with-label-selector="+kwokNodeLabel+"="+kwokSharedNode,
		"--cidr="+addedNodesPodCIDR)
	if err != nil {
		return err
	}
	waits := []func(context.Context) error{wait}
	for i := range s.opts.Nodes {
		wait, err := s.runKWOK("kwok-"+fakeNodeName(i), own, "--manage-single-node="+fakeNodeName(i),
			"--cidr="+stackNodePodCIDR(i))
		if err != nil {
			return err
		}
		waits = append(waits, wait)
	}
	for _, wait := range waits {
		if err := wait(ctx); err != nil {
			return err
		}
	}
	for i := range s.opts.Nodes {
		if err := s.Client.Create(ctx, s.fakeNode(i)); err != nil {
			return err
		}
	}
	return waitFor(ctx, nil, 60*time.Second, "fake nodes", func() error {
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

// writeKWOKConfig writes a KWOK configuration of the stages every KWOK plays, read from KWOK's
// module with the stack's delays, and its options with workers Pod stages played at once, to name
// under the stack's config directory, and returns its path.
func (s *Stack) writeKWOKConfig(name string, workers int) (string, error) {
	var docs []string
	for _, stage := range kwokStages {
		b, err := os.ReadFile(filepath.Join(s.modules["sigs.k8s.io/kwok"], stage))
		if err != nil {
			return "", err
		}
		doc := string(b)
		for suffix, delay := range map[string]string{"/pod-ready.yaml": readyDelay, "/pod-complete.yaml": completeDelay} {
			if !strings.HasSuffix(stage, suffix) {
				continue
			}
			if !strings.Contains(doc, "\n  next:") {
				return "", fmt.Errorf("KWOK's %s has no next: a delay cannot be added", stage)
			}
			doc = strings.Replace(doc, "\n  next:", "\n"+delay+"  next:", 1)
		}
		docs = append(docs, doc)
	}
	path := filepath.Join(s.Dir, "config", name)
	docs = append(docs, fmt.Sprintf(kwokOptions, workers))
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o644)
}

// runKWOK starts a KWOK with config and args besides the stack's own, logging as name, and returns
// a wait for its health.
func (s *Stack) runKWOK(name, config string, args ...string) (func(context.Context) error, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := s.run(name, s.binary("kwok", KWOKVersion), append([]string{
		"--kubeconfig=" + s.Kubeconfig, "--config=" + config,
		"--server-address=127.0.0.1:" + strconv.Itoa(port), "--node-ip=127.0.0.1",
		"--node-lease-duration-seconds=" + strconv.Itoa(kwokNodeLease),
	}, args...))
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		return waitFor(ctx, p, 30*time.Second, name, httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", port)))
	}, nil
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

// PodsReadyTimeout is the stack's Kueue waitForPodsReady timeout (its recoveryTimeout defaults to
// the same): a group's Pods must all be Ready within it of admission, or Kueue evicts the group.
const PodsReadyTimeout = 2 * time.Minute

// kueueConfiguration is the Configuration Kueue's release installs (its manifests' and chart's
// controller_manager_config.yaml: the controllers' concurrency, the client limit) with only what the
// loopback stack needs changed: health, webhook and certificates on loopback, no metrics, no leader
// election, and only the integrations the stack has the kinds of. A Configuration written from
// scratch would run Kueue's Workload controller one reconcile at a time, where an installed Kueue
// runs five.
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
	// The Pod integration docs/install.md asks for, and the release's batch/job, which the cluster's
	// batch queues beside mdplane's (a cohort's borrowers) admit Jobs through.
	config["integrations"] = map[string]any{"frameworks": []string{"batch/job", "pod"}}
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
	// waitForPodsReady, which the release leaves commented out and newer Kueue releases turn on:
	// every test runs under it, and TestAnEngineSlowerThanThePodsReadyTimeoutBacksOff outlasts it.
	timeout := PodsReadyTimeout
	if opts.PodsReadyTimeout > 0 {
		timeout = opts.PodsReadyTimeout
	}
	config["waitForPodsReady"] = map[string]any{"timeout": timeout.String()}
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
// with: "kueue".
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

// ConfigAs is a client configuration that authenticates as a ServiceAccount the stack runs a
// component as, by its user name (CrossplaneUser, ControllersUser), with a token of that account:
// a test acting as Crossplane has exactly the rights the stack's Crossplane has.
func (s *Stack) ConfigAs(ctx context.Context, user string) (*rest.Config, error) {
	qualified, ok := strings.CutPrefix(user, "system:serviceaccount:")
	namespace, account, found := strings.Cut(qualified, ":")
	if !ok || !found {
		return nil, fmt.Errorf("%s is not a ServiceAccount's user name", user)
	}
	// In memory: tests running at once each get their own token, and no file is shared.
	cfg, err := s.serviceAccountConfig(ctx, namespace, account)
	if err != nil {
		return nil, err
	}
	return clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
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
