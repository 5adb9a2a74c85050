package pairing

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

const ns = "team-a"

// pairDeployment is a vLLM prefill/decode pair under llm-d-router on the type named.
func pairDeployment(instanceType string) *workerv1.ModelDeployment {
	return &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "vasc", Namespace: ns}, Spec: workerv1.ModelDeploymentSpec{
		Engine: workerv1.ModelDeploymentEngine{Name: workerv1.EngineVLLM},
		Router: &workerv1.ModelDeploymentRouter{Name: workerv1.RouterLLMD},
		Roles: []workerv1.ModelDeploymentRole{
			{Name: "prefill", Kind: workerv1.RoleKindPrefill, InstanceType: instanceType},
			{Name: "decode", Kind: workerv1.RoleKindDecode, InstanceType: instanceType},
		}}}
}

func instanceType(name, manufacturer string) *workerv1.InstanceType {
	it := &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: name}}
	it.Status.Detail = &workerv1.InstanceTypeDetail{Manufacturer: manufacturer}
	return it
}

// enginePod is a Ready leader of a half started with the document of a decode tensor degree,
// created at minute, routed or not.
func enginePod(name, kind string, decodeTP, minute int, routed bool) *corev1.Pod {
	doc := fmt.Sprintf(`{"kv_connector":"MooncakeConnectorV1","kv_connector_extra_config":{"prefill":{"tp_size":2,"dp_size":1},"decode":{"tp_size":%d,"dp_size":1}}}`, decodeTP)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 1, 0, minute, 0, 0, time.UTC)),
		Labels: map[string]string{workerv1.LabelName: workerv1.NameModelDeployment, workerv1.LabelInstance: "vasc",
			workerv1.LabelRoleKind: kind, workerv1.LabelMemberIndex: "0"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Args: []string{"--kv-transfer-config", doc}}}}}
	if routed {
		p.Labels[workerv1.LabelTransferRouted] = "true"
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	return p
}

func TestReconcileRoutesOneConfiguration(t *testing.T) {
	ctx := context.Background()
	routedPods := func(c client.Client) []string {
		list := &corev1.PodList{}
		require.NoError(t, c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{workerv1.LabelTransferRouted: "true"}))
		var out []string
		for _, p := range list.Items {
			out = append(out, p.Name)
		}
		return out
	}
	pods := func() []client.Object {
		return []client.Object{enginePod("p-old", "prefill", 2, 0, true), enginePod("d-old", "decode", 2, 0, true),
			enginePod("p-new", "prefill", 1, 5, false), enginePod("d-new", "decode", 1, 6, false)}
	}
	cases := []struct {
		rule   string
		objs   []client.Object
		routed []string
		events int
	}{
		{"a vLLM-Ascend pair switches to the new configuration once it has both halves Ready",
			append(pods(), pairDeployment("ascend-910b"), instanceType("ascend-910b", "ascend")), []string{"d-new", "p-new"}, 1},
		{"a pair on another manufacturer's type carries no shared document: its Pods are left alone",
			append(pods(), pairDeployment("h20"), instanceType("h20", "nvidia")), []string{"d-old", "p-old"}, 0},
		{"a deployment whose type is gone is left alone",
			append(pods(), pairDeployment("gone")), []string{"d-old", "p-old"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(tc.objs...).Build()
			recorder := events.NewFakeRecorder(10)
			r := &Reconciler{Client: c, Recorder: recorder}
			for range 2 { // a second pass changes nothing
				_, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: "vasc"}})
				require.NoError(t, err)
			}
			assert.ElementsMatch(t, tc.routed, routedPods(c))
			assert.Len(t, fakecluster.Events(recorder), tc.events)
		})
	}
}
