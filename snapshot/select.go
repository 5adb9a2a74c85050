package snapshot

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// MaxPods is the bounded scrape's Pod limit: beyond it the first MaxPods by name are read.
const MaxPods = 64

// ScopeRouter is the scope of every router Pod's entries.
const ScopeRouter = "router"

// EngineScope is the scope of an engine role's entries: engine/<role>.
func EngineScope(role string) string { return "engine/" + role }

// Reasons the selection writes.
const (
	ReasonNoOwnedPod    = "no owned metrics Pod"
	ReasonPodLimit      = "Pod count exceeds the bounded scrape limit"
	SourcePodDiscovery  = "pod-discovery"
	reasonCoverageShape = "%d of %d owned metrics Pods present"
)

// Owners are the controller references of the objects between a Pod and its deployment, by the
// object's UID: each ModelReplica's and ModelRole's (engine Pods), each ReplicaSet's and the router
// Deployment's (router Pods). An object with no controller is absent.
type Owners map[types.UID]metav1.OwnerReference

// Target is one Pod to read, with the scope its entries take.
type Target struct {
	Pod   *corev1.Pod
	Scope string
	// Role is the engine role the Pod serves; nil on a router Pod.
	Role *workerv1.ModelDeploymentRole
}

// Selection is what Select decides: the Pods to read, sorted by name, and the coverage entries.
type Selection struct {
	Targets []Target
	Missing []metricsv1.Missing
	Partial bool
}

// Select picks the deployment's owned metrics Pods out of those carrying its labels (name and
// instance). An engine Pod is owned when its component names a role that does not take over and its
// controller chain is Pod→ModelReplica→ModelRole→the deployment, UIDs checked (mdplane's Pods are
// created by ModelReplicas, not by the deployment itself). A router Pod is owned when it carries the
// deployment's router name and its chain is Pod→ReplicaSet→Deployment <md>-router→the deployment.
// Each role and the router get a coverage entry when fewer Pods are present than they should run.
func Select(md *workerv1.ModelDeployment, pods []corev1.Pod, owners Owners) Selection {
	var sel Selection
	roles := map[string]workerv1.ModelDeploymentRole{}
	for _, r := range md.Spec.Roles {
		roles[r.Name] = r.WithDefaults()
	}
	found := map[string]int{}
	var owned []Target
	composed := labels.SelectorFromValidatedSet(naming.DeploymentLabels(md.Name))
	for i := range pods {
		p := &pods[i]
		if !composed.Matches(labels.Set(p.Labels)) {
			continue
		}
		if md.Spec.Router != nil && p.Labels[workerv1.LabelRouter] == string(md.Spec.Router.Name) {
			if ownedThrough(p, owners, md, []string{"ReplicaSet", "Deployment"}, naming.RouterName(md.Name)) {
				owned = append(owned, Target{Pod: p, Scope: ScopeRouter})
				found[ScopeRouter]++
			}
			continue
		}
		role, ok := roles[p.Labels[workerv1.LabelComponent]]
		if !ok || role.TakesOver() {
			continue
		}
		if ownedThrough(p, owners, md, []string{v1alpha1.ModelReplicaKind, v1alpha1.ModelRoleKind}, "") {
			owned = append(owned, Target{Pod: p, Scope: EngineScope(role.Name), Role: &role})
			found[EngineScope(role.Name)]++
		}
	}
	for _, r := range md.Spec.Roles {
		r = r.WithDefaults()
		if r.TakesOver() {
			continue
		}
		sel.Missing = append(sel.Missing, coverage(EngineScope(r.Name), found[EngineScope(r.Name)], int(r.Replicas*r.Size))...)
	}
	if md.Spec.Router != nil {
		want := 1
		if md.Spec.Router.Replicas != nil {
			want = int(*md.Spec.Router.Replicas)
		}
		sel.Missing = append(sel.Missing, coverage(ScopeRouter, found[ScopeRouter], want)...)
	}
	sort.Slice(owned, func(i, j int) bool { return owned[i].Pod.Name < owned[j].Pod.Name })
	if len(owned) > MaxPods {
		owned = owned[:MaxPods]
		sel.Missing = append(sel.Missing, metricsv1.Missing{Source: SourcePodDiscovery, Reason: ReasonPodLimit})
	}
	if len(sel.Missing) > 0 {
		sel.Partial = true
	}
	sel.Targets = owned
	return sel
}

// coverage is the entry of a scope with fewer owned Pods than expected.
func coverage(source string, found, want int) []metricsv1.Missing {
	switch {
	case found == 0:
		return []metricsv1.Missing{{Source: source, Reason: ReasonNoOwnedPod}}
	case found < want:
		return []metricsv1.Missing{{Source: source, Reason: fmt.Sprintf(reasonCoverageShape, found, want)}}
	}
	return nil
}

// ownedThrough follows the Pod's controller through kinds to the deployment; lastName, when set, is
// the name the last intermediate object must have.
func ownedThrough(p *corev1.Pod, owners Owners, md *workerv1.ModelDeployment, kinds []string, lastName string) bool {
	ref := metav1.GetControllerOf(p)
	for i, kind := range kinds {
		if ref == nil || ref.Kind != kind {
			return false
		}
		if i == len(kinds)-1 && lastName != "" && ref.Name != lastName {
			return false
		}
		next, ok := owners[ref.UID]
		if !ok {
			return false
		}
		ref = &next
	}
	return ref.Kind == workerv1.ModelDeploymentKind && ref.UID == md.UID && ref.Name == md.Name &&
		strings.HasPrefix(ref.APIVersion, workerv1.Group+"/")
}
