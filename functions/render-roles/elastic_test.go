package renderroles_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/internal/replicas"
)

// elasticMembers is an Elastic EP members role of width replicas.
func elasticMembers(width int32) *v1alpha1.ModelRole {
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{"prometheus.io/port": "8000"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Command: []string{"vllm", "serve", "m"}, Args: []string{"--port", "8000"},
			LivenessProbe: &corev1.Probe{}, ReadinessProbe: &corev1.Probe{}, Lifecycle: &corev1.Lifecycle{}}}}}
	return &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Name: "moe-server", Namespace: "team-a"},
		Spec: v1alpha1.ModelRoleSpec{DeploymentName: "moe", RoleName: "server", Replicas: width, Size: 1, Revision: "r", Template: tmpl,
			Elastic: &v1alpha1.ElasticRole{Part: v1alpha1.ElasticMembers, HeadAddress: "moe-elastic-head.team-a.svc:6379"}}}
}

// TestElasticMembers: the master boots at the width of the day it is created and keeps it; a worker
// only joins Ray; a master without a boot width is held.
func TestElasticMembers(t *testing.T) {
	role := elasticMembers(2)
	master := replicas.NewReplica(role, 0)
	assert.Equal(t, int32(2), master.Spec.ElasticBootWidth, "the master records the width it boots at")
	assert.Zero(t, replicas.NewReplica(role, 1).Spec.ElasticBootWidth, "a worker has no boot width")

	grown := elasticMembers(3)
	revision := replicas.CurrentRevision(grown.Spec)
	pods, _ := replicas.Materialize(master, revision)
	require.Len(t, pods, 1)
	c := pods[0].Spec.Containers[0]
	assert.Equal(t, "2", pods[0].Annotations[workerv1.AnnotationElasticBootWidth], "width growth does not move a master's boot width")
	assert.Equal(t, []string{"/bin/sh", "-c"}, c.Command[:2])
	assert.Equal(t, []string{"elastic-serve", "vllm", "serve", "m", "--port", "8000", "--data-parallel-backend", "ray", "--data-parallel-size", "2",
		"--data-parallel-size-local", "1", "--enable-expert-parallel", "--enable-eplb", "--enable-elastic-ep"}, c.Command[3:])
	assert.Nil(t, c.Args)
	assert.Equal(t, "python3", c.LivenessProbe.Exec.Command[0], "the master's liveness accepts a resize in flight")
	assert.Contains(t, c.LivenessProbe.Exec.Command[2], "code in (200, 503)")
	assert.NotNil(t, c.ReadinessProbe, "readiness is unchanged")
	assert.NotNil(t, c.Lifecycle, "the master keeps its preStop hook")

	worker := replicas.NewReplica(grown, 2)
	pods, _ = replicas.Materialize(worker, revision)
	require.Len(t, pods, 1)
	c = pods[0].Spec.Containers[0]
	assert.Equal(t, []string{"/bin/sh", "-ec", `ray start --node-ip-address="$GPUSTACK_ELASTIC_POD_IP" --address=moe-elastic-head.team-a.svc:6379 --labels=gpustack-pod-uid="$GPUSTACK_ELASTIC_POD_UID" --block`}, c.Command)
	assert.Nil(t, c.LivenessProbe)
	assert.Nil(t, c.ReadinessProbe)
	assert.Nil(t, c.Lifecycle)

	held := master.DeepCopy()
	held.Spec.ElasticBootWidth = 0
	pods, _ = replicas.Materialize(held, revision)
	assert.Empty(t, pods, "a master without a boot width is held")
}
