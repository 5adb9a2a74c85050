package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/test/cluster"
)

// commandLines are the command lines of a shell block: a line ending in a backslash continues on the
// next; blank lines and comments are left out.
func commandLines(block string) []string {
	var lines []string
	current := ""
	for _, raw := range strings.Split(block, "\n") {
		line := strings.TrimSpace(raw)
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			current += cont + " "
			continue
		}
		line = strings.TrimSpace(current + line)
		current = ""
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// quickstartSays is what some commands of docs/quickstart.md print on the stack, by the start of
// the command: the page's claims about what a reader sees.
var quickstartSays = map[string]string{
	"kubectl get nodes -L nvidia.com/gpu.product":                              "NVIDIA-A10G",
	"kubectl get clusterqueue nvidia-a10g-linux-amd64":                         "nvidia-a10g-linux-amd64",
	"kubectl get localqueue -n quickstart":                                     workerv1.EntranceName("nvidia-a10g-linux-amd64"),
	"kubectl describe instancetype":                                            workerv1.InstanceTypeNodesAvailable,
	"kubectl get kvcachepool quickstart-dram":                                  "mooncake-master.kv-store.svc:50051",
	"kubectl get modeldeployment qwen-cached -n quickstart -o jsonpath":        "quickstart-dram",
	"kubectl get pods -n quickstart -l app.kubernetes.io/instance=qwen-cached": `"master_server_address":"mooncake-master.kv-store.svc:50051"`,
}

// TestQuickstartAsDocumented follows docs/quickstart.md on the stack as a reader would, in the page's
// order: each yaml block is applied with kubectl apply -f, and each kubectl line of its sh blocks runs
// in a shell with the stack's kubectl (shell), failing the test if it fails. Comment lines and lines
// that are not kubectl commands are skipped (the page has none to run: it tells a reader to apply
// its manifests with kubectl apply -f, which the test does). Some commands' output must say what the
// page says it does (quickstartSays).
//
// The test writes no status and labels nothing: the page's InstanceType is unlabelled, so the stack's
// controllers manage its queues as on any cluster, derive its phase from the stack's NVIDIA-A10G
// node, and publish the pool's endpoint from its external backend. The page ends by deleting what it
// created; the test checks that it is gone, and runs the page's deletions itself if it failed midway.
func TestQuickstartAsDocumented(t *testing.T) {
	sequential(t, "makes, as the page does, the managed A10G InstanceType and needs free GPUs on the shared A10G node")
	ctx := context.Background()
	page, err := pageBlocks("quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	// The last section is the test stack's own (TestTryItForRealAsDocumented).
	blocks := slices.DeleteFunc(page, func(b docBlock) bool { return b.section == tryItForReal })
	var deletions []string
	for _, b := range blocks {
		for _, line := range commandLines(b.body) {
			if b.lang == "sh" && strings.HasPrefix(line, "kubectl delete ") {
				deletions = append(deletions, line)
			}
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, line := range deletions {
			out, err := shell(line + " --ignore-not-found --wait=false")
			t.Logf("cleaning up after the failure: %s: %v\n%s", line, err, out)
		}
	})

	ran, applied := 0, 0
	for _, b := range blocks {
		switch b.lang {
		case "yaml":
			f := filepath.Join(t.TempDir(), fmt.Sprintf("manifest-%d.yaml", applied))
			if err := os.WriteFile(f, []byte(b.body), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := stack.Kubectl("apply", "-f", f)
			if err != nil {
				t.Fatalf("applying the page's manifest:\n%s\n%v", b.body, err)
			}
			t.Logf("$ kubectl apply -f <the page's manifest %d>\n%s", applied+1, out)
			applied++
		case "sh":
			for _, line := range commandLines(b.body) {
				if !strings.HasPrefix(line, "kubectl ") {
					t.Logf("skipped, not a kubectl command: %s", line)
					continue
				}
				out, err := shell(line)
				t.Logf("$ %s\n%s", line, out)
				if err != nil {
					t.Fatalf("%s: %v\n%s", line, err, out)
				}
				for prefix, want := range quickstartSays {
					if strings.HasPrefix(line, prefix) && !strings.Contains(out, want) {
						t.Errorf("%s does not print %q, as the page says it shows:\n%s", line, want, out)
					}
				}
				ran++
			}
		}
	}
	if applied < 4 || ran < 20 {
		t.Fatalf("ran %d commands and applied %d manifests of the page: it lost its steps", ran, applied)
	}

	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "quickstart"}},
		&workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-a10g-linux-amd64"}},
		&workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: "quickstart-dram"}},
		&workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: "mooncake-quickstart"}},
		&kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-a10g-linux-amd64"}},
		&kueuev1beta2.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "nvidia-a10g-linux-amd64"}},
	} {
		if err := stack.Client.Get(ctx, client.ObjectKeyFromObject(o), o); !apierrors.IsNotFound(err) {
			t.Errorf("%T %s is left after the page's clean-up (%v)", o, o.GetName(), err)
		}
	}
}

// tryItForReal is the section of docs/quickstart.md that runs a deployment on the test stack.
const tryItForReal = "Try it for real"

// TestTryItForRealAsDocumented follows docs/quickstart.md's "Try it for real" on the suite's stack, the
// one make cluster-up starts (its make lines and the KUBECONFIG export are that stack, already up):
// each kubectl line runs as written; the block that forwards a port and asks the model runs as one
// script, on a free port of this machine instead of 8000, and must print an answer naming the model.
func TestTryItForRealAsDocumented(t *testing.T) {
	sequential(t, "deletes, as the page does, the real node's InstanceType the other real-node tests use")
	page, err := pageBlocks("quickstart.md")
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(lis.Addr().(*net.TCPAddr).Port)
	_ = lis.Close()
	t.Cleanup(func() {
		if t.Failed() {
			out, err := shell("kubectl delete -f examples/on-the-stack.yaml --ignore-not-found --wait=false")
			t.Logf("cleaning up after the failure: %v\n%s", err, out)
		}
	})
	ran, asked := 0, false
	for _, b := range page {
		if b.section != tryItForReal || b.lang != "sh" {
			continue
		}
		if strings.Contains(b.body, "port-forward") {
			script := strings.NewReplacer("8000:8000", port+":8000", "localhost:8000", "localhost:"+port).Replace(b.body)
			// The trap ends the port-forward however the block ends.
			out, err := shell("set -e\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n" + script)
			t.Logf("$ %s\n%s", script, out)
			if err != nil || !strings.Contains(out, `"model":"Qwen/Qwen2.5-0.5B-Instruct"`) {
				t.Fatalf("the page's request through the deployment's Service: %v\n%s", err, out)
			}
			asked = true
			continue
		}
		for _, line := range commandLines(b.body) {
			if strings.HasPrefix(line, "make cluster-") || strings.HasPrefix(line, "export KUBECONFIG=") {
				t.Logf("the suite's stack: %s", line)
				continue
			}
			out, err := shell(line)
			t.Logf("$ %s\n%s", line, out)
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			if strings.HasPrefix(line, "kubectl get pods") && strings.Count(out, cluster.RealNodeName) != 4 {
				t.Errorf("the page says the four Pods run on %s:\n%s", cluster.RealNodeName, out)
			}
			ran++
		}
	}
	if ran < 4 || !asked {
		t.Fatalf("ran %d commands of the section, asked the model: %v: it lost its steps", ran, asked)
	}
}
