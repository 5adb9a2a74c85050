package admissioncheck

import (
	"context"
	"maps"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crevent "sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// podGroups is where each pod group of mdplane's belongs (deployment, role, ordinal), kept from the
// Pod events of the manager's cache. A set of hundreds of groups is judged again on its members'
// events; reading its groups here, rather than listing and copying the deployment's Pods (twice as
// many as its groups) on every judgment, keeps a judgment's cost in its Workloads.
type podGroups struct {
	mu sync.RWMutex
	// groups are by namespace and group name; sets name each deployment's groups.
	groups map[types.NamespacedName]*podGroup
	sets   map[types.NamespacedName]map[string]struct{}
	// pods is where each Pod was filed, so an update or a delete finds it without its old labels.
	pods map[types.NamespacedName]groupOfPod
}

// podGroup is one group: its place and how many filed Pods put it there.
type podGroup struct {
	deployment string
	key        groupKey
	pods       int
}

// groupOfPod is the group a Pod's labels file it under.
type groupOfPod struct {
	group, deployment string
	key               groupKey
}

func newPodGroups() *podGroups {
	return &podGroups{
		groups: map[types.NamespacedName]*podGroup{},
		sets:   map[types.NamespacedName]map[string]struct{}{},
		pods:   map[types.NamespacedName]groupOfPod{},
	}
}

// groupOf reads a Pod's group from its labels; false for a Pod of no group (no group name, no
// ordinal, or not mdplane's).
func groupOf(pod client.Object) (groupOfPod, bool) {
	l := pod.GetLabels()
	ordinal, err := strconv.ParseInt(l[workerv1.LabelPodOrdinal], 10, 32)
	if l[workerv1.LabelName] != workerv1.NameModelDeployment || l[workerv1.LabelPodGroupName] == "" || err != nil {
		return groupOfPod{}, false
	}
	return groupOfPod{
		group:      l[workerv1.LabelPodGroupName],
		deployment: l[workerv1.LabelInstance],
		key:        groupKey{role: l[workerv1.LabelComponent], ordinal: int32(ordinal)},
	}, true
}

// file records a Pod as it is now: out of the group it was filed under, into the one its labels
// name.
func (g *podGroups) file(pod client.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unfileLocked(pod)
	at, ok := groupOf(pod)
	if !ok {
		return
	}
	podKey := client.ObjectKeyFromObject(pod)
	groupKey := types.NamespacedName{Namespace: podKey.Namespace, Name: at.group}
	group := g.groups[groupKey]
	if group == nil {
		group = &podGroup{}
		g.groups[groupKey] = group
	}
	if group.deployment != at.deployment {
		g.leaveSetLocked(groupKey, group.deployment)
	}
	// The Pods of one group carry the same place; the last filed speaks for it.
	group.deployment, group.key = at.deployment, at.key
	group.pods++
	set := types.NamespacedName{Namespace: podKey.Namespace, Name: at.deployment}
	if g.sets[set] == nil {
		g.sets[set] = map[string]struct{}{}
	}
	g.sets[set][at.group] = struct{}{}
	g.pods[podKey] = at
}

// unfile forgets a Pod that is gone.
func (g *podGroups) unfile(pod client.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unfileLocked(pod)
}

func (g *podGroups) unfileLocked(pod client.Object) {
	podKey := client.ObjectKeyFromObject(pod)
	at, ok := g.pods[podKey]
	if !ok {
		return
	}
	delete(g.pods, podKey)
	groupKey := types.NamespacedName{Namespace: podKey.Namespace, Name: at.group}
	group := g.groups[groupKey]
	if group == nil {
		return
	}
	group.pods--
	if group.pods == 0 {
		delete(g.groups, groupKey)
		g.leaveSetLocked(groupKey, group.deployment)
	}
}

// leaveSetLocked takes a group out of a deployment's set.
func (g *podGroups) leaveSetLocked(group types.NamespacedName, deployment string) {
	set := types.NamespacedName{Namespace: group.Namespace, Name: deployment}
	delete(g.sets[set], group.Name)
	if len(g.sets[set]) == 0 {
		delete(g.sets, set)
	}
}

// deploymentOf names the deployment a group's Pods belong to, "" when no Pod of it is filed.
func (g *podGroups) deploymentOf(namespace, group string) string {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if pg := g.groups[types.NamespacedName{Namespace: namespace, Name: group}]; pg != nil {
		return pg.deployment
	}
	return ""
}

// of returns a deployment's groups, by group name.
func (g *podGroups) of(namespace, deployment string) map[string]groupKey {
	g.mu.RLock()
	defer g.mu.RUnlock()
	names := g.sets[types.NamespacedName{Namespace: namespace, Name: deployment}]
	out := make(map[string]groupKey, len(names))
	for name := range maps.Keys(names) {
		out[name] = g.groups[types.NamespacedName{Namespace: namespace, Name: name}].key
	}
	return out
}

// handler files the cache's Pods as their events come; it queues no judgment (a set is judged on
// its Workloads' events, which follow its Pods').
func (g *podGroups) handler() handler.TypedEventHandler[client.Object, Judgment] {
	return handler.TypedFuncs[client.Object, Judgment]{
		CreateFunc: func(_ context.Context, e crevent.TypedCreateEvent[client.Object], _ workqueue.TypedRateLimitingInterface[Judgment]) {
			g.file(e.Object)
		},
		UpdateFunc: func(_ context.Context, e crevent.TypedUpdateEvent[client.Object], _ workqueue.TypedRateLimitingInterface[Judgment]) {
			g.file(e.ObjectNew)
		},
		DeleteFunc: func(_ context.Context, e crevent.TypedDeleteEvent[client.Object], _ workqueue.TypedRateLimitingInterface[Judgment]) {
			g.unfile(e.Object)
		},
	}
}
