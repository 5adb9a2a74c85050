package pipeline

import (
	"sort"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

func TestNamesSortWithTheirNumbersAsNumbers(t *testing.T) {
	names := []string{"replica-10", "revision-abc", "replica-2", "member-1", "replica-1", "member-0"}
	sort.Slice(names, func(i, j int) bool { return naturalLess(names[i], names[j]) })
	assert.Equal(t, []string{"member-0", "member-1", "replica-1", "replica-2", "replica-10", "revision-abc"}, names)
}

func pod(ns, name string, labels map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// TestFetchAnswersLikeCrossplane: a Get by name, or a List by labels in one namespace, sorted.
func TestFetchAnswersLikeCrossplane(t *testing.T) {
	cluster := []*unstructured.Unstructured{
		pod("team-a", "b", map[string]string{"role": "x"}),
		pod("team-a", "a", map[string]string{"role": "x"}),
		pod("team-b", "c", map[string]string{"role": "x"}),
		pod("team-a", "d", map[string]string{"role": "y"}),
	}
	got, err := fetch(cluster, &fnv1.ResourceSelector{ApiVersion: "v1", Kind: "Pod", Namespace: ptr.To("team-a"),
		Match: &fnv1.ResourceSelector_MatchLabels{MatchLabels: &fnv1.MatchLabels{Labels: map[string]string{"role": "x"}}}})
	require.NoError(t, err)
	var names []string
	for _, i := range got.GetItems() {
		names = append(names, i.GetResource().AsMap()["metadata"].(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"a", "b"}, names)

	got, err = fetch(cluster, &fnv1.ResourceSelector{ApiVersion: "v1", Kind: "Pod", Namespace: ptr.To("team-b"),
		Match: &fnv1.ResourceSelector_MatchName{MatchName: "c"}})
	require.NoError(t, err)
	assert.Len(t, got.GetItems(), 1)

	got, err = fetch(cluster, &fnv1.ResourceSelector{ApiVersion: "v1", Kind: "Service",
		Match: &fnv1.ResourceSelector_MatchName{MatchName: "c"}})
	require.NoError(t, err)
	assert.Empty(t, got.GetItems(), "another kind matches nothing")
}
