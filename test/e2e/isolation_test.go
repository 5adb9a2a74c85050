package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/test/cluster"
)

// A parallel test keeps to objects of its own. The helpers below name them after the test, so that
// two tests never meet by construction rather than by a reader's care, and make a node of the
// test's own that no other test's Pod can land on.

// ownerTaintKey taints every node a parallel test adds for itself, so that Pods no queue of the
// test places (other tests' routers, plain Deployments the default scheduler binds anywhere) keep
// off it: a test may count, cordon or delete its nodes. Its value is the node's name (ownNode) or
// the test's own name (ownerTaint).
const ownerTaintKey = "mdplane.test/owner"

// ownerTaint is the owner taint of the nodes a test adds for a managed InstanceType of its own,
// whose flavor then tolerates it as it tolerates any taint a pool dedicates to its nodes.
func ownerTaint(t *testing.T) corev1.Taint {
	return corev1.Taint{Key: ownerTaintKey, Value: ownName(t, "nodes"), Effect: corev1.TaintEffectNoSchedule}
}

var (
	wordStart = regexp.MustCompile(`([a-z0-9])([A-Z])`)
	capsStart = regexp.MustCompile(`([A-Z]+)([A-Z][a-z])`)
	notInName = regexp.MustCompile(`[^a-z0-9]+`)
)

// ownNameLength bounds ownName's names: a DNS label, with room for what mdplane and Kubernetes
// build from them (a Pod's domain name holds its namespace).
const ownNameLength = 40

// ownName is a name for an object of the test's own, such as its namespace (ownName(t, "ns")): the
// test's name in lower case words, then what, then a hash of the full test name that keeps two
// shortened names apart.
func ownName(t *testing.T, what string) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(t.Name()))
	words := capsStart.ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), "$1-$2")
	words = strings.ToLower(wordStart.ReplaceAllString(words, "$1-$2"))
	words = strings.Trim(notInName.ReplaceAllString(words, "-"), "-")
	suffix := fmt.Sprintf("-%s-%08x", what, h.Sum32())
	if len(words) > ownNameLength-len(suffix) {
		words = strings.TrimRight(words[:ownNameLength-len(suffix)], "-")
	}
	return words + suffix
}

// ownNode adds a fake node of the given GPU product (eight GPUs) for the test alone, named after
// it, and deletes it when the test ends. It is tainted ownerTaintKey=<node>:NoSchedule, so only
// Pods admitted through queueOnNode's flavor, which tolerates the taint, land on it.
func ownNode(t *testing.T, ctx context.Context, product string) string {
	t.Helper()
	name := ownName(t, "node")
	node, err := stack.AddNode(ctx, cluster.NodeOptions{Name: name, Product: product,
		Taints: []corev1.Taint{{Key: ownerTaintKey, Value: name, Effect: corev1.TaintEffectNoSchedule}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), node) })
	return name
}

// queueOnNode is queue with a flavor of the test's own: its Pods are sent to node (ownNode) and
// tolerate its owner taint, so nothing but the test's Pods competes for the node's GPUs.
func queueOnNode(t *testing.T, ctx context.Context, clusterQueue, entrance, namespace, node string, gpus int64) {
	t.Helper()
	flavor := &kueuev1beta2.ResourceFlavor{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec: kueuev1beta2.ResourceFlavorSpec{
			NodeLabels:  map[string]string{corev1.LabelHostname: node},
			Tolerations: []corev1.Toleration{{Key: ownerTaintKey, Operator: corev1.TolerationOpEqual, Value: node, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if err := stack.Client.Create(ctx, flavor); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stack.Client.Delete(context.Background(), flavor) })
	queueOfFlavor(t, ctx, flavor.Name, clusterQueue, entrance, namespace, gpus)
	// The flavor is in use, and so kept, until its ClusterQueue is gone.
	t.Cleanup(func() {
		_ = stack.Client.Delete(context.Background(), &kueuev1beta2.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: clusterQueue}})
	})
}

// shared are the locks of what some parallel tests share (exclusive).
var shared sync.Map

// exclusive holds what for the rest of the test: a parallel test that shares something with a few
// others (a node group they all count) runs beside every other test but one at a time with those.
func exclusive(t *testing.T, what string) {
	t.Helper()
	lock, _ := shared.LoadOrStore(what, &sync.Mutex{})
	lock.(*sync.Mutex).Lock()
	t.Cleanup(lock.(*sync.Mutex).Unlock)
}

// TestOwnNamesAreShortDistinctDNSLabels: ownName gives every test, however it is named, a DNS label
// of at most ownNameLength characters, and two tests two names.
func TestOwnNamesAreShortDistinctDNSLabels(t *testing.T) {
	parallel(t)
	seen := map[string]string{}
	for _, sub := range []string{"Short", "AVeryLongSubtestNameThatGoesOnAndOnWellBeyondWhatAnyKubernetesNameMayHold",
		"AVeryLongSubtestNameThatGoesOnAndOnWellBeyondWhatAnyKubernetesNameMayHoldToo", "spaces, punctuation: and/slashes"} {
		t.Run(sub, func(t *testing.T) {
			name := ownName(t, "ns")
			if errs := k8svalidation.IsDNS1123Label(name); len(errs) > 0 || len(name) > ownNameLength {
				t.Errorf("ownName is %q (%d characters): %v", name, len(name), errs)
			}
			if other, ok := seen[name]; ok {
				t.Errorf("%s and %s are both named %s", other, t.Name(), name)
			}
			seen[name] = t.Name()
		})
	}
}
