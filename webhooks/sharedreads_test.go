package webhooks

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// heldReader answers each Get with the object's version at the moment the read was sent, once the
// test releases it.
type heldReader struct {
	version atomic.Int64
	sent    atomic.Int64
	release chan struct{}
	started chan client.ObjectKey
}

func newHeldReader() *heldReader {
	return &heldReader{release: make(chan struct{}, 100), started: make(chan client.ObjectKey, 100)}
}

func (h *heldReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	h.sent.Add(1)
	version := h.version.Load()
	h.started <- key
	select {
	case <-h.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	it := obj.(*workerv1.InstanceType)
	it.Name = key.Name
	it.Labels = map[string]string{"version": string(rune('0' + version))}
	return nil
}

// readInBackground runs a Get in the background and returns the version it read.
func readInBackground(t *testing.T, ctx context.Context, s *SharedReads, name string) <-chan string {
	t.Helper()
	out := make(chan string, 1)
	go func() {
		it := &workerv1.InstanceType{}
		if err := s.Get(ctx, client.ObjectKey{Name: name}, it); err != nil {
			out <- "error: " + err.Error()
			return
		}
		out <- it.Labels["version"]
	}()
	return out
}

// awaitSent waits until the reader has been sent one more read.
func (h *heldReader) awaitSent(t *testing.T) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(5 * time.Second):
		t.Fatal("no read was sent")
	}
}

func receive(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
		return ""
	}
}

func TestReviewsShareTheReadSentAfterThemAndNoneBefore(t *testing.T) {
	h := newHeldReader()
	s := &SharedReads{Reader: h}
	ctx := context.Background()
	h.version.Store(1)
	first := readInBackground(t, ctx, s, "a10g")
	h.awaitSent(t) // the first review's read is in flight, answering version 1
	h.version.Store(2)
	var later []<-chan string
	for range 5 {
		later = append(later, readInBackground(t, ctx, s, "a10g"))
	}
	time.Sleep(50 * time.Millisecond) // the five reviews wait behind the read in flight
	assert.Equal(t, int64(1), h.sent.Load(), "reviews arriving during a read do not send their own")
	h.release <- struct{}{}
	assert.Equal(t, "1", receive(t, first))
	h.awaitSent(t) // the next read, sent once the first ended
	h.release <- struct{}{}
	for _, c := range later {
		assert.Equal(t, "2", receive(t, c), "a review arriving after a read was sent never takes its answer")
	}
	assert.Equal(t, int64(2), h.sent.Load(), "six reviews, two reads")
}

func TestDifferentObjectsAreReadApart(t *testing.T) {
	h := newHeldReader()
	s := &SharedReads{Reader: h}
	a, b := readInBackground(t, context.Background(), s, "a10g"), readInBackground(t, context.Background(), s, "h20")
	h.awaitSent(t)
	h.awaitSent(t) // both in flight at once
	h.release <- struct{}{}
	h.release <- struct{}{}
	receive(t, a)
	receive(t, b)
	assert.Equal(t, int64(2), h.sent.Load())
}

func TestAReviewGivingUpLeavesTheSharedReadToTheOthers(t *testing.T) {
	h := newHeldReader()
	s := &SharedReads{Reader: h}
	ctx, cancel := context.WithCancel(context.Background())
	first := readInBackground(t, ctx, s, "a10g")
	h.awaitSent(t)
	cancel()
	assert.Contains(t, receive(t, first), context.Canceled.Error())
	second := readInBackground(t, context.Background(), s, "a10g") // waits for the next read
	h.release <- struct{}{}                                        // the first read ends, unaffected by its review's cancellation
	h.awaitSent(t)
	h.release <- struct{}{}
	assert.Equal(t, "0", receive(t, second))
}

func TestEachReviewGetsItsOwnCopy(t *testing.T) {
	h := newHeldReader()
	s := &SharedReads{Reader: h}
	h.release <- struct{}{}
	h.release <- struct{}{}
	var wg sync.WaitGroup
	got := make([]*workerv1.InstanceType, 2)
	go func() { <-h.started; <-h.started }()
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = &workerv1.InstanceType{}
			require.NoError(t, s.Get(context.Background(), client.ObjectKey{Name: "a10g"}, got[i]))
		}()
	}
	wg.Wait()
	got[0].Labels["version"] = "changed"
	assert.NotEqual(t, "changed", got[1].Labels["version"])
}

// errReader fails every read with a NotFound-like error of its own.
type errReader struct{ err error }

func (e errReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return e.err
}

func TestASharedReadsErrorReachesItsReviews(t *testing.T) {
	want := errors.New("instancetypes.worker.gpustack.ai \"a10g\" not found")
	s := &SharedReads{Reader: errReader{want}}
	err := s.Get(context.Background(), client.ObjectKey{Name: "a10g"}, &workerv1.InstanceType{})
	assert.Equal(t, want, err)
}

func TestAGetWithOptionsIsNotShared(t *testing.T) {
	h := newHeldReader()
	s := &SharedReads{Reader: h}
	h.release <- struct{}{}
	go func() { <-h.started }()
	it := &workerv1.InstanceType{}
	require.NoError(t, s.Get(context.Background(), client.ObjectKey{Name: "a10g"}, it, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}}))
	assert.Equal(t, int64(1), h.sent.Load())
}
