package queues

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

func autoscaled(annotations map[string]string) *workerv1.InstanceType {
	it := a10g()
	it.Annotations = annotations
	return it
}

// TestAnAutoscaledTypesQueue: a type whose node pool grows on demand offers the pool's declared
// capacity as quota and admits through the ProvisioningRequest check of its class beside the joint
// check; its flavor tolerates the pool's declared taints before any node carries them.
func TestAnAutoscaledTypesQueue(t *testing.T) {
	for _, tc := range []struct {
		rule        string
		annotations map[string]string
		gpus        string
		class       string // "": no provisioning check
		tolerations []corev1.Toleration
		err         string
	}{
		{rule: "the declared capacity is the quota, and the default class's check runs beside the joint check",
			annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "40"}, gpus: "40", class: workerv1.DefaultProvisioningClass},
		{rule: "nodes beyond the declared capacity still count",
			annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "8"}, gpus: "16", class: workerv1.DefaultProvisioningClass},
		{rule: "a named class gets a check of its own",
			annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "40", workerv1.AnnotationProvisioningClass: "queued-provisioning.gke.io"},
			gpus:        "40", class: "queued-provisioning.gke.io"},
		{rule: "the pool's declared taints are tolerated before a node carries them",
			annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "40", workerv1.AnnotationNodePoolTaints: "nvidia.com/gpu=present:NoSchedule"},
			gpus:        "40", class: workerv1.DefaultProvisioningClass,
			tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoSchedule}}},
		{rule: "near miss: no annotation, the nodes' capacity and the joint check alone", gpus: "16"},
		{rule: "a bad capacity names the annotation and leaves the queue as it was",
			annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "lots"}, err: `annotation worker.gpustack.ai/autoscaled-capacity="lots" is not a positive whole number`},
		{rule: "a bad taint names the annotation and leaves the queue as it was",
			annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "40", workerv1.AnnotationNodePoolTaints: "gpu"}, err: `annotation worker.gpustack.ai/node-pool-taints: taint "gpu" has no effect`},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			it := autoscaled(tc.annotations)
			c := fakecluster.Builder(it).Build()
			_, err := (&Reconciler{Client: c}).Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: it.Name}})
			cq := &kueue.ClusterQueue{}
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.False(t, found(t, c, cq, "", it.Name), "no queue from a bad annotation")
				return
			}
			require.NoError(t, err)
			require.True(t, found(t, c, cq, "", it.Name))
			gpus := ""
			for _, r := range cq.Spec.ResourceGroups[0].Flavors[0].Resources {
				if r.Name == "nvidia.com/gpu" {
					gpus = r.NominalQuota.String()
				}
			}
			assert.Equal(t, tc.gpus, gpus, "GPU quota")
			checks := []kueue.AdmissionCheckReference{}
			for _, rule := range cq.Spec.AdmissionChecksStrategy.AdmissionChecks {
				checks = append(checks, rule.Name)
			}
			if tc.class == "" {
				assert.Equal(t, []kueue.AdmissionCheckReference{admissioncheck.CheckName}, checks)
				return
			}
			name := ProvisioningCheckName(tc.class)
			assert.Equal(t, []kueue.AdmissionCheckReference{admissioncheck.CheckName, kueue.AdmissionCheckReference(name)}, checks)
			prc := &kueue.ProvisioningRequestConfig{}
			require.True(t, found(t, c, prc, "", name))
			assert.Equal(t, tc.class, prc.Spec.ProvisioningClassName)
			require.NotNil(t, prc.Spec.RetryStrategy)
			assert.Equal(t, int32(math.MaxInt32), *prc.Spec.RetryStrategy.BackoffLimitCount, "a refused request is asked again, never given up")
			ac := &kueue.AdmissionCheck{}
			require.True(t, found(t, c, ac, "", name))
			assert.Equal(t, kueue.ProvisioningRequestControllerName, ac.Spec.ControllerName)
			require.NotNil(t, ac.Spec.Parameters)
			assert.Equal(t, "ProvisioningRequestConfig", ac.Spec.Parameters.Kind)
			assert.Equal(t, name, ac.Spec.Parameters.Name)
			rf := &kueue.ResourceFlavor{}
			require.True(t, found(t, c, rf, "", it.Name))
			assert.Equal(t, tc.tolerations, rf.Spec.Tolerations)
		})
	}
}

// TestProvisioningCheckName: readable, unique per class, and short enough for a config's name.
func TestProvisioningCheckName(t *testing.T) {
	assert.Equal(t, "mdplane-provisioning-best-effort-atomic-scale-up-", ProvisioningCheckName(workerv1.DefaultProvisioningClass)[:49])
	assert.NotEqual(t, ProvisioningCheckName("check-capacity.autoscaling.x-k8s.io"), ProvisioningCheckName("check-capacity.example.com"))
	assert.LessOrEqual(t, len(ProvisioningCheckName("a-very-long-first-label-of-a-provisioning-class-name.example.com")), 63)
	assert.True(t, strings.HasPrefix(ProvisioningCheckName("x.example.com"), workerv1.ProvisioningCheckPrefix))
}
