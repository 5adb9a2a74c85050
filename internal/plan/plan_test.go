package plan

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/pacing"
)

// version is one rendered version of a one-role deployment "chat", role "server".
type version struct {
	image         string
	args          []string
	replicas      int32
	gpus          int64
	digest        string
	renderVersion int32 // the replicas' and the role's render baseline
	floor         int32
	annotateFloor bool // the floor comes from the deployment's annotation, not a release's minimum
	kvCache       bool
	cadence       workerv1.RolloutCadence
}

func (v version) render() Render {
	md := &workerv1.ModelDeployment{}
	md.Name, md.Namespace = "chat", "team-a"
	if v.cadence != "" {
		md.Annotations = map[string]string{workerv1.AnnotationRolloutCadence: string(v.cadence)}
	}
	if v.annotateFloor {
		if md.Annotations == nil {
			md.Annotations = map[string]string{}
		}
		md.Annotations[workerv1.AnnotationMinRenderVersion] = strconv.Itoa(int(v.floor))
	}
	md.Spec.Engine.Name = workerv1.EngineVLLM
	md.Spec.Engine.Image = v.image
	if v.kvCache {
		md.Spec.KVCache = &workerv1.ModelDeploymentKVCache{}
	}
	md.Spec.Roles = []workerv1.ModelDeploymentRole{{Name: "server", Kind: workerv1.RoleKindServer, Replicas: v.replicas, InstanceType: "a10g", ExtraArgs: v.args}}
	revision := fmt.Sprintf("%s-%d", v.digest, v.renderVersion)
	role := v1alpha1.ModelRole{Spec: v1alpha1.ModelRoleSpec{DeploymentName: "chat", RoleName: "server", Kind: workerv1.RoleKindServer,
		Replicas: v.replicas, Size: 1, Revision: revision, ConfigDigest: v.digest, RenderVersion: v.renderVersion, MinRenderVersion: max(1, v.floor)}}
	r := Render{Deployment: md, Roles: []v1alpha1.ModelRole{role}}
	for ordinal := range v.replicas {
		rep := v1alpha1.ModelReplica{Spec: v1alpha1.ModelReplicaSpec{DeploymentName: "chat", RoleName: "server", Ordinal: ordinal,
			Revision: revision, ConfigDigest: v.digest, RenderVersion: v.renderVersion}}
		rep.Name = fmt.Sprintf("chat-server-r%d", ordinal)
		r.Replicas = append(r.Replicas, rep)
		pod := corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: v.image, Args: append([]string{"--port", "8000"}, v.args...),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(v.gpus, resource.DecimalSI)}}}}}}
		pod.Labels = map[string]string{workerv1.LabelComponent: "server", workerv1.LabelPodOrdinal: strconv.Itoa(int(ordinal)), workerv1.LabelMemberIndex: "0"}
		r.Pods = append(r.Pods, pod)
	}
	return r
}

var stored = version{image: "vllm:v1", replicas: 4, gpus: 2, digest: "d1", renderVersion: 4}

func edited(edit func(*version)) version {
	v := stored
	edit(&v)
	return v
}

// upToDateReporting is liveSlots with every replica up to date and the role reporting status.
func upToDateReporting(status v1alpha1.ModelRoleStatus) map[string]LiveRole {
	live := liveSlots(func(slots []pacing.Slot) {
		for i := range slots {
			slots[i].Outdated = false
		}
	})
	role := live["server"]
	role.Role = &v1alpha1.ModelRole{Spec: v1alpha1.ModelRoleSpec{RoleName: "server", Replicas: 4}, Status: status}
	live["server"] = role
	return live
}

// liveSlots is four replicas on the stored revision, admitted and Ready, with changes applied.
func liveSlots(change func([]pacing.Slot)) map[string]LiveRole {
	var slots []pacing.Slot
	for o := range int32(4) {
		slots = append(slots, pacing.Slot{Ordinal: o, Replica: fmt.Sprintf("chat-server-r%d", o), Revision: "d1-4", Outdated: true, Admitted: true, EverAdmitted: true, Ready: true})
	}
	change(slots)
	return map[string]LiveRole{"server": {Slots: slots, InFlight: -1}}
}

func TestMake(t *testing.T) {
	image := func(v *version) { v.image, v.digest = "vllm:v2", "d2" }
	tests := []struct {
		name     string
		in       Input
		action   Action
		order    []int32
		why      string // a substring of one why line
		check    func(t *testing.T, p Plan, r Role)
		warnings []string // substrings, each of some warning
	}{{
		name:   "scale only",
		in:     Input{Stored: stored.render(), Edited: edited(func(v *version) { v.replicas = 6 }).render()},
		action: ActionScales, order: []int32{}, why: "spec.roles[0].replicas: 4 → 6",
		check: func(t *testing.T, _ Plan, r Role) {
			assert.Equal(t, []int32{4, 5}, r.Created)
			assert.Equal(t, FromTo{From: 4, To: 6}, r.Replicas)
			assert.True(t, r.PodChanges.Empty())
		},
	}, {
		name:   "scale down leaves highest first",
		in:     Input{Stored: stored.render(), Edited: edited(func(v *version) { v.replicas = 2 }).render()},
		action: ActionScales, order: []int32{},
		check: func(t *testing.T, _ Plan, r Role) { assert.Equal(t, []int32{3, 2}, r.Leaving) },
	}, {
		name:   "rolling edit order highest first",
		in:     Input{Stored: stored.render(), Edited: edited(image).render()},
		action: ActionRolls, order: []int32{3, 2, 1, 0}, why: "spec.engine.image: vllm:v1 → vllm:v2",
		check: func(t *testing.T, _ Plan, r Role) {
			assert.Equal(t, &Change{From: "vllm:v1", To: "vllm:v2"}, r.PodChanges.Image)
			assert.Empty(t, r.Steps[0].Waits, "the first replica leaves at once: every replica is admitted")
			assert.Contains(t, r.Steps[1].Waits, "replica r3's replacement waits for admission")
			for k, s := range r.Steps {
				assert.Equal(t, int32(3), s.ServingOnceReady)
				assert.Equal(t, max(0, int32(3-k)), s.ServingAtLeast, "step %d under the admission cadence", k)
			}
		},
	}, {
		name: "queued replica first",
		in: Input{Stored: stored.render(), Edited: edited(image).render(),
			Live: liveSlots(func(s []pacing.Slot) { s[1].Admitted, s[1].EverAdmitted, s[1].Ready = false, false, false })},
		action: ActionRolls, order: []int32{1, 3, 2, 0},
		check: func(t *testing.T, _ Plan, r Role) {
			assert.Contains(t, r.Steps[0].Note, "never admitted")
			assert.Equal(t, int32(3), r.Steps[0].ServingOnceReady, "a queued replica serves nothing: replacing it costs nothing")
		},
	}, {
		name: "capacity cadence order",
		in: Input{Stored: stored.render(), Edited: edited(func(v *version) { image(v); v.cadence = workerv1.RolloutCadenceCapacity }).render(),
			Live: liveSlots(func(s []pacing.Slot) { s[0].Ready = false })},
		action: ActionRolls, order: []int32{0, 3, 2, 1},
		check: func(t *testing.T, p Plan, r Role) {
			assert.Equal(t, "capacity-preserving", p.Cadence)
			assert.Contains(t, r.Steps[1].Waits, "Ready")
			for _, s := range r.Steps[1:] {
				assert.Equal(t, int32(2), s.ServingAtLeast, "three Ready replicas before the rollout; one leaves at a time")
			}
		},
	}, {
		name: "quota waits",
		in: Input{Stored: stored.render(), Edited: edited(func(v *version) { image(v); v.gpus = 4 }).render(),
			Free: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), "cpu": resource.MustParse("100")}},
		action: ActionRolls, order: []int32{3, 2, 1, 0},
		check: func(t *testing.T, _ Plan, r Role) {
			require.NotNil(t, r.Quota.WaitsForCapacity)
			assert.True(t, *r.Quota.WaitsForCapacity, "needs 4, free 1 plus the departing replica's 2")
		},
		warnings: []string{"the rollout will wait for capacity (nvidia.com/gpu: needs 4, 3 free with the departing replica's (r3, r2, r1, r0))"},
	}, {
		name: "quota fits with the departing replica's reservation",
		in: Input{Stored: stored.render(), Edited: edited(image).render(),
			Free: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("0")}},
		action: ActionRolls, order: []int32{3, 2, 1, 0},
		check: func(t *testing.T, _ Plan, r Role) {
			require.NotNil(t, r.Quota.WaitsForCapacity)
			assert.False(t, *r.Quota.WaitsForCapacity)
		},
	}, {
		name:   "one-replica gap warning",
		in:     Input{Stored: edited(func(v *version) { v.replicas = 1 }).render(), Edited: edited(func(v *version) { image(v); v.replicas = 1 }).render()},
		action: ActionRolls, order: []int32{0},
		warnings: []string{"role server has one replica: serving stops until the replacement is ready"},
	}, {
		name: "cache-blocks warning",
		in: Input{Stored: edited(func(v *version) { v.kvCache = true }).render(),
			Edited: edited(func(v *version) { image(v); v.kvCache = true }).render()},
		action: ActionRolls, order: []int32{3, 2, 1, 0},
		warnings: []string{"each of the 4 departing replicas costs its siblings the cache blocks it held (leased for the " + pacing.LeaseWindow},
	}, {
		name:   "render-version only",
		in:     Input{Stored: stored.render(), Edited: edited(func(v *version) { v.renderVersion, v.floor = 5, 5 }).render()},
		action: ActionRolls, order: []int32{3, 2, 1, 0}, why: "only the render baseline moved (render-version 4 → 5, floor 1 → 5)",
	}, {
		name:   "the render-version floor annotation",
		in:     Input{Stored: stored.render(), Edited: edited(func(v *version) { v.renderVersion, v.floor, v.annotateFloor = 5, 5, true }).render()},
		action: ActionRolls, order: []int32{3, 2, 1, 0}, why: "metadata.annotations[modeldeployment.gpustack.ai/min-render-version]: (none) → 5",
		check: func(t *testing.T, _ Plan, r Role) {
			assert.Contains(t, r.Why, "only the render baseline moved (render-version 4 → 5, floor 1 → 5)")
		},
	}, {
		name:   "a Setting moved",
		in:     Input{Stored: stored.render(), Edited: edited(func(v *version) { v.digest = "d3" }).render()},
		action: ActionRolls, order: []int32{3, 2, 1, 0}, why: "a Setting or a referenced object",
	}, {
		name:   "unchanged",
		in:     Input{Stored: stored.render(), Edited: stored.render()},
		action: ActionUnchanged, order: []int32{},
	}, {
		name: "a preempted role says who took its quota",
		in: Input{Stored: stored.render(), Edited: stored.render(),
			Live: upToDateReporting(v1alpha1.ModelRoleStatus{PreemptedBy: "r3: Kueue preempted this replica's group for Workload team-b/big-r0"})},
		action: ActionUnchanged, order: []int32{},
		warnings: []string{"role server: preempted, waiting for quota: r3: Kueue preempted this replica's group for Workload team-b/big-r0"},
	}, {
		name:   "a role on a node that stopped reporting names it",
		in:     Input{Stored: stored.render(), Edited: stored.render(), Live: upToDateReporting(v1alpha1.ModelRoleStatus{LostNode: "r2: node gpu-7 stopped reporting"})},
		action: ActionUnchanged, order: []int32{},
		warnings: []string{"role server: a replica waits on a node that stopped reporting: r2: node gpu-7 stopped reporting"},
	}, {
		name: "a role waiting for an autoscaled pool's nodes says what the provisioner told",
		in: Input{Stored: stored.render(), Edited: stored.render(),
			Live: upToDateReporting(v1alpha1.ModelRoleStatus{Provisioning: "r0: the node provisioner refused the group's nodes 1 time(s): CA could not find requested capacity"})},
		action: ActionUnchanged, order: []int32{},
		warnings: []string{"role server: a replica waits for its nodes: r0: the node provisioner refused the group's nodes 1 time(s): CA could not find requested capacity"},
	}, {
		name:   "a type borrowing from its cohort is told",
		in:     Input{Stored: stored.render(), Edited: stored.render(), Borrowing: []string{"InstanceType h100 in cohort pool: borrows 2 nvidia.com/gpu"}},
		action: ActionUnchanged, order: []int32{},
		warnings: []string{"borrowed quota: InstanceType h100 in cohort pool: borrows 2 nvidia.com/gpu"},
	}, {
		name: "a slot backing off after PodsReady timeouts says until when",
		in: Input{Stored: stored.render(), Edited: stored.render(), Live: upToDateReporting(v1alpha1.ModelRoleStatus{ReadyTimeouts: map[string]v1alpha1.ReadyTimeout{
			"r1": {Count: 2, Until: metav1.NewTime(time.Date(2026, 12, 5, 16, 40, 5, 0, time.UTC))}}})},
		action: ActionUnchanged, order: []int32{},
		warnings: []string{"role server: r1 waits until 2026-12-05T16:40:05Z after 2 eviction(s) in a row at Kueue's waitForPodsReady timeout"},
	}, {
		name:   "rolls and scales",
		in:     Input{Stored: stored.render(), Edited: edited(func(v *version) { image(v); v.replicas = 3 }).render()},
		action: ActionRollsAndScales, order: []int32{2, 1, 0},
		check: func(t *testing.T, _ Plan, r Role) { assert.Equal(t, []int32{3}, r.Leaving) },
	}, {
		name: "refused edit",
		in:   Input{Refusals: []string{"spec.engine: Invalid value: frozen"}, Stored: stored.render(), Edited: edited(image).render()},
		check: func(t *testing.T, p Plan, _ Role) {
			assert.False(t, p.Admitted)
			assert.Empty(t, p.Roles, "a refused edit rolls nothing")
			assert.Equal(t, []string{"spec.engine: Invalid value: frozen"}, p.Refusals)
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Namespace, tt.in.Deployment = "team-a", "chat"
			p := Make(tt.in)
			var r Role
			if len(p.Roles) > 0 {
				r = p.Roles[0]
				assert.Equal(t, tt.action, r.Action)
				assert.Equal(t, tt.order, r.Order)
				assert.Empty(t, r.Unresolved)
			}
			if tt.why != "" {
				assert.Contains(t, strings.Join(r.Why, "\n"), tt.why)
			}
			for _, w := range tt.warnings {
				assert.Contains(t, strings.Join(p.Warnings, "\n"), w)
			}
			if tt.check != nil {
				tt.check(t, p, r)
			}
		})
	}
}

func TestArgsGroupFlagsWithTheirValues(t *testing.T) {
	c := listChange(argGroups([]string{"--tp", "2", "--enforce-eager", "--port=8000"}), argGroups([]string{"--tp", "4", "--enforce-eager", "--port=8000"}))
	assert.Equal(t, ListChange{Added: []string{"--tp 4"}, Removed: []string{"--tp 2"}}, c)
}

func TestFreeOfSumsNominalMinusUsageOverFlavors(t *testing.T) {
	cq := &kueue.ClusterQueue{}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{{Flavors: []kueue.FlavorQuotas{
		{Name: "a10g", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("8")}}},
		{Name: "h20", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("4")}}},
	}}}
	cq.Status.FlavorsUsage = []kueue.FlavorUsage{{Name: "a10g", Resources: []kueue.ResourceUsage{{Name: "nvidia.com/gpu", Total: resource.MustParse("6")}}}}
	free := FreeOf(cq, nil)
	q := free["nvidia.com/gpu"]
	assert.Equal(t, "6", q.String())
}

func TestFreeOfCountsTheReservationsTheStatusDoesNotShowYet(t *testing.T) {
	cq := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "h20"}}
	cq.Spec.ResourceGroups = []kueue.ResourceGroup{{Flavors: []kueue.FlavorQuotas{
		{Name: "h20", Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("3")}}},
	}}}
	reserved := func(queue string, gpus string) kueue.Workload {
		wl := kueue.Workload{}
		wl.Status.Conditions = []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue}}
		wl.Status.Admission = &kueue.Admission{ClusterQueue: kueue.ClusterQueueReference(queue), PodSetAssignments: []kueue.PodSetAssignment{{
			Flavors:       map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "h20"},
			ResourceUsage: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse(gpus)}}}}
		return wl
	}
	free := FreeOf(cq, []kueue.Workload{reserved("h20", "1"), reserved("h20", "1"), reserved("another", "1"), {}})
	q := free["nvidia.com/gpu"]
	assert.Equal(t, "1", q.String(), "two reservations on this queue, one on another, one Workload not admitted")
}

func TestAscendWarning(t *testing.T) {
	pair := func(decodeTP string) *workerv1.ModelDeployment {
		md := &workerv1.ModelDeployment{}
		md.Spec.Engine.Name = workerv1.EngineVLLM
		md.Spec.Router = &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD}
		md.Spec.Roles = []workerv1.ModelDeploymentRole{
			{Name: "prefill", Kind: workerv1.RoleKindPrefill, InstanceType: "npu", ExtraArgs: []string{"--tensor-parallel-size", "2"}},
			{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: "npu", ExtraArgs: []string{"--tensor-parallel-size", decodeTP}},
		}
		return md
	}
	in := func(decodeTP, manufacturer string) Input {
		return Input{Stored: Render{Deployment: pair("2")}, Edited: Render{Deployment: pair(decodeTP)}, Manufacturers: map[string]string{"npu": manufacturer}}
	}
	assert.Contains(t, ascendWarning(in("1", "ascend")), "both halves of the prefill/decode pair roll", "a degree edit of a vLLM-Ascend pair")
	assert.Empty(t, ascendWarning(in("2", "ascend")), "the same degrees: the document does not change")
	assert.Empty(t, ascendWarning(in("1", "nvidia")), "native vLLM's leg is not a shared document")
}
