package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The real node: one kubelet with containerd and runc, the CNI bridge, kube-proxy, and the cluster
// DNS as a Pod on it. Its Pods, the Services and the fake nodes' Pod addresses live in ranges that
// exist only on this machine; the guard table drops anything of theirs that would leave it.
const (
	// RealNodeName is the real node's name.
	RealNodeName = "real-node"
	// RealNodeProduct is the GPU product the real node is labelled with, as GPU feature discovery
	// would label it; no other node carries it, so the InstanceType of its accelerator group
	// (examples/on-the-stack.yaml) selects the real node alone.
	RealNodeProduct = "NVIDIA-T4"
	// RealNodeGPUs is how many nvidia.com/gpu the real node advertises.
	RealNodeGPUs = 8
	// PodCIDR is the real node's Pod range; ClusterCIDR holds it and the fake nodes' range.
	PodCIDR     = "10.244.0.0/24"
	ClusterCIDR = "10.244.0.0/15"
	// FakePodCIDR is where the fake nodes' Pods get their addresses: the stack's own nodes each
	// from a range of its own in the lower half (stackNodePodCIDR), the nodes a test adds from the
	// upper half (addedNodesPodCIDR), which their shared KWOK hands out.
	FakePodCIDR       = "10.245.0.0/16"
	addedNodesPodCIDR = "10.245.128.0/17"
	// ServiceCIDR is the Services' range; the API server's own Service takes its first address and
	// the cluster DNS DNSServiceIP.
	ServiceCIDR    = "10.96.0.0/16"
	firstServiceIP = "10.96.0.1"
	DNSServiceIP   = "10.96.0.10"
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"

	nodeBridge     = "mdplane0"
	cniNetwork     = "mdplane"
	nodeCgroupRoot = "/mdplane"
	guardTable     = "mdplane-guard"
	kubeletPort    = 10250
)

// nodePrograms are the tools the stack drives the node's network with, from Debian's packages
// (node-packages.sh installs them); the node's programs themselves are build.sh's (nodeBinaries).
var nodePrograms = []string{"nft", "ip", "iptables", "conntrack", "ldd"}

// nodeBinaries are the programs of the real node build.sh builds, by their path in its directory.
func nodeBinaries() []string {
	bins := []string{"kubelet-" + KubernetesVersion, "kube-proxy-" + KubernetesVersion, "containerd-" + ContainerdVersion,
		"containerd-shim-runc-v2-" + ContainerdVersion, "ctr-" + ContainerdVersion, "runc-" + RuncVersion}
	for _, plugin := range cniPlugins {
		bins = append(bins, filepath.Join(cniPluginsDir, plugin))
	}
	return bins
}

// cniPluginsDir is the directory of the CNI plugins build.sh builds, and cniPlugins the plugins.
var (
	cniPluginsDir = "cni-plugins-" + CNIPluginsVersion
	cniPlugins    = []string{"bridge", "host-local", "loopback", "portmap"}
)

// realNode is the stack's real node while it runs.
type realNode struct {
	dir string
	// ip is the machine's own address: the node's InternalIP, where Pods reach the API server and
	// the stack's registry.
	ip string
	// uplink is the interface of the machine's default route, which nothing of the stack's ranges
	// may leave by.
	uplink string
	lock   *nodeLock
	record *hostRecord
	// containerd is the socket of the node's containerd.
	containerd string
}

// checkNodePrograms fails with one line naming every program the real node needs that this
// machine lacks.
func checkNodePrograms(bin string) error {
	var missing []string
	for _, p := range nodePrograms {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	for _, p := range nodeBinaries() {
		if _, err := os.Stat(filepath.Join(bin, p)); err != nil {
			missing = append(missing, filepath.Join(bin, p))
		}
	}
	if os.Geteuid() != 0 {
		missing = append(missing, "root (the kubelet and containerd run as root)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the real node cannot start on this machine, it lacks: %s (test/cluster/build.sh builds the node's programs and installs the rest from Debian's packages)",
			strings.Join(missing, ", "))
	}
	return nil
}

// machineAddress is the interface of the machine's default route and its IPv4 address.
func machineAddress() (uplink, ip string, err error) {
	out, err := exec.Command("ip", "-4", "-o", "route", "show", "default").Output()
	if err != nil {
		return "", "", fmt.Errorf("reading the default route: %w", err)
	}
	fields := strings.Fields(string(out))
	for i := 0; i+1 < len(fields); i++ {
		if fields[i] == "dev" {
			uplink = fields[i+1]
		}
	}
	if uplink == "" {
		return "", "", errors.New("the machine has no IPv4 default route: the real node needs an address of its own that is not loopback")
	}
	iface, err := net.InterfaceByName(uplink)
	if err != nil {
		return "", "", err
	}
	addrs, err := iface.Addrs()
	if err != nil {
		return "", "", err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			return uplink, n.IP.String(), nil
		}
	}
	return "", "", fmt.Errorf("the interface %s of the default route has no IPv4 address", uplink)
}

// startRealNode takes the machine's real-node lock (waiting while another stack's node runs),
// puts right what a node that did not stop left, and starts containerd, the kubelet and kube-proxy
// behind the traffic guard. The node registers itself; the cluster DNS starts in startClusterDNS.
func (s *Stack) startRealNode(ctx context.Context) error {
	if err := checkNodePrograms(s.bin); err != nil {
		return err
	}
	n := &realNode{dir: filepath.Join(s.Dir, "node")}
	var err error
	if n.uplink, n.ip, err = machineAddress(); err != nil {
		return err
	}
	if n.lock, err = acquireNodeLock(ctx, s.Dir, s.opts.Log); err != nil {
		return err
	}
	s.node = n
	leftover, err := leftoverRecord()
	if err != nil {
		return err
	}
	if leftover != nil {
		s.opts.Log("putting right what the real node of the stack in %s left on this machine", leftover.Stack)
		if err := restoreHost(leftover); err != nil {
			return fmt.Errorf("the real node of the stack in %s left things this stack cannot remove: %w", leftover.Stack, err)
		}
	}
	_ = os.RemoveAll(n.dir)
	for _, d := range []string{"containerd", "kubelet", "pod-logs", "cni/net.d", "cni/ipam", "certs.d", "kube-proxy"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	n.containerd = filepath.Join(n.dir, "containerd", "containerd.sock")
	n.record = &hostRecord{Stack: s.Dir, NodeDir: n.dir, Containerd: n.containerd, PodLogs: filepath.Join(n.dir, "pod-logs")}
	if err := recordHost(n.record); err != nil {
		return err
	}
	if err := n.guard(); err != nil {
		return err
	}
	if err := n.cgroups(); err != nil {
		return err
	}
	if err := s.startContainerd(ctx); err != nil {
		return err
	}
	if err := s.startKubelet(ctx); err != nil {
		return err
	}
	return s.startKubeProxy(ctx)
}

// stopRealNode stops what startRealNode started (the stack stops its processes first), removes
// every container, mount, cgroup, interface and table the node made, puts the host's settings
// back, and releases the lock.
func (s *Stack) stopRealNode() {
	n := s.node
	if n == nil {
		return
	}
	if n.record != nil {
		if err := restoreHost(n.record); err != nil {
			s.opts.Log("the real node left something behind: %v", err)
		}
		s.leftovers = leftovers(n.record)
	}
	n.lock.release()
	s.node = nil
}

// Leftovers are what the stopped stack's real node left on this machine: nothing, once Stop put
// the machine back as the node found it.
func (s *Stack) Leftovers() []string { return s.leftovers }

// PutBackHost removes what the real node of a stack that died without stopping left on this
// machine, once no stack's node runs; a machine with nothing left is not touched.
func PutBackHost(ctx context.Context, log func(string, ...any)) error {
	lock, err := acquireNodeLock(ctx, "a clean-up", log)
	if err != nil {
		return err
	}
	defer lock.release()
	rec, err := leftoverRecord()
	if err != nil || rec == nil {
		return err
	}
	log("putting right what the real node of the stack in %s left on this machine", rec.Stack)
	return restoreHost(rec)
}

// guard installs the stack's own nftables table: nothing to or from the Pod, fake Pod and Service
// ranges leaves by the uplink, nor anything the machine forwards. It sits in the postrouting hook,
// where the route after kube-proxy's translation is known (in the output hook a packet still shows
// the route chosen before its Service address was translated).
func (n *realNode) guard() error {
	ranges := strings.Join([]string{ClusterCIDR, ServiceCIDR}, ", ")
	rules := fmt.Sprintf(`table inet %[1]s {
	chain postrouting {
		type filter hook postrouting priority 0; policy accept;
		oifname %[2]q ip saddr { %[3]s } drop
		oifname %[2]q ip daddr { %[3]s } drop
	}
	chain forward {
		type filter hook forward priority 0; policy accept;
		oifname %[2]q drop
	}
}
`, guardTable, n.uplink, ranges)
	return nft(rules)
}

// nft applies an nftables script.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s\n%s", err, out, script)
	}
	return nil
}

// nodeCPUShares is the CPU weight of the node's cgroup root, in cgroup v1 shares (cgroup v2's
// cpu.weight is a hundredth of the shares of a thread of the root cgroup, 1024): four busy
// processes' worth. The stack's own programs (API server, etcd, Kueue, KWOK, the scheduler and the
// controller manager) run as processes of the root cgroup, where each busy one weighs a full
// 1024 against the whole node's; at the default weight, every Pod of the node together (mdplane's
// controllers and webhooks, Crossplane, the engines) got about as much CPU as one of those
// processes when the machine was busy, where on a cluster the control plane and a worker are
// machines of their own. Four processes' worth splits a loaded machine about evenly between them.
const nodeCPUShares = 4 * 1024

// cgroups makes the node's cgroup root in every hierarchy, as the kubelet's cgroupRoot must exist;
// a new cpuset gets its parent's CPUs and memory nodes, without which nothing can join it; the cpu
// controller's weight is nodeCPUShares.
func (n *realNode) cgroups() error {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return err
	}
	for _, e := range entries {
		parent := "/sys/fs/cgroup/" + e.Name()
		if _, err := os.Stat(filepath.Join(parent, "cgroup.procs")); err != nil {
			continue
		}
		dir := parent + nodeCgroupRoot
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("making the node's cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return err
				}
			}
		}
		for f, v := range map[string]int{"cpu.shares": nodeCPUShares, "cpu.weight": nodeCPUShares * 100 / 1024} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(strconv.Itoa(v)), 0o644); err != nil {
					return fmt.Errorf("weighing the node's cgroup %s: %w", dir, err)
				}
			}
		}
	}
	return nil
}

// containerdConfig is the node's containerd configuration: its state under the stack's directory,
// CRI with cgroupfs, the stack's pause image, every container's oom_score_adj kept at or above 0
// (in a container whose capability bounding set lacks CAP_SYS_RESOURCE, as the development and CI
// machines are, a sandbox with a negative score fails to start), the shim, runc and CNI plugins build.sh built, the node's CNI
// configuration, and registry hosts that send every pull to the stack's registry.
const containerdConfig = `version = 3
root = "{{.Dir}}/containerd/root"
state = "{{.Dir}}/containerd/state"

[grpc]
  address = "{{.Socket}}"

[ttrpc]
  address = "{{.Socket}}.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{{.Pause}}"
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{{.Dir}}/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_unprivileged_ports = true
  enable_unprivileged_icmp = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "{{.Shim}}"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "{{.Runc}}"
        Root = "{{.Dir}}/containerd/runc"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{{.CNIBin}}"]
    conf_dir = "{{.Dir}}/cni/net.d"
`

// cniConfig is the node's Pod network: a bridge with host-local addresses from PodCIDR, the
// bridge's address as the gateway to the Service range, the other Pod ranges and the machine
// itself, and no default route: a Pod reaches nothing outside this machine.
const cniConfig = `{
  "cniVersion": "0.4.0",
  "name": "{{.Network}}",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "{{.Bridge}}",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "{{.Dir}}/cni/ipam",
        "ranges": [[{"subnet": "{{.PodCIDR}}"}]],
        "routes": [{"dst": "{{.ClusterCIDR}}"}, {"dst": "{{.ServiceCIDR}}"}, {"dst": "{{.IP}}/32"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// registryHosts sends pulls of a registry host to the stack's registry, trusting the stack's CA.
// Without a server line containerd would fall back to the host itself, off this machine.
const registryHosts = `server = "https://{{.Registry}}"

[host."https://{{.Registry}}"]
  capabilities = ["pull", "resolve"]
  ca = "{{.CA}}"
`

// MirroredRegistries are the registry hosts whose images the node pulls from the stack's registry,
// under the same repository paths: mdplane's releases, Crossplane's, and the stack's own images.
var MirroredRegistries = []string{"ghcr.io", "xpkg.crossplane.io", StackImages}

// StackImages is the registry host of the images the stack builds for the node (the pause
// container, the cluster DNS, the engine stand-in): a name that exists only on the stack.
const StackImages = "stack.mdplane.test"

func render(tpl string, data any) (string, error) {
	t, err := template.New("").Parse(tpl)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	err = t.Execute(&b, data)
	return b.String(), err
}

// startContainerd writes the node's containerd and CNI configuration and starts containerd. Its
// pulls reach the stack's registry alone: the registry hosts name it, and every other host goes
// through a proxy that does not exist.
func (s *Stack) startContainerd(ctx context.Context) error {
	n := s.node
	data := map[string]string{
		"Dir": n.dir, "Socket": n.containerd, "Pause": PauseImage, "Network": cniNetwork, "Bridge": nodeBridge,
		"Shim": s.binary("containerd-shim-runc-v2", ContainerdVersion), "Runc": s.binary("runc", RuncVersion),
		"CNIBin":  filepath.Join(s.bin, cniPluginsDir),
		"PodCIDR": PodCIDR, "ClusterCIDR": ClusterCIDR, "ServiceCIDR": ServiceCIDR, "IP": n.ip,
		"Registry": s.Registry, "CA": s.RegistryCA(),
	}
	files := map[string]string{
		filepath.Join(n.dir, "containerd", "config.toml"):           containerdConfig,
		filepath.Join(n.dir, "cni", "net.d", "10-mdplane.conflist"): cniConfig,
	}
	for _, host := range append(MirroredRegistries, s.Registry) {
		files[filepath.Join(n.dir, "certs.d", host, "hosts.toml")] = registryHosts
	}
	for path, tpl := range files {
		text, err := render(tpl, data)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			return err
		}
	}
	registryHost, _, _ := net.SplitHostPort(s.Registry)
	p, err := s.run("containerd", s.binary("containerd", ContainerdVersion), []string{"--config=" + filepath.Join(n.dir, "containerd", "config.toml")},
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY="+registryHost)
	if err != nil {
		return err
	}
	return waitFor(ctx, p, 30*time.Second, "containerd", func() error {
		return exec.Command(s.binary("ctr", ContainerdVersion), "--address", n.containerd, "version").Run()
	})
}

// kubeletConfig is the real node's KubeletConfiguration: cgroupfs under the node's own cgroup
// root (cgroup v1, as the development and CI machines have), client certificates and webhook
// authorization, its own resolv.conf (never the machine's), its state and logs under the stack's
// directory, and eviction thresholds a small test machine does not cross on its own.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "{{.ClientCA}}"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: {{.CgroupRoot}}
cgroupsPerQOS: true
failCgroupV1: false
failSwapOn: false
enforceNodeAllocatable: [pods]
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
clusterDNS: [{{.DNS}}]
clusterDomain: {{.Domain}}
resolvConf: "{{.Dir}}/kubelet/resolv.conf"
podLogsDir: "{{.Dir}}/pod-logs"
containerRuntimeEndpoint: "unix://{{.Socket}}"
port: {{.Port}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: "{{.Dir}}/kubelet/serving/tls.crt"
tlsPrivateKeyFile: "{{.Dir}}/kubelet/serving/tls.key"
rotateCertificates: false
serverTLSBootstrap: false
`

// startKubelet starts the kubelet as the node's identity (system:node:<name> in system:nodes, which
// the API server's Node authorizer and NodeRestriction hold to its own node and Pods) and waits
// until the node is Ready.
func (s *Stack) startKubelet(ctx context.Context) error {
	n := s.node
	clientCA := filepath.Join(n.dir, "kubelet", "client-ca.crt")
	envtestCA, err := os.ReadFile(filepath.Join(s.env.ControlPlane.APIServer.CertDir, "client-cert-auth-ca.crt"))
	if err != nil {
		return err
	}
	// The API server reaches the kubelet (logs, exec, port-forward) with a certificate of the
	// stack's CA; the node's own clients with envtest's.
	if err := os.WriteFile(clientCA, append(envtestCA, s.ca.pem...), 0o644); err != nil {
		return err
	}
	if err := s.ca.issue(filepath.Join(n.dir, "kubelet", "serving"), RealNodeName, 20, n.ip); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "kubelet", "resolv.conf"), []byte("# the real node's Pods resolve through the cluster DNS alone\n"), 0o644); err != nil {
		return err
	}
	config, err := render(kubeletConfig, map[string]any{"ClientCA": clientCA, "CgroupRoot": nodeCgroupRoot, "DNS": DNSServiceIP,
		"Domain": ClusterDomain, "Dir": n.dir, "Socket": n.containerd, "Port": kubeletPort})
	if err != nil {
		return err
	}
	configFile := filepath.Join(n.dir, "kubelet", "config.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	kubeconfig, err := s.identityKubeconfig("kubelet", "system:node:"+RealNodeName, "system:nodes")
	if err != nil {
		return err
	}
	p, err := s.run("kubelet", s.binary("kubelet", KubernetesVersion), []string{
		"--config=" + configFile, "--kubeconfig=" + kubeconfig, "--root-dir=" + filepath.Join(n.dir, "kubelet", "root"),
		"--hostname-override=" + RealNodeName, "--node-ip=" + n.ip,
	})
	if err != nil {
		return err
	}
	if err := waitFor(ctx, p, 90*time.Second, "the real node Ready", func() error { return s.nodeReady(ctx) }); err != nil {
		return err
	}
	return s.labelRealNode(ctx)
}

func (s *Stack) nodeReady(ctx context.Context) error {
	node := &corev1.Node{}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: RealNodeName}, node); err != nil {
		return err
	}
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("%s: %s", c.Reason, c.Message)
		}
	}
	return errors.New("no Ready condition yet")
}

// labelRealNode gives the real node what GPU feature discovery and the NVIDIA device plugin would:
// the product's labels and RealNodeGPUs nvidia.com/gpu in its capacity (an extended resource the
// kubelet keeps once advertised).
func (s *Stack) labelRealNode(ctx context.Context) error {
	node := &corev1.Node{}
	if err := s.Client.Get(ctx, types.NamespacedName{Name: RealNodeName}, node); err != nil {
		return err
	}
	labels := map[string]string{}
	addProductLabels(labels, RealNodeProduct, RealNodeGPUs)
	patch := client.MergeFrom(node.DeepCopy())
	for k, v := range labels {
		node.Labels[k] = v
	}
	if err := s.Client.Patch(ctx, node, patch); err != nil {
		return err
	}
	status := client.MergeFrom(node.DeepCopy())
	node.Status.Capacity[GPUResource] = *resource.NewQuantity(RealNodeGPUs, resource.DecimalSI)
	if err := s.Client.Status().Patch(ctx, node, status); err != nil {
		return err
	}
	return waitFor(ctx, nil, 30*time.Second, "the real node's GPUs allocatable", func() error {
		if err := s.Client.Get(ctx, types.NamespacedName{Name: RealNodeName}, node); err != nil {
			return err
		}
		if q := node.Status.Allocatable[GPUResource]; q.Value() != RealNodeGPUs {
			return fmt.Errorf("allocatable %s is %s", GPUResource, q.String())
		}
		return nil
	})
}

// kubeProxyConfig runs kube-proxy in nftables mode, all of its rules in its own table; it leaves the
// machine's conntrack settings alone and offers node ports on the machine's address only.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: "{{.Kubeconfig}}"}
mode: nftables
hostnameOverride: {{.Node}}
clusterCIDR: {{.ClusterCIDR}}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["{{.IP}}/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`

// startKubeProxy starts kube-proxy as system:kube-proxy, the user Kubernetes' default RBAC grants
// system:node-proxier, and waits until it has programmed the Services.
func (s *Stack) startKubeProxy(ctx context.Context) error {
	n := s.node
	kubeconfig, err := s.identityKubeconfig("kube-proxy", "system:kube-proxy")
	if err != nil {
		return err
	}
	config, err := render(kubeProxyConfig, map[string]string{"Kubeconfig": kubeconfig, "Node": RealNodeName, "ClusterCIDR": ClusterCIDR, "IP": n.ip})
	if err != nil {
		return err
	}
	configFile := filepath.Join(n.dir, "kube-proxy", "config.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	p, err := s.run("kube-proxy", s.binary("kube-proxy", KubernetesVersion), []string{"--config=" + configFile})
	if err != nil {
		return err
	}
	return waitFor(ctx, p, 60*time.Second, "kube-proxy", httpOK("http://127.0.0.1:10256/healthz"))
}

// identityKubeconfig writes a kubeconfig of a client certificate for user in groups: a component
// authenticating as what it is on a cluster.
func (s *Stack) identityKubeconfig(file, user string, groups ...string) (string, error) {
	u, err := s.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
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

// KillContainer kills a container on the real node with SIGKILL, through its containerd, as a
// crash or the kernel's OOM killer ends it: no Pod is deleted, the kubelet finds it dead. id is
// the container's ID as the Pod's status gives it (containerd://<id>).
func (s *Stack) KillContainer(ctx context.Context, id string) error {
	if s.node == nil {
		return errors.New("the stack runs no real node")
	}
	bare, ok := strings.CutPrefix(id, "containerd://")
	if !ok {
		return fmt.Errorf("container %s is not containerd's", id)
	}
	out, err := exec.CommandContext(ctx, s.binary("ctr", ContainerdVersion), "--address", s.node.containerd, "--namespace", "k8s.io",
		"tasks", "kill", "--signal", "SIGKILL", bare).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr tasks kill %s: %w: %s", bare, err, out)
	}
	return nil
}
