package webhooks

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mdplane/mdplane/apis/validation"
	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
)

// gatedReader answers each Get from its objects as they stand when the read is sent, once the test
// releases that read; it tells the test which reads were sent.
type gatedReader struct {
	mu      sync.Mutex
	objects map[client.ObjectKey]client.Object
	started chan client.ObjectKey
	release chan struct{}
}

func newGatedReader(objs ...client.Object) *gatedReader {
	g := &gatedReader{objects: map[client.ObjectKey]client.Object{}, started: make(chan client.ObjectKey, 10), release: make(chan struct{}, 10)}
	g.set(objs...)
	return g
}

func (g *gatedReader) set(objs ...client.Object) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, o := range objs {
		g.objects[client.ObjectKeyFromObject(o)] = o
	}
}

func (g *gatedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	g.mu.Lock()
	stored, ok := g.objects[key]
	g.mu.Unlock()
	g.started <- key
	select {
	case <-g.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	if !ok || reflect.TypeOf(stored) != reflect.TypeOf(obj) {
		return apierrors.NewNotFound(schema.GroupResource{Resource: reflect.TypeOf(obj).Elem().Name()}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(stored.DeepCopyObject()).Elem())
	return nil
}

// sent collects the keys of the next n reads sent.
func (g *gatedReader) sent(t *testing.T, n int) []string {
	t.Helper()
	var keys []string
	for range n {
		select {
		case k := <-g.started:
			keys = append(keys, k.String())
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d of %d reads were sent: %v", len(keys), n, keys)
		}
	}
	return keys
}

func (g *gatedReader) answer(n int) {
	for range n {
		g.release <- struct{}{}
	}
}

func chainOf(binding, pool, backend string) []client.Object {
	return []client.Object{
		&workerv1.KVCachePoolBinding{ObjectMeta: metav1.ObjectMeta{Name: "dram", Namespace: "team-a"},
			Spec: workerv1.KVCachePoolBindingSpec{PoolRef: workerv1.KVCachePoolReference{Name: pool}}},
		&workerv1.KVCachePool{ObjectMeta: metav1.ObjectMeta{Name: pool}, Spec: workerv1.KVCachePoolSpec{Backends: []string{backend}}},
		&workerv1.KVCacheBackend{ObjectMeta: metav1.ObjectMeta{Name: backend}},
	}
}

// readChain judges the cache chain of a deployment binding "dram" in team-a in the background.
func readChain(r Reader) <-chan *validation.KVCacheChain {
	md := &workerv1.ModelDeployment{ObjectMeta: metav1.ObjectMeta{Name: "qwen", Namespace: "team-a"},
		Spec: workerv1.ModelDeploymentSpec{KVCache: &workerv1.ModelDeploymentKVCache{PoolRef: workerv1.KVCachePoolBindingReference{Name: "dram"}}}}
	out := make(chan *validation.KVCacheChain, 1)
	go func() {
		ch, err := kvCacheChain(context.Background(), r, md)
		if err != nil {
			ch = nil
		}
		out <- ch
	}()
	return out
}

func links(ch *validation.KVCacheChain) []string {
	if ch == nil {
		return nil
	}
	var out []string
	for _, o := range []client.Object{ch.Binding, ch.Pool, ch.Backend} {
		if !reflect.ValueOf(o).IsNil() {
			out = append(out, client.ObjectKeyFromObject(o).String())
		}
	}
	return out
}

func TestACacheChainIsReadSideBySideOnceItsLinksAreKnown(t *testing.T) {
	g := newGatedReader(chainOf("dram", "team-a-dram", "mooncake-dram")...)
	s := &SharedReads{Reader: g}
	whole := []string{"team-a/dram", "/team-a-dram", "/mooncake-dram"}

	// The first review knows no link but the Binding: each is read once the one before answers.
	first := readChain(s)
	for _, key := range whole {
		assert.Equal(t, []string{key}, g.sent(t, 1))
		g.answer(1)
	}
	assert.Equal(t, whole, links(<-first))

	// The next review reads the whole chain at once, and judges what those reads answered.
	second := readChain(s)
	assert.ElementsMatch(t, whole, g.sent(t, 3), "all three links are sent before any answers")
	g.answer(3)
	assert.Equal(t, whole, links(<-second))
}

func TestALinkNamedOtherwiseThanLastTimeIsReadAfterItsBinding(t *testing.T) {
	g := newGatedReader(chainOf("dram", "team-a-dram", "mooncake-dram")...)
	s := &SharedReads{Reader: g}
	first := readChain(s)
	g.sent(t, 1)
	g.answer(1)
	g.sent(t, 1)
	g.answer(1)
	g.sent(t, 1)
	g.answer(1)
	require.Len(t, links(<-first), 3)

	// The Binding was created again on another pool and backend: the guessed links are read and
	// set aside, the links the fresh Binding and pool name are read after them and judged.
	g.set(chainOf("dram", "team-a-vram", "mooncake-vram")...)
	second := readChain(s)
	assert.ElementsMatch(t, []string{"team-a/dram", "/team-a-dram", "/mooncake-dram"}, g.sent(t, 3))
	g.answer(3)
	assert.Equal(t, []string{"/team-a-vram"}, g.sent(t, 1))
	g.answer(1)
	assert.Equal(t, []string{"/mooncake-vram"}, g.sent(t, 1))
	g.answer(1)
	assert.Equal(t, []string{"team-a/dram", "/team-a-vram", "/mooncake-vram"}, links(<-second))
}
