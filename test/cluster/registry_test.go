package cluster

import (
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// TestConcurrentPushesOverHTTP2Finish: a client pushing an image of several large layers at once
// over HTTP/2, as the Crossplane CLI pushes a package, finishes against the stack's registry.
// go-containerregistry's handler alone deadlocks on it every time (it holds its lock while it reads
// a body), which a minute bounds here only so that a regression fails rather than hangs.
func TestConcurrentPushesOverHTTP2Finish(t *testing.T) {
	srv := httptest.NewUnstartedServer(bodiesReadFirst(registry.New(registry.Logger(log.New(io.Discard, "", 0)))))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	defer srv.CloseClientConnections()
	img, err := random.Image(4<<20, 4) // four 4 MiB layers: more than a connection's flow-control window
	if err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(strings.TrimPrefix(srv.URL, "https://") + "/pushed:v1")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- remote.Write(ref, img, remote.WithTransport(srv.Client().Transport), remote.WithJobs(4))
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the push did not finish in a minute: the registry is deadlocked")
	}
}
