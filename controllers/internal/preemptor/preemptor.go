// Package preemptor reads who Kueue preempted a replica's group for, and why, from the cluster:
// the group's Workload or its stopped members name the preemptor's Workload by UID, and the
// preemptor is described by what it belongs to. The members controller reports it on the replica;
// the departures controller keeps it on the role when it rebuilds the replica.
package preemptor

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
	"github.com/mdplane/mdplane/internal/replicas"
	"github.com/mdplane/mdplane/internal/workload"
)

// Of is who Kueue preempted a group for and why (replicas.PreemptedBy), read from its Workload
// (nil when gone) while Kueue's word stands there, else from the members Kueue stopped for it;
// ok is false when neither says the group was preempted.
func Of(ctx context.Context, c client.Reader, wl *kueue.Workload, members []*corev1.Pod) (text string, ok bool, err error) {
	reason, uid, ok := workload.Preemption(wl)
	for _, pod := range members {
		if ok {
			break
		}
		reason, uid, ok = workload.PodPreemption(pod)
	}
	if !ok {
		return "", false, nil
	}
	who, err := Describe(ctx, c, uid)
	if err != nil {
		return "", false, err
	}
	return replicas.PreemptedBy(reason, who), true, nil
}

// Describe names the Workload of a UID and what it belongs to: the ModelDeployment whose replica
// group it is, else its controller (a Job, a JobSet, ...); "" for no UID. It reads the Workload
// through the index.WorkloadUID index.
func Describe(ctx context.Context, c client.Reader, uid string) (string, error) {
	if uid == "" {
		return "", nil
	}
	var found kueue.WorkloadList
	if err := c.List(ctx, &found, client.MatchingFields{index.WorkloadUID: uid}); err != nil {
		return "", fmt.Errorf("finding the Workload of UID %s, a preemptor: %w", uid, err)
	}
	if len(found.Items) == 0 {
		return fmt.Sprintf("Workload UID %s (since gone)", uid), nil
	}
	wl := &found.Items[0]
	name := fmt.Sprintf("Workload %s/%s", wl.Namespace, wl.Name)
	if wl.Spec.PriorityClassRef != nil {
		name += fmt.Sprintf(" (priority class %s, priority %d)", wl.Spec.PriorityClassRef.Name, ptr.Deref(wl.Spec.Priority, 0))
	}
	var members corev1.PodList
	if err := c.List(ctx, &members, client.InNamespace(wl.Namespace), client.MatchingFields{index.PodGroup: wl.Name}); err != nil {
		return "", err
	}
	for i := range members.Items {
		if deployment := members.Items[i].Labels[workerv1.LabelInstance]; deployment != "" {
			return fmt.Sprintf("%s of ModelDeployment %s/%s", name, wl.Namespace, deployment), nil
		}
	}
	if owner := metav1.GetControllerOf(wl); owner != nil {
		return fmt.Sprintf("%s of %s %s/%s", name, owner.Kind, wl.Namespace, owner.Name), nil
	}
	return name, nil
}
