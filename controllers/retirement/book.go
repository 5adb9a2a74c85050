package retirement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// OperationKey is the key of the record ConfigMap's data holding the operation, as JSON; empty or
// absent when the deployment has none.
const OperationKey = "operation"

// ErrUnreadable marks a record that holds no readable operation.
var ErrUnreadable = errors.New("not a retirement operation")

// RecordName is the name of a deployment's record ConfigMap: retirement-<md UID>.
func RecordName(deploymentUID types.UID) string { return "retirement-" + string(deploymentUID) }

// Book holds each deployment's retirement operation (one per deployment). The record lives in the
// ConfigMap retirement-<md UID> in the deployment's namespace, controlled by the deployment; the
// book reads it once per deployment and then keeps what it wrote, being its one writer (the rollout
// pacer: one worker, leader-elected). The operation is kept off the deployment's composed objects:
// each of its five or six transitions per replica retired would wake the deployment in Crossplane.
// The roles controller reports it on the role it targets (ModelRoleStatus.Retirement).
type Book struct {
	mu          sync.Mutex
	records     map[types.NamespacedName]record // by deployment
	subscribers []chan event.GenericEvent
}

// record is a deployment's operation and the ConfigMap it was last read from or written to (nil:
// none exists).
type record struct {
	op *workerv1.Retirement
	cm *corev1.ConfigMap
}

// NewBook is an empty book.
func NewBook() *Book {
	return &Book{records: map[types.NamespacedName]record{}}
}

// Subscribe is a channel that carries a ModelRole (its namespace, name, labels, deployment and role
// name) each time the
// operation targeting one of its replicas begins, moves on or ends: a controller's source. Call it
// before the controllers start.
func (b *Book) Subscribe() <-chan event.GenericEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := make(chan event.GenericEvent, 1024)
	b.subscribers = append(b.subscribers, c)
	return c
}

// Known is the deployment's operation as far as the book has read it; known is false before it
// has. A nil Book knows nothing.
func (b *Book) Known(deployment types.NamespacedName) (op *workerv1.Retirement, known bool) {
	if b == nil {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.records[deployment]
	return r.op, ok
}

// Load is the deployment's operation, read from its record the first time (reader: the API server,
// the record is not cached). A record that does not decode is an error.
func (b *Book) Load(ctx context.Context, reader client.Reader, md *workerv1.ModelDeployment) (*workerv1.Retirement, error) {
	key := client.ObjectKeyFromObject(md)
	if op, known := b.Known(key); known {
		return op, nil
	}
	cm := &corev1.ConfigMap{}
	err := reader.Get(ctx, types.NamespacedName{Namespace: md.Namespace, Name: RecordName(md.UID)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = nil
	case err != nil:
		return nil, fmt.Errorf("reading the retirement record of ModelDeployment %s/%s: %w", md.Namespace, md.Name, err)
	}
	op, decodeErr := decode(cm)
	b.mu.Lock()
	b.records[key] = record{op: op, cm: cm}
	b.mu.Unlock()
	return op, decodeErr
}

func decode(cm *corev1.ConfigMap) (*workerv1.Retirement, error) {
	if cm == nil || cm.Data[OperationKey] == "" {
		return nil, nil
	}
	op := &workerv1.Retirement{}
	if err := json.Unmarshal([]byte(cm.Data[OperationKey]), op); err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s key %s is %w: %w", cm.Namespace, cm.Name, OperationKey, ErrUnreadable, err)
	}
	return op, nil
}

// Store writes the deployment's operation (nil: none) to its record, creating it the first time;
// an update carries the version last read or written, so a record someone else changed is read
// again on the next pass rather than overwritten.
func (b *Book) Store(ctx context.Context, c client.Client, md *workerv1.ModelDeployment, op *workerv1.Retirement) error {
	key := client.ObjectKeyFromObject(md)
	b.mu.Lock()
	have, known := b.records[key]
	b.mu.Unlock()
	value := ""
	if op != nil {
		raw, err := json.Marshal(op)
		if err != nil {
			return err
		}
		value = string(raw)
	}
	var err error
	cm := have.cm.DeepCopy()
	switch {
	case !known || cm == nil:
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: RecordName(md.UID), Labels: naming.DeploymentLabels(md.Name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.ModelDeploymentKind,
				Name: md.Name, UID: md.UID, Controller: ptr.To(true)}}},
			Data: map[string]string{OperationKey: value}}
		err = c.Create(ctx, cm)
	default:
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[OperationKey] = value
		err = c.Update(ctx, cm)
	}
	if err != nil {
		b.forget(key)
		return fmt.Errorf("writing the retirement record of ModelDeployment %s/%s: %w", md.Namespace, md.Name, err)
	}
	b.mu.Lock()
	b.records[key] = record{op: op, cm: cm}
	b.mu.Unlock()
	for _, o := range []*workerv1.Retirement{have.op, op} {
		if o != nil {
			b.tell(md, o.RoleName)
		}
	}
	return nil
}

// forget drops what the book holds of a deployment: it is read again on its next use.
func (b *Book) forget(deployment types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.records, deployment)
}

// tell wakes the subscribers for a role of the deployment; a full channel drops it (the role's
// next event carries the change).
func (b *Book) tell(md *workerv1.ModelDeployment, role string) {
	r := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: naming.RoleServiceName(md.Name, role),
		Labels: naming.RoleLabels(md.Name, role)}, Spec: v1alpha1.ModelRoleSpec{DeploymentName: md.Name, RoleName: role}}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.subscribers {
		select {
		case c <- event.GenericEvent{Object: r}:
		default:
		}
	}
}

// Targeting is the operation of the role's deployment when it targets one of the role's replicas:
// the book's once it has read the deployment, else what the role's status reports.
func (b *Book) Targeting(role *v1alpha1.ModelRole) *workerv1.Retirement {
	op, known := b.Known(types.NamespacedName{Namespace: role.Namespace, Name: role.Spec.DeploymentName})
	if !known {
		op = role.Status.Retirement
	}
	if op == nil || op.RoleName != role.Spec.RoleName {
		return nil
	}
	return op
}
