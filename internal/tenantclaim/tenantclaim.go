// Package tenantclaim keeps a reuse domain's name to one KVCachePoolBinding per cache master. A
// domain name is the tenant the master keys blocks by, so two Bindings on one master with one name
// would share KV. The claim is a coordination.k8s.io Lease per (master, domain) in the operator's
// namespace, named from a hash of the two, whose holder is the Binding: the API server keeps the
// name unique, so of two creates racing through any webhook replica, or the controller, exactly one
// takes it. A claim whose holder no longer declares the domain on the master (a create that failed
// after admission, a deleted Binding) is stale, and an update carrying its resourceVersion takes it
// over, again with one winner.
package tenantclaim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// Labels and annotations of a claim Lease.
const (
	// LabelClaim marks a Lease as a domain claim.
	LabelClaim = "worker.gpustack.ai/kv-cache-domain-claim"
	// LabelHolder is a hash of the holder, so that a Binding's claims are found by label.
	LabelHolder = "worker.gpustack.ai/kv-cache-domain-holder"
	// AnnotationBackend and AnnotationDomain say, readably, what the hashed name stands for.
	AnnotationBackend = "worker.gpustack.ai/kv-cache-backend"
	AnnotationDomain  = "worker.gpustack.ai/kv-cache-domain"
)

// InFlight is how long a claim whose holder Binding is not stored is still its: the webhook takes the
// claim before the API server stores the create it admits.
const InFlight = 30 * time.Second

// attempts bounds the read-decide-write rounds of one Take: each lost round means another writer won
// a round, so a few settle it.
const attempts = 4

// Claim is one Binding's claim of its domain on its pool's master.
type Claim struct {
	Namespace string // the operator's namespace, where the Leases are
	Backend   string // the master: the KVCacheBackend the pool names
	Domain    string
	Holder    string // the Binding, <namespace>/<name>
}

// Outcome is what a Take or a Peek found.
type Outcome struct {
	// Held is true when the claim is (or, for a Peek, would be) the Binding's.
	Held bool
	// Holder is the other Binding holding the claim, when it is not held.
	Holder string
	// Lease is the claim's name.
	Lease string
	// InFlight is true when the other holder is not stored yet, and may be within InFlight.
	InFlight bool
}

// Declares says whether Binding holder (<namespace>/<name>) still declares the claim's domain on the
// claim's master.
type Declares func(ctx context.Context, holder string) (bool, error)

// Name is the claim Lease of domain on master: a hash, since the pair may not fit a name.
func Name(backend, domain string) string {
	sum := sha256.Sum256([]byte(backend + "\x00" + domain))
	return "kv-cache-domain-" + hex.EncodeToString(sum[:20])
}

// Holder is a Binding's holder identity.
func Holder(namespace, name string) string { return namespace + "/" + name }

// HolderBinding is the Binding a holder names, the inverse of Holder; false for another identity.
func HolderBinding(holder string) (types.NamespacedName, bool) {
	namespace, name, ok := strings.Cut(holder, "/")
	return types.NamespacedName{Namespace: namespace, Name: name}, ok
}

// holderLabel is a hash of the holder, short enough for a label value.
func holderLabel(holder string) string {
	sum := sha256.Sum256([]byte(holder))
	return hex.EncodeToString(sum[:20])
}

// Take creates the claim, or takes over a stale one. It never takes a claim another Binding holds.
func Take(ctx context.Context, r client.Reader, w client.Writer, c Claim, declares Declares, now time.Time) (Outcome, error) {
	name := Name(c.Backend, c.Domain)
	for range attempts {
		lease := c.lease(now)
		err := w.Create(ctx, lease)
		if err == nil {
			return Outcome{Held: true, Lease: name}, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return Outcome{}, fmt.Errorf("creating the domain claim Lease %s/%s: %w", c.Namespace, name, err)
		}
		got := &coordinationv1.Lease{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, got); apierrors.IsNotFound(err) {
			continue // released meanwhile: create again
		} else if err != nil {
			return Outcome{}, fmt.Errorf("reading the domain claim Lease %s/%s: %w", c.Namespace, name, err)
		}
		out, stale, err := judge(ctx, got, c, declares, now)
		if err != nil || !stale {
			return out, err
		}
		got.Spec = lease.Spec
		got.Labels, got.Annotations = lease.Labels, lease.Annotations
		err = w.Update(ctx, got) // carries the resourceVersion read: of two takeovers one wins
		switch {
		case err == nil:
			return Outcome{Held: true, Lease: name}, nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
			continue
		default:
			return Outcome{}, fmt.Errorf("taking over the domain claim Lease %s/%s: %w", c.Namespace, name, err)
		}
	}
	return Outcome{Lease: name, InFlight: true}, nil
}

// Peek says what a Take would find, writing nothing (an admission dry run).
func Peek(ctx context.Context, r client.Reader, c Claim, declares Declares, now time.Time) (Outcome, error) {
	name := Name(c.Backend, c.Domain)
	got := &coordinationv1.Lease{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: name}, got); apierrors.IsNotFound(err) {
		return Outcome{Held: true, Lease: name}, nil
	} else if err != nil {
		return Outcome{}, fmt.Errorf("reading the domain claim Lease %s/%s: %w", c.Namespace, name, err)
	}
	out, stale, err := judge(ctx, got, c, declares, now)
	if stale {
		out.Held = true
	}
	return out, err
}

// judge reads a stored claim: held by c's holder, held by another, or stale (its holder no longer
// declares the domain on the master, and it was taken longer than InFlight ago).
func judge(ctx context.Context, got *coordinationv1.Lease, c Claim, declares Declares, now time.Time) (out Outcome, stale bool, err error) {
	out = Outcome{Lease: got.Name}
	holder := ""
	if got.Spec.HolderIdentity != nil {
		holder = *got.Spec.HolderIdentity
	}
	if holder == c.Holder {
		out.Held = true
		return out, false, nil
	}
	out.Holder = holder
	if holder != "" {
		held, err := declares(ctx, holder)
		if err != nil || held {
			return out, false, err
		}
	}
	taken := got.CreationTimestamp.Time
	if got.Spec.AcquireTime != nil {
		taken = got.Spec.AcquireTime.Time
	}
	if now.Sub(taken) < InFlight {
		out.InFlight = true
		return out, false, nil
	}
	return out, true, nil
}

func (c Claim) lease(now time.Time) *coordinationv1.Lease {
	holder, at := c.Holder, metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: Name(c.Backend, c.Domain),
			Labels:      map[string]string{LabelClaim: "true", LabelHolder: holderLabel(c.Holder)},
			Annotations: map[string]string{AnnotationBackend: c.Backend, AnnotationDomain: c.Domain}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &at},
	}
}

// Release deletes every claim holder holds, each only as read: a claim taken over meanwhile stays.
func Release(ctx context.Context, r client.Reader, w client.Writer, namespace, holder string) error {
	var leases coordinationv1.LeaseList
	if err := r.List(ctx, &leases, client.InNamespace(namespace), client.MatchingLabels{LabelHolder: holderLabel(holder)}); err != nil {
		return fmt.Errorf("listing the domain claims of KVCachePoolBinding %s: %w", holder, err)
	}
	for i := range leases.Items {
		l := &leases.Items[i]
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
			continue
		}
		err := w.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("releasing the domain claim Lease %s/%s of KVCachePoolBinding %s: %w", namespace, l.Name, holder, err)
		}
	}
	return nil
}

// Master is the master a pool's Bindings claim their domain on: the KVCacheBackend the pool names,
// frozen with the pool. known is false when the pool does not exist or names no backend.
func Master(ctx context.Context, r client.Reader, pool string) (backend string, known bool, err error) {
	p := &workerv1.KVCachePool{}
	if err := r.Get(ctx, types.NamespacedName{Name: pool}, p); apierrors.IsNotFound(err) {
		return "", false, nil
	} else if err != nil {
		return "", false, fmt.Errorf("reading KVCachePool %s: %w", pool, err)
	}
	if len(p.Spec.Backends) == 0 {
		return "", false, nil
	}
	return p.Spec.Backends[0], true, nil
}

// BindingDeclares reads whether a holder Binding exists and declares domain on backend (its pool
// still names that backend).
func BindingDeclares(r client.Reader, backend, domain string) Declares {
	return func(ctx context.Context, holder string) (bool, error) {
		key, ok := HolderBinding(holder)
		if !ok {
			return false, nil // not a Binding's identity: never this operator's
		}
		b := &workerv1.KVCachePoolBinding{}
		if err := r.Get(ctx, key, b); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, fmt.Errorf("reading KVCachePoolBinding %s, the holder of a domain claim: %w", holder, err)
		}
		if validation.DomainName(b) != domain {
			return false, nil
		}
		master, known, err := Master(ctx, r, b.Spec.PoolRef.Name)
		return known && master == backend, err
	}
}

// For is the claim of Binding b on backend, its Leases in namespace.
func For(namespace, backend string, b *workerv1.KVCachePoolBinding) Claim {
	return Claim{Namespace: namespace, Backend: backend, Domain: validation.DomainName(b), Holder: Holder(b.Namespace, b.Name)}
}

// Condition is the DomainClaimed condition of Binding b after a Take on its master's claim
// (lease, <namespace>/<name>) found out; an empty lease means the master is not known.
func Condition(b *workerv1.KVCachePoolBinding, lease string, out Outcome, now metav1.Time) metav1.Condition {
	domain := validation.DomainName(b)
	c := metav1.Condition{Type: workerv1.BindingDomainClaimed, ObservedGeneration: b.Generation, LastTransitionTime: now}
	switch {
	case lease == "":
		c.Status, c.Reason = metav1.ConditionUnknown, workerv1.ReasonMasterUnknown
		c.Message = fmt.Sprintf("KVCachePool %q does not exist or names no KVCacheBackend, so the master domain %q is claimed on is not known; "+
			"the claim is taken when the pool exists, and the render waits for the pool meanwhile", b.Spec.PoolRef.Name, domain)
	case out.Held:
		c.Status, c.Reason = metav1.ConditionTrue, workerv1.ReasonDomainClaimed
		c.Message = fmt.Sprintf("domain %q is this Binding's on the master of KVCachePool %q (claim Lease %s): no other Binding on that master may declare it",
			domain, b.Spec.PoolRef.Name, lease)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, workerv1.ReasonDomainTaken
		c.Message = fmt.Sprintf("KVCachePoolBinding %s already claims domain %q on the master of KVCachePool %q (claim Lease %s), and a domain name is the tenant the master keys blocks by, "+
			"so deployments naming this Binding get no cache client; delete this Binding and create one with another spec.domain.name (the domain is frozen), "+
			"or reference Binding %s to share its blocks; this Binding takes the claim if %s goes", out.Holder, domain, b.Spec.PoolRef.Name, lease, out.Holder, out.Holder)
	}
	if was := meta.FindStatusCondition(b.Status.Conditions, c.Type); was != nil && was.Status == c.Status {
		c.LastTransitionTime = was.LastTransitionTime
	}
	return c
}
