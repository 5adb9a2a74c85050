package webhooks

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SharedReads lets concurrent reviews share their reads of the same object without any of them
// reading staler than a read of its own would. A review's read never joins a read already sent:
// that one may have been answered before the review arrived. It joins the read of the object that
// is waiting to be sent, which is sent the moment the one in flight ends, so at most two reads of
// an object are outstanding however many reviews want it. Under a bulk apply of hundreds of
// objects a second, every review reads the same Settings, InstanceTypes and cache chain; read one
// by one, they queue behind the load in the API server's priority and fairness and past the read
// budget.
type SharedReads struct {
	Reader Reader
	// Timeout bounds one shared read, whichever review waits for it; each review still waits only
	// until its own deadline.
	Timeout time.Duration

	mu    sync.Mutex
	reads map[readKey]*objectReads
	// last is each object's last answer, which names the links of a chain to read ahead (Recent).
	last map[readKey]client.Object
}

// readKey names an object by its Go type, its kind (for unstructured objects) and its key.
type readKey struct {
	goType string
	kind   string
	key    client.ObjectKey
}

// objectReads are an object's read in flight and the read waiting to follow it, and the empty
// object each read decodes into (a decode into a used object could keep fields the answer lacks).
type objectReads struct {
	inFlight, next *sharedRead
	empty          client.Object
}

// sharedRead is one read of an object and what it answered.
type sharedRead struct {
	done   chan struct{}
	result client.Object
	err    error
}

// Get reads key into obj, sharing the read with concurrent reviews of the same object. A Get with
// options is not shared.
func (s *SharedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if len(opts) > 0 {
		return s.Reader.Get(ctx, key, obj, opts...)
	}
	k := readKey{goType: fmt.Sprintf("%T", obj), kind: obj.GetObjectKind().GroupVersionKind().String(), key: key}
	read := s.join(k, obj)
	select {
	case <-read.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if read.err != nil {
		return read.err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(read.result.DeepCopyObject()).Elem())
	return nil
}

// Recent copies into obj the last answer a shared read of key gave, however old, and reports
// whether there is one. It says what to read next, never what decides a review.
func (s *SharedReads) Recent(key client.ObjectKey, obj client.Object) bool {
	k := readKey{goType: fmt.Sprintf("%T", obj), kind: obj.GetObjectKind().GroupVersionKind().String(), key: key}
	s.mu.Lock()
	last := s.last[k]
	s.mu.Unlock()
	if last == nil {
		return false
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(last.DeepCopyObject()).Elem())
	return true
}

// join returns the read a Get of k waits for: the next read when one is in flight, else a new read
// sent at once.
func (s *SharedReads) join(k readKey, obj client.Object) *sharedRead {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reads == nil {
		s.reads = map[readKey]*objectReads{}
	}
	reads := s.reads[k]
	if reads == nil {
		reads = &objectReads{empty: obj.DeepCopyObject().(client.Object)}
		s.reads[k] = reads
	}
	if reads.inFlight == nil {
		reads.inFlight = &sharedRead{done: make(chan struct{})}
		s.start(k, reads.inFlight, reads.empty)
		return reads.inFlight
	}
	if reads.next == nil {
		reads.next = &sharedRead{done: make(chan struct{})}
	}
	return reads.next
}

// start sends read in the background, detached from any one review's cancellation, into a copy of
// empty; when it ends, the read waiting behind it (if any) is sent. The caller holds s.mu.
func (s *SharedReads) start(k readKey, read *sharedRead, empty client.Object) {
	into := empty.DeepCopyObject().(client.Object)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout())
		defer cancel()
		read.err = s.Reader.Get(ctx, k.key, into)
		read.result = into
		close(read.done)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.remember(k, read)
		reads := s.reads[k]
		reads.inFlight, reads.next = reads.next, nil
		if reads.inFlight == nil {
			delete(s.reads, k)
			return
		}
		s.start(k, reads.inFlight, reads.empty)
	}()
}

func (s *SharedReads) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return ReadBudget
}

// remember keeps a read's answer as the object's last, and forgets an object the read found gone.
// The caller holds s.mu.
func (s *SharedReads) remember(k readKey, read *sharedRead) {
	switch {
	case read.err == nil:
		if s.last == nil {
			s.last = map[readKey]client.Object{}
		}
		s.last[k] = read.result
	case apierrors.IsNotFound(read.err):
		delete(s.last, k)
	}
}
