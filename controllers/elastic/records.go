package elastic

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// records reads and writes one deployment's operation record, each write bound to the version
// last read or written: two writers never both believe they sent a command.
type records struct {
	client client.Client
	reader client.Reader
	md     *workerv1.ModelDeployment
	stored *corev1.ConfigMap
}

// load is the deployment's record, nil without one.
func (s *records) load(ctx context.Context) (*Operation, error) {
	cm := &corev1.ConfigMap{}
	err := s.reader.Get(ctx, client.ObjectKey{Namespace: s.md.Namespace, Name: OperationName(string(s.md.UID))}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	s.stored = cm
	rec := &Operation{}
	if err := json.Unmarshal([]byte(cm.Data[OperationKey]), rec); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %s is not an operation record (%w); delete the ConfigMap to start over", cm.Namespace, cm.Name, OperationKey, err)
	}
	return rec, nil
}

// save writes rec: a create the first time, else an update of the version held.
func (s *records) save(ctx context.Context, rec *Operation) error {
	doc, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	want := OperationConfigMap(s.md, string(doc))
	if s.stored == nil {
		if err := s.client.Create(ctx, want); err != nil {
			return err
		}
		s.stored = want
		return nil
	}
	next := s.stored.DeepCopy()
	next.Data = want.Data
	if err := s.client.Update(ctx, next); err != nil {
		return err
	}
	s.stored = next
	return nil
}
