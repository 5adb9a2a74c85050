package retirement

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/mdplane/mdplane/apis/composite/v1alpha1"
	"github.com/mdplane/mdplane/apis/naming"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/controllers/rolemetrics"
)

// OperationKey is the key of the record ConfigMap's data holding the operation, as JSON; empty or
// absent when the deployment has none.
const OperationKey = "operation"

// ErrUnreadable marks a record that holds no readable operation.
var ErrUnreadable = errors.New("not a retirement operation")

// RecordName is the name of a deployment's record ConfigMap: retirement-<md UID>.
func RecordName(deploymentUID types.UID) string { return "retirement-" + string(deploymentUID) }

// ReplacementKeyPrefix opens the key of the record ConfigMap's data holding a role's replacement
// (ReplacementKeyPrefix + role name), as JSON; absent when the role has none.
const ReplacementKeyPrefix = "replacement."

// Book holds each deployment's rollout record: its retirement operation (one per deployment) and
// each role's replacement (the slot in flight and the gate its next departure waits at). The record
// lives in the ConfigMap retirement-<md UID> in the deployment's namespace, controlled by the
// deployment; the book reads it once per deployment and then keeps what it wrote, being its one
// writer (the rollout pacer: one worker, leader-elected). The record is kept off the deployment's
// composed objects: each of an operation's five or six transitions per replica retired, and each
// replacement's, would wake the deployment in Crossplane. The roles controller reports both on the
// role (ModelRoleStatus.Retirement, ModelRoleStatus.Replacement).
type Book struct {
	mu           sync.Mutex
	records      map[types.NamespacedName]record // by deployment
	subscribers  []chan event.GenericEvent
	replacements []chan event.GenericEvent
	// stepStarts are when each role's current replacement began, by deployment and role: a rollout
	// step's time is observed when the role moves on (rolemetrics).
	stepStarts map[types.NamespacedName]map[string]time.Time
}

// record is a deployment's operation and replacements, and the ConfigMap they were last read from
// or written to (nil: none exists).
type record struct {
	op           *workerv1.Retirement
	unreadable   error                           // why the stored operation does not decode, until one is stored
	replacements map[string]v1alpha1.Replacement // by role name
	cm           *corev1.ConfigMap
}

// NewBook is an empty book.
func NewBook() *Book {
	return &Book{records: map[types.NamespacedName]record{}}
}

// Subscribe is a channel that carries a ModelRole (its namespace, name, labels, deployment and role
// name) each time the operation targeting one of its replicas begins, moves on or ends: a
// controller's source. Call it before the controllers start.
func (b *Book) Subscribe() <-chan event.GenericEvent {
	return b.subscribe(&b.subscribers)
}

// SubscribeReplacements is a channel that carries a ModelRole each time its replacement changes.
// Call it before the controllers start.
func (b *Book) SubscribeReplacements() <-chan event.GenericEvent {
	return b.subscribe(&b.replacements)
}

func (b *Book) subscribe(to *[]chan event.GenericEvent) <-chan event.GenericEvent {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := make(chan event.GenericEvent, 1024)
	*to = append(*to, c)
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
// the record is not cached). A record that does not decode is an error until an operation is stored.
func (b *Book) Load(ctx context.Context, reader client.Reader, md *workerv1.ModelDeployment) (*workerv1.Retirement, error) {
	key := client.ObjectKeyFromObject(md)
	b.mu.Lock()
	have, known := b.records[key]
	b.mu.Unlock()
	// A deployment deleted and created again under its name has a record of its own.
	if known && (have.cm == nil || have.cm.Name == RecordName(md.UID)) {
		return have.op, have.unreadable
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
	b.records[key] = record{op: op, unreadable: decodeErr, replacements: decodeReplacements(cm), cm: cm}
	b.mu.Unlock()
	return op, decodeErr
}

// decodeReplacements reads the record's replacements; one that does not decode is taken as none
// (the pacer's next step writes it afresh).
func decodeReplacements(cm *corev1.ConfigMap) map[string]v1alpha1.Replacement {
	out := map[string]v1alpha1.Replacement{}
	if cm == nil {
		return out
	}
	for k, v := range cm.Data {
		role, ok := strings.CutPrefix(k, ReplacementKeyPrefix)
		if !ok {
			continue
		}
		var r v1alpha1.Replacement
		if json.Unmarshal([]byte(v), &r) == nil {
			out[role] = r
		}
	}
	return out
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
	value := ""
	if op != nil {
		raw, err := json.Marshal(op)
		if err != nil {
			return err
		}
		value = string(raw)
	}
	have, err := b.write(ctx, c, md, OperationKey, value, func(r *record) { r.op, r.unreadable = op, nil })
	if err != nil {
		return fmt.Errorf("writing the retirement record of ModelDeployment %s/%s: %w", md.Namespace, md.Name, err)
	}
	for _, o := range []*workerv1.Retirement{have.op, op} {
		if o != nil {
			b.tell(false, md, o.RoleName)
		}
	}
	return nil
}

// Replacing is the role's replacement as far as the book has read its deployment; known is false
// before it has. A nil Book knows nothing.
func (b *Book) Replacing(deployment types.NamespacedName, role string) (r v1alpha1.Replacement, known bool) {
	if b == nil {
		return v1alpha1.Replacement{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	rec, ok := b.records[deployment]
	return rec.replacements[role], ok
}

// Replacement is the role's replacement: the book's once it has read the role's deployment, else
// what the role's status reports.
func (b *Book) Replacement(role *v1alpha1.ModelRole) v1alpha1.Replacement {
	r, known := b.Replacing(types.NamespacedName{Namespace: role.Namespace, Name: role.Spec.DeploymentName}, role.Spec.RoleName)
	if !known && role.Status.Replacement != nil {
		r = *role.Status.Replacement
	}
	return r
}

// Remember writes the role's replacement to its deployment's record (the zero Replacement removes
// it), as Store writes the operation; the book's current value is not written again.
func (b *Book) Remember(ctx context.Context, c client.Client, md *workerv1.ModelDeployment, role string, r v1alpha1.Replacement) error {
	have, known := b.Replacing(client.ObjectKeyFromObject(md), role)
	if known && equality.Semantic.DeepEqual(have, r) {
		return nil
	}
	value := ""
	if !r.None() {
		raw, err := json.Marshal(r)
		if err != nil {
			return err
		}
		value = string(raw)
	}
	if _, err := b.write(ctx, c, md, ReplacementKeyPrefix+role, value, func(rec *record) {
		rec.replacements = maps.Clone(rec.replacements)
		if rec.replacements == nil {
			rec.replacements = map[string]v1alpha1.Replacement{}
		}
		if value == "" {
			delete(rec.replacements, role)
		} else {
			rec.replacements[role] = r
		}
	}); err != nil {
		return fmt.Errorf("writing the replacement of role %s to the rollout record of ModelDeployment %s/%s: %w", role, md.Namespace, md.Name, err)
	}
	b.timeStep(client.ObjectKeyFromObject(md), role, have.Ordinal, r.Ordinal, time.Now())
	b.tell(true, md, role)
	return nil
}

// timeStep notes when a role starts replacing another ordinal, and observes the step that ends
// then: a step whose start this process did not see (before a restart) is not observed.
func (b *Book) timeStep(deployment types.NamespacedName, role string, was, is *int32, now time.Time) {
	if ptr.Equal(was, is) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stepStarts == nil {
		b.stepStarts = map[types.NamespacedName]map[string]time.Time{}
	}
	starts := b.stepStarts[deployment]
	if started, ok := starts[role]; ok && was != nil {
		rolemetrics.ObserveRolloutStep(started, now)
	}
	if is == nil {
		delete(starts, role)
		if len(starts) == 0 {
			delete(b.stepStarts, deployment)
		}
		return
	}
	if starts == nil {
		starts = map[string]time.Time{}
		b.stepStarts[deployment] = starts
	}
	starts[role] = now
}

// write sets one key of the deployment's record ConfigMap (an empty value removes it), creating the
// record the first time, and applies the same change to what the book holds; it returns what the
// book held before. A failed write makes the book read the record again on its next use.
func (b *Book) write(ctx context.Context, c client.Client, md *workerv1.ModelDeployment, key, value string, change func(*record)) (record, error) {
	deployment := client.ObjectKeyFromObject(md)
	b.mu.Lock()
	have, known := b.records[deployment]
	b.mu.Unlock()
	var err error
	cm := have.cm.DeepCopy()
	switch {
	case !known || cm == nil:
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: RecordName(md.UID), Labels: naming.DeploymentLabels(md.Name),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: workerv1.SchemeGroupVersion.String(), Kind: workerv1.ModelDeploymentKind,
				Name: md.Name, UID: md.UID, Controller: ptr.To(true)}}},
			Data: map[string]string{}}
		setData(cm, key, value)
		err = c.Create(ctx, cm)
	default:
		setData(cm, key, value)
		err = c.Update(ctx, cm)
	}
	if err != nil {
		b.forget(deployment)
		return have, err
	}
	next := have
	next.cm = cm
	change(&next)
	b.mu.Lock()
	b.records[deployment] = next
	b.mu.Unlock()
	return have, nil
}

func setData(cm *corev1.ConfigMap, key, value string) {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if value == "" && key != OperationKey {
		delete(cm.Data, key)
		return
	}
	cm.Data[key] = value
}

// forget drops what the book holds of a deployment: it is read again on its next use.
func (b *Book) forget(deployment types.NamespacedName) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.records, deployment)
}

// tell wakes the subscribers for a role of the deployment; a full channel drops it (the role's
// next event carries the change).
func (b *Book) tell(replacement bool, md *workerv1.ModelDeployment, role string) {
	r := &v1alpha1.ModelRole{ObjectMeta: metav1.ObjectMeta{Namespace: md.Namespace, Name: naming.RoleServiceName(md.Name, role),
		Labels: naming.RoleLabels(md.Name, role)}, Spec: v1alpha1.ModelRoleSpec{DeploymentName: md.Name, RoleName: role}}
	b.mu.Lock()
	defer b.mu.Unlock()
	subscribers := b.subscribers
	if replacement {
		subscribers = b.replacements
	}
	for _, c := range subscribers {
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
