package v1_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

func annotated(acceleratable bool, annotations map[string]string) *workerv1.InstanceType {
	return &workerv1.InstanceType{ObjectMeta: metav1.ObjectMeta{Name: "h100", Annotations: annotations}, Spec: workerv1.InstanceTypeSpec{Acceleratable: acceleratable}}
}

// TestAutoscaledCapacity: the annotation is a positive whole number; a bad value names the
// annotation, the value and the unit; no annotation is a type whose capacity is its nodes'.
func TestAutoscaledCapacity(t *testing.T) {
	for _, tc := range []struct {
		rule          string
		acceleratable bool
		annotations   map[string]string
		want          int64
		ok            bool
		err           string
	}{
		{rule: "the declared capacity", acceleratable: true, annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "16"}, want: 16, ok: true},
		{rule: "no annotation: not autoscaled", acceleratable: true},
		{rule: "zero is refused", acceleratable: true, annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "0"},
			err: `annotation worker.gpustack.ai/autoscaled-capacity="0" is not a positive whole number; set it to the whole accelerators`},
		{rule: "a quantity is refused, in CPUs on a type without accelerators", annotations: map[string]string{workerv1.AnnotationAutoscaledCapacity: "2k"},
			err: `"2k" is not a positive whole number; set it to the CPUs the node pool grows to`},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, ok, err := annotated(tc.acceleratable, tc.annotations).AutoscaledCapacity()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || ok != tc.ok {
				t.Errorf("got %d, %t, %v; want %d, %t", got, ok, err, tc.want, tc.ok)
			}
		})
	}
}

// TestProvisioningClass: cluster-autoscaler's atomic class unless the type names another.
func TestProvisioningClass(t *testing.T) {
	if got := annotated(true, nil).ProvisioningClass(); got != workerv1.DefaultProvisioningClass {
		t.Errorf("default: %q", got)
	}
	if got := annotated(true, map[string]string{workerv1.AnnotationProvisioningClass: "queued-provisioning.gke.io"}).ProvisioningClass(); got != "queued-provisioning.gke.io" {
		t.Errorf("named: %q", got)
	}
}

// TestNodePoolTaints: kubectl taint's forms, PreferNoSchedule left out (it keeps no Pod off); a
// malformed taint names itself and the form.
func TestNodePoolTaints(t *testing.T) {
	got, err := annotated(true, map[string]string{workerv1.AnnotationNodePoolTaints: "nvidia.com/gpu=present:NoSchedule, dedicated:NoExecute,soft=yes:PreferNoSchedule"}).NodePoolTaints()
	want := []corev1.Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: corev1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: corev1.TaintEffectNoExecute}}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for value, words := range map[string]string{
		"nvidia.com/gpu=present":       `taint "nvidia.com/gpu=present" has no effect`,
		"nvidia.com/gpu=present:Never": `has effect "Never", not NoSchedule, PreferNoSchedule or NoExecute`,
		"=present:NoSchedule":          `taint "=present:NoSchedule" has no key`,
	} {
		if _, err := annotated(true, map[string]string{workerv1.AnnotationNodePoolTaints: value}).NodePoolTaints(); err == nil || !strings.Contains(err.Error(), words) ||
			!strings.Contains(err.Error(), "write each taint as key=value:Effect") {
			t.Errorf("%q: %v, want %q", value, err, words)
		}
	}
}
