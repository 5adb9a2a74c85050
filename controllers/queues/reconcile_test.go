package queues

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/admissioncheck"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
)

func naming(namespace, name string, types ...string) *workerv1.ModelDeployment {
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	for _, t := range types {
		md.Spec.Roles = append(md.Spec.Roles, workerv1.ModelDeploymentRole{Name: "r-" + t, InstanceType: t})
	}
	return md
}

func TestReconcile(t *testing.T) {
	const typeName = "gpustack-nvidia-a10g-linux-amd64"
	entrance := workerv1.EntranceName(typeName)
	checkOnly := func() *workerv1.InstanceType {
		it := a10g()
		it.Annotations = map[string]string{AnnotationQueueManagement: QueueManagementCheckOnly}
		return it
	}
	platformQueue := &kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: typeName}, Spec: kueue.ClusterQueueSpec{CohortName: "platform"}}
	cases := []struct {
		rule        string
		objs        []client.Object
		selector    string
		entrance    string
		flavor      bool
		quota       map[string]string // ClusterQueue resource → nominal quota; nil: no queue of mdplane's
		checked     bool              // the ClusterQueue carries the joint check
		cohort      string
		localQueues []string // namespaces with the entrance's LocalQueue
	}{
		{rule: "a type gets its entrance, a flavor and a queue with the joint check, and a LocalQueue in each namespace naming it",
			objs: []client.Object{a10g(), naming("team-a", "one", typeName), naming("team-a", "two", "other", typeName),
				naming("team-b", "three", typeName), naming("team-c", "four", "other")},
			entrance: entrance, flavor: true, checked: true,
			quota:       map[string]string{"nvidia.com/gpu": "16", "cpu": "128", "memory": "512Gi", "ephemeral-storage": "800Gi"},
			localQueues: []string{"team-a", "team-b"}},
		{rule: "CheckOnly adds only the joint check to the platform's queue, and still creates the LocalQueues",
			objs:     []client.Object{checkOnly(), platformQueue.DeepCopy(), naming("team-a", "one", typeName)},
			entrance: entrance, checked: true, cohort: "platform", localQueues: []string{"team-a"}},
		{rule: "CheckOnly waits for the platform to create its queue",
			objs:     []client.Object{checkOnly(), naming("team-a", "one", typeName)},
			entrance: entrance, localQueues: []string{"team-a"}},
		{rule: "a type the selector does not pick gets its entrance and no queue objects",
			objs: []client.Object{a10g(), naming("team-a", "one", typeName)}, selector: "mdplane.io/queues=managed", entrance: entrance},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			c := fakecluster.Builder(tc.objs...).Build()
			selector, err := labels.Parse(tc.selector)
			require.NoError(t, err)
			_, err = (&Reconciler{Client: c, Selector: selector}).Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: typeName}})
			require.NoError(t, err)

			it := &workerv1.InstanceType{}
			require.NoError(t, c.Get(context.Background(), types.NamespacedName{Name: typeName}, it))
			assert.Equal(t, tc.entrance, it.Status.Entrance)
			assert.Equal(t, tc.flavor, found(t, c, &kueue.ResourceFlavor{}, "", typeName), "ResourceFlavor")

			cq := &kueue.ClusterQueue{}
			if err := c.Get(context.Background(), types.NamespacedName{Name: typeName}, cq); err == nil {
				assert.Equal(t, tc.checked, cq.Spec.AdmissionChecksStrategy != nil && len(cq.Spec.AdmissionChecksStrategy.AdmissionChecks) == 1 &&
					cq.Spec.AdmissionChecksStrategy.AdmissionChecks[0].Name == admissioncheck.CheckName, "joint check")
				assert.Equal(t, kueue.CohortReference(tc.cohort), cq.Spec.CohortName, "the platform's settings stay")
				quota := map[string]string{}
				for _, rg := range cq.Spec.ResourceGroups {
					for _, f := range rg.Flavors {
						assert.Equal(t, kueue.ResourceFlavorReference(typeName), f.Name)
						for _, r := range f.Resources {
							quota[string(r.Name)] = r.NominalQuota.String()
						}
					}
				}
				if tc.quota != nil {
					assert.Equal(t, tc.quota, quota)
					assert.NotNil(t, cq.Spec.NamespaceSelector, "every namespace may use the queue")
					assert.Equal(t, "mdplane", cq.Labels["app.kubernetes.io/managed-by"])
				}
			} else {
				require.True(t, apierrors.IsNotFound(err))
				assert.False(t, tc.checked, "no ClusterQueue")
			}

			lqs := &kueue.LocalQueueList{}
			require.NoError(t, c.List(context.Background(), lqs))
			var namespaces []string
			for _, lq := range lqs.Items {
				assert.Equal(t, entrance, lq.Name)
				assert.Equal(t, kueue.ClusterQueueReference(typeName), lq.Spec.ClusterQueue)
				namespaces = append(namespaces, lq.Namespace)
			}
			assert.Equal(t, tc.localQueues, namespaces)
		})
	}
}

func found(t *testing.T, c client.Client, obj client.Object, namespace, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	require.NoError(t, err)
	return true
}
