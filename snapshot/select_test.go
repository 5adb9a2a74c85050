package snapshot

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	metricsv1 "github.com/mdplane/mdplane/apis/metrics/v1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func TestSelect(t *testing.T) {
	type want struct {
		pods    []string
		missing []metricsv1.Missing
		partial bool
	}
	cases := []struct {
		name  string
		md    *workerv1.ModelDeployment
		world func(c *chain)
		want  want
	}{
		{name: "an engine Pod owned through its ModelReplica and ModelRole is read, in its role's scope",
			md:    deployment(workerv1.EngineVLLM, "", role("server", "", 1)),
			world: func(c *chain) { c.engine("md-server-0", "server", mdUID) },
			want:  want{pods: []string{"md-server-0 engine/server"}}},
		{name: "an engine Pod whose chain ends at another deployment is not owned",
			md:    deployment(workerv1.EngineVLLM, "", role("server", "", 1)),
			world: func(c *chain) { c.engine("md-server-0", "server", "other-uid") },
			want:  want{missing: []metricsv1.Missing{{Source: "engine/server", Reason: "no owned metrics Pod"}}, partial: true}},
		{name: "a Pod controlled by anything but a ModelReplica is not owned",
			md: deployment(workerv1.EngineVLLM, "", role("server", "", 1)),
			world: func(c *chain) {
				p := c.engine("md-server-0", "server", mdUID)
				p.OwnerReferences[0].Kind = "StatefulSet"
			},
			want: want{missing: []metricsv1.Missing{{Source: "engine/server", Reason: "no owned metrics Pod"}}, partial: true}},
		{name: "a take-over role's Pods are not read and expect no coverage",
			md: deployment(workerv1.EngineVLLM, "", role("server", "", 1),
				workerv1.ModelDeploymentRole{Name: "custom", Command: []string{"serve"}}),
			world: func(c *chain) { c.engine("md-server-0", "server", mdUID); c.engine("md-custom-0", "custom", mdUID) },
			want:  want{pods: []string{"md-server-0 engine/server"}}},
		{name: "a router Pod owned through its ReplicaSet and the Deployment <md>-router is read in scope router",
			md: deployment(workerv1.EngineVLLM, workerv1.RouterVLLM, role("server", "", 1)),
			world: func(c *chain) {
				c.engine("md-server-0", "server", mdUID)
				c.router("md-router-x", workerv1.RouterVLLM, "md-router")
			},
			want: want{pods: []string{"md-router-x router", "md-server-0 engine/server"}}},
		{name: "a router Pod of a Deployment with another name is not owned",
			md: deployment(workerv1.EngineVLLM, workerv1.RouterVLLM, role("server", "", 1)),
			world: func(c *chain) {
				c.engine("md-server-0", "server", mdUID)
				c.router("md-router-x", workerv1.RouterVLLM, "impostor")
			},
			want: want{pods: []string{"md-server-0 engine/server"},
				missing: []metricsv1.Missing{{Source: "router", Reason: "no owned metrics Pod"}}, partial: true}},
		{name: "fewer owned Pods than replicas times size are counted against the expectation",
			md: deployment(workerv1.EngineVLLM, "", workerv1.ModelDeploymentRole{Name: "server", Replicas: 2, Size: 2}),
			world: func(c *chain) {
				c.engine("md-server-0-0", "server", mdUID)
				c.engine("md-server-0-1", "server", mdUID)
				c.engine("md-server-1-0", "server", mdUID)
			},
			want: want{pods: []string{"md-server-0-0 engine/server", "md-server-0-1 engine/server", "md-server-1-0 engine/server"},
				missing: []metricsv1.Missing{{Source: "engine/server", Reason: "3 of 4 owned metrics Pods present"}}, partial: true}},
		{name: "a Pod of another deployment's labels is not considered",
			md: deployment(workerv1.EngineVLLM, "", role("server", "", 1)),
			world: func(c *chain) {
				c.engine("md-server-0", "server", mdUID)
				c.engine("other-server-0", "server", mdUID).Labels[workerv1.LabelInstance] = "other"
			},
			want: want{pods: []string{"md-server-0 engine/server"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain()
			tc.world(c)
			sel := Select(tc.md, c.pods, c.owners)
			var got want
			for _, target := range sel.Targets {
				got.pods = append(got.pods, target.Pod.Name+" "+target.Scope)
			}
			got.missing, got.partial = sel.Missing, sel.Partial
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("selection (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMoreThan64PodsKeepTheFirst64ByNameAndArePartial(t *testing.T) {
	c := newChain()
	for i := 99; i >= 0; i-- {
		c.engine(fmt.Sprintf("md-server-%02d", i), "server", mdUID)
	}
	sel := Select(deployment(workerv1.EngineVLLM, "", role("server", "", 100)), c.pods, c.owners)
	if len(sel.Targets) != MaxPods || sel.Targets[0].Pod.Name != "md-server-00" || sel.Targets[63].Pod.Name != "md-server-63" {
		t.Fatalf("targets: %d, first %s", len(sel.Targets), sel.Targets[0].Pod.Name)
	}
	want := []metricsv1.Missing{{Source: "pod-discovery", Reason: "Pod count exceeds the bounded scrape limit"}}
	if diff := cmp.Diff(want, sel.Missing); diff != "" || !sel.Partial {
		t.Errorf("missing (-want +got):\n%s partial=%v", diff, sel.Partial)
	}
}
