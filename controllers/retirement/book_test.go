package retirement_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/internal/fakecluster"
	"github.com/mdplane/mdplane/controllers/retirement"
)

func TestBookReplacements(t *testing.T) {
	ctx := context.Background()
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: "team-a", UID: "md-uid"}}
	key := client.ObjectKeyFromObject(md)
	inFlight := v1alpha1.Replacement{Ordinal: ptr.To[int32](2), Gate: workerv1.ReplacementGateAdmitted}
	recordOf := func(t *testing.T, c client.Client) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		require.NoError(t, c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: retirement.RecordName("md-uid")}, cm))
		return cm
	}
	t.Run("a remembered replacement is in the deployment's record, beside its operation", func(t *testing.T) {
		c := fakecluster.Builder(md).Build()
		b := retirement.NewBook()
		op := &workerv1.Retirement{RoleName: "decode", ReplicaOrdinal: 1, State: workerv1.RetirementDraining}
		require.NoError(t, b.Store(ctx, c, md, op))
		require.NoError(t, b.Remember(ctx, c, md, "server", inFlight))
		cm := recordOf(t, c)
		assert.JSONEq(t, `{"ordinal":2,"gate":"Admitted"}`, cm.Data[retirement.ReplacementKeyPrefix+"server"])
		assert.NotEmpty(t, cm.Data[retirement.OperationKey], "the operation stays")
		got, known := b.Replacing(key, "server")
		assert.True(t, known)
		assert.Equal(t, inFlight, got)
	})
	t.Run("a restarted controller reads the replacement back", func(t *testing.T) {
		c := fakecluster.Builder(md).Build()
		require.NoError(t, retirement.NewBook().Remember(ctx, c, md, "server", inFlight))
		b := retirement.NewBook()
		_, known := b.Replacing(key, "server")
		assert.False(t, known, "nothing read yet")
		_, err := b.Load(ctx, c, md)
		require.NoError(t, err)
		got, _ := b.Replacing(key, "server")
		assert.Equal(t, inFlight, got)
	})
	t.Run("a deployment created again under its name reads its own record, not its predecessor's", func(t *testing.T) {
		c := fakecluster.Builder(md).Build()
		b := retirement.NewBook()
		require.NoError(t, b.Remember(ctx, c, md, "server", inFlight))
		again := md.DeepCopy()
		again.UID = "md-uid-2"
		_, err := b.Load(ctx, c, again)
		require.NoError(t, err)
		got, _ := b.Replacing(key, "server")
		assert.Equal(t, v1alpha1.Replacement{}, got)
	})
	t.Run("the zero replacement removes the role's key", func(t *testing.T) {
		c := fakecluster.Builder(md).Build()
		b := retirement.NewBook()
		require.NoError(t, b.Remember(ctx, c, md, "server", inFlight))
		require.NoError(t, b.Remember(ctx, c, md, "server", v1alpha1.Replacement{}))
		assert.NotContains(t, recordOf(t, c).Data, retirement.ReplacementKeyPrefix+"server")
	})
	t.Run("remembering what the book holds writes nothing", func(t *testing.T) {
		c := fakecluster.Builder(md).Build()
		b := retirement.NewBook()
		require.NoError(t, b.Remember(ctx, c, md, "server", inFlight))
		version := recordOf(t, c).ResourceVersion
		require.NoError(t, b.Remember(ctx, c, md, "server", inFlight))
		assert.Equal(t, version, recordOf(t, c).ResourceVersion)
	})
	t.Run("before the book has read the deployment, the role's status says", func(t *testing.T) {
		role := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "md-server"},
			Spec: v1alpha1.ModelRoleSpec{DeploymentName: "md", RoleName: "server"}, Status: v1alpha1.ModelRoleStatus{Replacement: &inFlight}}
		assert.Equal(t, inFlight, retirement.NewBook().Replacement(role))
		var none *retirement.Book
		assert.Equal(t, inFlight, none.Replacement(role), "nor does a missing book")
	})
	t.Run("a remembered replacement wakes the replacement subscribers, not the operation's", func(t *testing.T) {
		c := fakecluster.Builder(md).Build()
		b := retirement.NewBook()
		ops, replacements := b.Subscribe(), b.SubscribeReplacements()
		require.NoError(t, b.Remember(ctx, c, md, "server", inFlight))
		require.Len(t, replacements, 1)
		assert.Equal(t, "md-server", (<-replacements).Object.GetName())
		assert.Empty(t, ops, "the members controller re-judges every replica of a role on an operation's notice")
	})
}
