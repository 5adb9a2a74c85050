package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The real node shares the machine with everything else on it: a kubelet's device-plugin directory
// and kube-proxy's nftables table have fixed names, so one real node runs on a machine at a time.
// The lock says whose it is; the record says what the node changed outside its stack's directory,
// written before the first change, so that the next stack puts right what a stack that died
// without stopping left behind.
const (
	hostStateDir   = "/run/mdplane"
	nodeLockFile   = hostStateDir + "/node.lock"
	nodeRecordFile = hostStateDir + "/node.json"
)

// nodeSysctls are the kernel settings the node's parts change: the kubelet's kernel tunables, the
// bridge plugin's forwarding, kube-proxy's conntrack and local-routing settings. Each is put back
// when the node stops.
var nodeSysctls = []string{
	"net/ipv4/ip_forward",
	"net/ipv6/conf/all/forwarding",
	"net/ipv4/conf/all/route_localnet",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
	"net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
	"net/netfilter/nf_conntrack_tcp_be_liberal",
	"net/netfilter/nf_conntrack_udp_timeout",
	"net/netfilter/nf_conntrack_udp_timeout_stream",
}

// nodeFixedPaths are the paths outside the stack's directory a node writes, which the kubelet and
// containerd fix: they are removed when the node stops if they did not exist before it started.
var nodeFixedPaths = []string{
	"/var/lib/kubelet/device-plugins",
	"/var/lib/kubelet",
	"/var/log/containers",
	"/var/lib/cni/results",
	"/var/lib/cni",
	"/run/containerd/s",
	"/run/containerd/fifo",
	"/run/containerd",
}

// hostRecord is what a real node changed on the machine, as it was before.
type hostRecord struct {
	// Stack is the directory of the stack that owns the node, and NodeDir the node's state under it.
	Stack, NodeDir string
	// Containerd is the socket of the node's containerd, which its shims name.
	Containerd string
	// PodLogs is the kubelet's Pod log directory, which /var/log/containers links into.
	PodLogs string
	// Sysctls are the nodeSysctls' values before the node started.
	Sysctls map[string]string
	// Tables are the nftables tables ("family name") that existed before.
	Tables []string
	// Paths are the nodeFixedPaths that existed before.
	Paths []string
}

// nodeLock is the machine's real-node lock, held while a stack's node runs.
type nodeLock struct{ file *os.File }

// acquireNodeLock takes the machine's real-node lock, waiting, and saying so once through log,
// while another stack's node holds it.
func acquireNodeLock(ctx context.Context, stackDir string, log func(string, ...any)) (*nodeLock, error) {
	if err := os.MkdirAll(hostStateDir, 0o755); err != nil {
		return nil, fmt.Errorf("the real node needs %s (run as root): %w", hostStateDir, err)
	}
	f, err := os.OpenFile(nodeLockFile, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	said := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("locking %s: %w", nodeLockFile, err)
		}
		if !said {
			owner, _ := os.ReadFile(nodeLockFile)
			log("waiting for the real node of the stack in %s to stop: a kubelet's device-plugin directory and kube-proxy's nftables table are machine-wide, so one real node runs on a machine at a time",
				strings.TrimSpace(string(owner)))
			said = true
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(stackDir+"\n"), 0)
	}
	return &nodeLock{file: f}, nil
}

func (l *nodeLock) release() {
	if l == nil || l.file == nil {
		return
	}
	_ = l.file.Truncate(0)
	_ = syscall.Flock(int(l.file.Fd()), syscall.LOCK_UN)
	_ = l.file.Close()
	l.file = nil
}

// recordHost writes what the machine looks like before a node starts; with the lock held.
func recordHost(rec *hostRecord) error {
	rec.Sysctls = map[string]string{}
	for _, key := range nodeSysctls {
		if v, err := os.ReadFile("/proc/sys/" + key); err == nil {
			rec.Sysctls[key] = strings.TrimSpace(string(v))
		}
	}
	tables, err := nftTables()
	if err != nil {
		return err
	}
	rec.Tables = tables
	rec.Paths = nil
	for _, p := range nodeFixedPaths {
		if _, err := os.Lstat(p); err == nil {
			rec.Paths = append(rec.Paths, p)
		}
	}
	raw, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(nodeRecordFile, raw, 0o644)
}

// leftoverRecord is the record of a node that did not stop, or nil.
func leftoverRecord() (*hostRecord, error) {
	raw, err := os.ReadFile(nodeRecordFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec := &hostRecord{}
	if err := json.Unmarshal(raw, rec); err != nil {
		return nil, fmt.Errorf("reading %s: %w", nodeRecordFile, err)
	}
	return rec, nil
}

// restoreHost removes everything a node left on the machine and puts its settings back: its
// containers' processes and shims, its mounts, cgroups, bridge and interfaces, the nftables
// tables that did not exist before, the fixed paths it created, and the sysctls it changed. Each
// step goes on after another fails; the errors are returned together.
func restoreHost(rec *hostRecord) error {
	var errs []error
	note := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	note(killNodeProcesses(rec))
	note(unmountUnder(rec.NodeDir))
	note(removeCgroups())
	note(deleteBridge())
	note(deleteNewTables(rec.Tables))
	note(removeNewPaths(rec))
	for key, want := range rec.Sysctls {
		path := "/proc/sys/" + key
		if got, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(got)) != want {
			note(os.WriteFile(path, []byte(want), 0o644))
		}
	}
	if len(errs) == 0 {
		note(os.Remove(nodeRecordFile))
	}
	return errors.Join(errs...)
}

// killNodeProcesses kills what runs in the node's cgroups (every container) and the node's
// containerd shims, which outlive containerd by design, and waits until they are gone.
func killNodeProcesses(rec *hostRecord) error {
	var pids []int
	for _, dir := range nodeCgroupDirs() {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			raw, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(raw)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids = append(pids, pid)
				}
			}
			return nil
		})
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") && rec.Containerd != "" &&
			strings.Contains(string(cmdline), rec.Containerd) {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, pid := range pids {
		if syscall.Kill(pid, 0) == nil && !zombie(pid) {
			return fmt.Errorf("process %d of the real node survived SIGKILL", pid)
		}
	}
	return nil
}

func zombie(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(raw), ") ")
	return strings.HasPrefix(rest, "Z")
}

// unmountUnder unmounts every mount under dir, deepest first: containers' root filesystems, the
// Pods' network namespaces and the kubelet's volumes.
func unmountUnder(dir string) error {
	if dir == "" {
		return nil
	}
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var points []string
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		point := unescapeMount(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			points = append(points, point)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmounting %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes of spaces and the like.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// nodeCgroupDirs are the node's cgroup roots, one per mounted hierarchy.
func nodeCgroupDirs() []string {
	var dirs []string
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		dir := "/sys/fs/cgroup/" + e.Name() + nodeCgroupRoot
		if _, err := os.Stat(dir); err == nil {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// removeCgroups removes the node's cgroups, deepest first; they are empty once its processes are
// gone.
func removeCgroups() error {
	var errs []error
	for _, root := range nodeCgroupDirs() {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			var err error
			for range 50 {
				if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// deleteBridge deletes the node's bridge and any interface still enslaved to it.
func deleteBridge() error {
	out, err := exec.Command("ip", "-o", "link", "show", "master", nodeBridge).CombinedOutput()
	if err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSuffix(fields[1], ":"), "@")
			_ = exec.Command("ip", "link", "delete", name).Run()
		}
	}
	if exec.Command("ip", "link", "show", nodeBridge).Run() != nil {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", nodeBridge).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting the bridge %s: %w: %s", nodeBridge, err, out)
	}
	return nil
}

// nftTables lists the machine's nftables tables as "family name".
func nftTables() ([]string, error) {
	out, err := exec.Command("nft", "list", "tables").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nft list tables: %w: %s", err, out)
	}
	var tables []string
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "table "); ok {
			tables = append(tables, rest)
		}
	}
	return tables, nil
}

// nodeTables are the names of the nftables tables the node makes: the stack's guard and fake-Pod
// redirect, kube-proxy's, and the iptables tables the kubelet's and kube-proxy's canaries make.
var nodeTables = []string{guardTable, fakePodsTable, "kube-proxy", "filter", "nat", "mangle"}

// deleteNewTables deletes the node's tables that are not one of before; a table of another name
// is another program's, made meanwhile, and stays.
func deleteNewTables(before []string) error {
	now, err := nftTables()
	if err != nil {
		return err
	}
	var errs []error
	for _, t := range now {
		fields := strings.Fields(t)
		if slices.Contains(before, t) || len(fields) != 2 || !slices.Contains(nodeTables, fields[1]) {
			continue
		}
		if out, err := exec.Command("nft", append([]string{"delete", "table"}, strings.Fields(t)...)...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("nft delete table %s: %w: %s", t, err, out))
		}
	}
	return errors.Join(errs...)
}

// removeNewPaths removes what the node left at the fixed paths: the directories that did not exist
// before, and in those that did, its own entries (its network's CNI results, the links into its Pod
// logs).
func removeNewPaths(rec *hostRecord) error {
	var errs []error
	if entries, err := os.ReadDir("/var/lib/cni/results"); err == nil {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), cniNetwork+"-") {
				errs = append(errs, os.Remove("/var/lib/cni/results/"+e.Name()))
			}
		}
	}
	if entries, err := os.ReadDir("/var/log/containers"); err == nil && rec.PodLogs != "" {
		for _, e := range entries {
			path := "/var/log/containers/" + e.Name()
			if target, err := os.Readlink(path); err == nil && strings.HasPrefix(target, rec.PodLogs) {
				errs = append(errs, os.Remove(path))
			}
		}
	}
	for _, p := range nodeFixedPaths {
		if slices.Contains(rec.Paths, p) {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// leftovers lists what a stopped node left on the machine: its record, bridge, tables, cgroups,
// mounts under its directory, shims, and sysctls not back at the values recorded before it started.
func leftovers(rec *hostRecord) []string {
	var left []string
	if _, err := os.Stat(nodeRecordFile); err == nil {
		left = append(left, "the record "+nodeRecordFile)
	}
	if exec.Command("ip", "link", "show", nodeBridge).Run() == nil {
		left = append(left, "the bridge "+nodeBridge)
	}
	if tables, err := nftTables(); err == nil {
		for _, t := range tables {
			if !slices.Contains(rec.Tables, t) {
				left = append(left, "the nftables table "+t)
			}
		}
	}
	for _, dir := range nodeCgroupDirs() {
		left = append(left, "the cgroup "+dir)
	}
	if raw, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(raw), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(unescapeMount(f[4]), rec.NodeDir+"/") {
				left = append(left, "the mount "+unescapeMount(f[4]))
			}
		}
	}
	for key, want := range rec.Sysctls {
		if got, err := os.ReadFile("/proc/sys/" + key); err == nil && strings.TrimSpace(string(got)) != want {
			left = append(left, fmt.Sprintf("the sysctl %s at %s (was %s)", strings.ReplaceAll(key, "/", "."), strings.TrimSpace(string(got)), want))
		}
	}
	for _, p := range nodeFixedPaths {
		if _, err := os.Lstat(p); err == nil && !slices.Contains(rec.Paths, p) {
			left = append(left, "the path "+p)
		}
	}
	return left
}
