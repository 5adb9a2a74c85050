package main

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// compositeKinds are the kinds the controllers watch that a cluster may serve after they start: the
// composites, once the Configuration package's XRDs are established, and the ModelReplica, a CRD of
// the kustomize base.
var compositeKinds = []schema.GroupVersionKind{
	workerv1.SchemeGroupVersion.WithKind(workerv1.ModelDeploymentKind),
	v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.ModelRoleKind),
	v1alpha1.SchemeGroupVersion.WithKind(v1alpha1.ModelReplicaKind),
}

// waitForKinds returns once the API server serves every kind, or the context ends.
func waitForKinds(ctx context.Context, mapper meta.RESTMapper, kinds []schema.GroupVersionKind) error {
	log := ctrl.Log.WithName("mdplane-controllers")
	logged := false
	for {
		var missing []string
		for _, k := range kinds {
			if _, err := mapper.RESTMapping(k.GroupKind(), k.Version); err != nil {
				missing = append(missing, k.Kind+"."+k.Group)
			}
		}
		if len(missing) == 0 {
			return nil
		}
		if !logged {
			log.Info("waiting for the composite kinds: install the mdplane Configuration package (docs/install.md)", "missing", missing)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Second):
		}
	}
}

// everyReplica is a runnable that does not wait for leader election.
type everyReplica func(ctx context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }
