package members

import (
	"errors"
	"net/http"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
)

// A refused create is tried again after refusalRetry, doubling on each refusal in a row up to
// refusalRetryMax: nothing the controller watches says when a namespace's Pod Security level, a
// ResourceQuota or a webhook changes, and retrying at once would hammer the API server for as long
// as the refusal lasts.
const (
	refusalRetry    = time.Second
	refusalRetryMax = time.Minute
)

// refusedByAPIServer reports whether err is the API server refusing the object itself: a 4xx that
// is not a name conflict (AlreadyExists, Conflict), throttling or a missing namespace. Admission
// (Pod Security, a ResourceQuota, a LimitRange, a webhook) and validation answer so.
func refusedByAPIServer(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	switch code := int(status.Status().Code); {
	case code < 400 || code >= 500:
		return false
	case code == http.StatusConflict, code == http.StatusTooManyRequests, code == http.StatusNotFound:
		return false
	}
	return true
}

// apiServerMessage is the API server's own message of a refusal.
func apiServerMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Message != "" {
		return status.Status().Message
	}
	return err.Error()
}

// refusals paces the retries of each replica whose create the API server refused.
type refusals struct {
	mu  sync.Mutex
	by  map[types.UID]refusalState
	now func() time.Time
}

type refusalState struct {
	inARow  int
	retryAt time.Time
}

func newRefusals() *refusals {
	return &refusals{by: map[types.UID]refusalState{}, now: time.Now}
}

// wait is how long the replica's next create waits; 0 when it may go now.
func (r *refusals) wait(uid types.UID) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.by[uid]
	if !ok {
		return 0
	}
	return max(s.retryAt.Sub(r.now()), 0)
}

// refused records a refusal and says how long the next create waits.
func (r *refusals) refused(uid types.UID) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.by[uid]
	delay := refusalRetryMax
	if s.inARow < 6 { // 2^6 s passes the cap
		delay = min(refusalRetry<<s.inARow, refusalRetryMax)
	}
	r.by[uid] = refusalState{inARow: s.inARow + 1, retryAt: r.now().Add(delay)}
	return delay
}

// forget drops a replica whose creates were accepted, or that is gone.
func (r *refusals) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.by, uid)
}
