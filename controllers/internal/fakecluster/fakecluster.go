// Package fakecluster builds the fake API server the controllers' reconcile tests run against: the
// scheme mdplane-controllers uses, its cache indexes, and the status subresources of the kinds whose
// status the controllers write.
package fakecluster

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/index"
)

// Scheme is mdplane-controllers' scheme.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, workerv1.AddToScheme, v1alpha1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Builder is a fake client holding objs, with the controllers' indexes.
func Builder(objs ...client.Object) *fake.ClientBuilder {
	b := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).
		WithStatusSubresource(&kueue.Workload{}, &kueue.AdmissionCheck{}, &workerv1.InstanceType{}, &workerv1.ModelDeployment{}, &v1alpha1.ModelRole{}, &v1alpha1.ModelReplica{}, &workerv1.ModelArtifact{}, &workerv1.KVCachePool{})
	for _, f := range index.Fields {
		b = b.WithIndex(f.Object, f.Name, f.Extract)
	}
	return b
}

// Events takes the events a fake recorder holds, in order.
func Events(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
