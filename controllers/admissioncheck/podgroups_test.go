package admissioncheck

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// filedPods files c's Pods as the Pod watch would.
func filedPods(t *testing.T, c client.Client) *podGroups {
	t.Helper()
	pods := &corev1.PodList{}
	require.NoError(t, c.List(context.Background(), pods))
	g := newPodGroups()
	for i := range pods.Items {
		g.file(&pods.Items[i])
	}
	return g
}

// worker is member m of a replica Pod's group.
func worker(ordinal int32, group string, m string) *corev1.Pod {
	p := member(ordinal, group)
	p.Name += "-w" + m
	return p
}

// TestPodGroupsFollowTheirPods: a deployment's groups are those its filed Pods name, each at its
// role and ordinal, for as long as one of its Pods is filed.
func TestPodGroupsFollowTheirPods(t *testing.T) {
	other := member(0, "x")
	other.Name, other.Labels[workerv1.LabelInstance] = "other-server-r0-m0", "other"
	unlabelled := member(1, "y")
	delete(unlabelled.Labels, workerv1.LabelPodOrdinal)
	foreign := member(2, "z")
	foreign.Labels[workerv1.LabelName] = "batch"
	moved := member(1, "b")
	moved.Labels[workerv1.LabelInstance] = "other"
	cases := []struct {
		rule    string
		file    []*corev1.Pod
		unfile  []*corev1.Pod
		groups  map[string]groupKey
		ofGroup map[string]string
	}{
		{rule: "each group is at its role and ordinal",
			file:    []*corev1.Pod{member(0, "a"), member(1, "b"), worker(1, "b", "1")},
			groups:  map[string]groupKey{"a": {"server", 0}, "b": {"server", 1}},
			ofGroup: map[string]string{"a": "md", "b": "md"}},
		{rule: "another deployment's group is not in the set",
			file:    []*corev1.Pod{member(0, "a"), other},
			groups:  map[string]groupKey{"a": {"server", 0}},
			ofGroup: map[string]string{"x": "other"}},
		{rule: "a Pod without an ordinal, or not mdplane's, files no group",
			file:    []*corev1.Pod{member(0, "a"), unlabelled, foreign},
			groups:  map[string]groupKey{"a": {"server", 0}},
			ofGroup: map[string]string{"y": "", "z": ""}},
		{rule: "a group stays while one of its Pods is filed",
			file: []*corev1.Pod{member(1, "b"), worker(1, "b", "1")}, unfile: []*corev1.Pod{member(1, "b")},
			groups:  map[string]groupKey{"b": {"server", 1}},
			ofGroup: map[string]string{"b": "md"}},
		{rule: "a group whose last Pod is gone leaves the set",
			file: []*corev1.Pod{member(0, "a"), member(1, "b")}, unfile: []*corev1.Pod{member(1, "b")},
			groups:  map[string]groupKey{"a": {"server", 0}},
			ofGroup: map[string]string{"b": ""}},
		{rule: "a Pod filed again under another deployment moves its group",
			file:    []*corev1.Pod{member(0, "a"), member(1, "b"), moved},
			groups:  map[string]groupKey{"a": {"server", 0}},
			ofGroup: map[string]string{"b": "other"}},
		{rule: "a Pod never filed is forgotten without harm",
			file: []*corev1.Pod{member(0, "a")}, unfile: []*corev1.Pod{member(1, "b")},
			groups: map[string]groupKey{"a": {"server", 0}}},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			g := newPodGroups()
			for _, p := range tc.file {
				g.file(p)
			}
			for _, p := range tc.unfile {
				g.unfile(p)
			}
			assert.Equal(t, tc.groups, g.of("team-a", "md"))
			for group, deployment := range tc.ofGroup {
				assert.Equal(t, deployment, g.deploymentOf("team-a", group), "deployment of %s", group)
			}
		})
	}
}
