package scrape

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/snapshot"
)

// podAt is a Pod advertising its metrics at addr (host:port), declaring the port on a container.
func podAt(name, addr string) *corev1.Pod {
	host, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			workerv1.AnnotationScrape: "true", workerv1.AnnotationScrapePath: "/metrics", workerv1.AnnotationScrapePort: port, workerv1.AnnotationScrapeScheme: "http"}},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "engine", Ports: []corev1.ContainerPort{{ContainerPort: int32(n)}}}}},
		Status: corev1.PodStatus{PodIP: host},
	}
}

func TestEndpointPreconditions(t *testing.T) {
	cases := []struct {
		name   string
		change func(p *corev1.Pod)
		want   string
	}{
		{name: "a Pod with its annotations, IP and declared port is read over http", change: func(*corev1.Pod) {}, want: "http://10.0.0.1:8000/metrics"},
		{name: "the scheme defaults to http", change: func(p *corev1.Pod) { delete(p.Annotations, workerv1.AnnotationScrapeScheme) }, want: "http://10.0.0.1:8000/metrics"},
		{name: "https is read over https", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrapeScheme] = "https" }, want: "https://10.0.0.1:8000/metrics"},
		{name: "a port declared on an init container counts", change: func(p *corev1.Pod) {
			p.Spec.InitContainers, p.Spec.Containers = p.Spec.Containers, nil
		}, want: "http://10.0.0.1:8000/metrics"},
		{name: "a Pod without an IP has no ready endpoint", change: func(p *corev1.Pod) { p.Status.PodIP = "" }, want: "pod has no ready advertised metrics endpoint"},
		{name: "a Pod not marked for scraping has no ready endpoint", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrape] = "false" }, want: "pod has no ready advertised metrics endpoint"},
		{name: "a path other than /metrics is no ready endpoint", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrapePath] = "/stats" }, want: "pod has no ready advertised metrics endpoint"},
		{name: "a port that is not a number is invalid", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrapePort] = "http" }, want: "pod advertises an invalid metrics port"},
		{name: "a port out of range is invalid", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrapePort] = "70000" }, want: "pod advertises an invalid metrics port"},
		{name: "a port no container declares is absent", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrapePort] = "9000" }, want: "pod advertises a metrics port absent from its containers"},
		{name: "a scheme other than http or https is invalid", change: func(p *corev1.Pod) { p.Annotations[workerv1.AnnotationScrapeScheme] = "grpc" }, want: "pod advertises an invalid metrics scheme"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := podAt("p", "10.0.0.1:8000")
			tc.change(p)
			url, reason := Endpoint(p)
			if got := url + reason; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFetchRules(t *testing.T) {
	big := strings.Repeat("# padding\n", MaxBytes/10+1)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{name: "a 200 response is parsed", handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("vllm:num_requests_running 3\n")) }},
		{name: "any other status names its code", handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) },
			want: "metrics endpoint returned HTTP 503"},
		{name: "a redirect is not followed", handler: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) },
			want: "metrics endpoint returned HTTP 302"},
		{name: "a response over 1 MiB is refused", handler: func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(big)) },
			want: "metrics response exceeds 1048576 bytes"},
		{name: "a response of exactly 1 MiB is read", handler: func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(strings.Repeat("#", MaxBytes-1) + "\n"))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			reads := New().Scrape(context.Background(), []snapshot.Target{{Pod: podAt("p", srv.Listener.Addr().String())}})
			if reads[0].Err != tc.want {
				t.Fatalf("err = %q, want %q", reads[0].Err, tc.want)
			}
			if tc.want == "" && reads[0].Families == nil {
				t.Fatal("no families")
			}
		})
	}
}

func TestTheBoundsAreTheFacts(t *testing.T) {
	if DefaultBounds != (Bounds{Concurrency: 32, PerFetch: 2 * time.Second, Whole: 8 * time.Second}) || MaxBytes != 1048576 {
		t.Fatalf("bounds %+v, %d bytes", DefaultBounds, MaxBytes)
	}
}

func TestTheWholeScrapeEndsAtItsBound(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(150 * time.Millisecond):
			_, _ = w.Write([]byte("x 1\n"))
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	var targets []snapshot.Target
	for range 10 {
		targets = append(targets, snapshot.Target{Pod: podAt("p", srv.Listener.Addr().String())})
	}
	// One at a time, 150 ms each, 400 ms in all: the first two are read, the rest are cut off. Unbounded,
	// the ten would take 1.5 s; a busy machine may stretch the bound, never to that.
	start := time.Now()
	reads := NewWithBounds(Bounds{Concurrency: 1, PerFetch: time.Second, Whole: 400 * time.Millisecond}).Scrape(context.Background(), targets)
	if took := time.Since(start); took >= 1500*time.Millisecond {
		t.Errorf("took %s, as long as an unbounded scrape", took)
	}
	read, cut := 0, 0
	for _, r := range reads {
		switch {
		case r.Err == "":
			read++
		case strings.HasPrefix(r.Err, "metrics request failed: "):
			cut++
		}
	}
	if read < 1 || read > 3 || read+cut != len(targets) {
		t.Errorf("read %d, cut off %d of %d", read, cut, len(targets))
	}
}

func TestAFetchTakesAtMostTwoSeconds(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	// The engine never answers on its own, so only the bound ends the fetch; a busy machine may stretch
	// the wait past it, never to the whole scrape's bound.
	start := time.Now()
	reads := New().Scrape(context.Background(), []snapshot.Target{{Pod: podAt("p", srv.Listener.Addr().String())}})
	if took := time.Since(start); took < PerFetch || took >= DefaultBounds.Whole {
		t.Errorf("took %s, want about %s", took, PerFetch)
	}
	if !strings.HasPrefix(reads[0].Err, "metrics request failed: ") {
		t.Errorf("err = %q", reads[0].Err)
	}
}

func TestAtMost32FetchesRunAtOnce(t *testing.T) {
	var now, peak atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := now.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(100 * time.Millisecond)
		now.Add(-1)
		_, _ = w.Write([]byte("x 1\n"))
	}))
	defer srv.Close()
	var targets []snapshot.Target
	for range 64 {
		targets = append(targets, snapshot.Target{Pod: podAt("p", srv.Listener.Addr().String())})
	}
	reads := New().Scrape(context.Background(), targets)
	for _, r := range reads {
		if r.Err != "" {
			t.Fatal(r.Err)
		}
	}
	if p := peak.Load(); p > Concurrency || p < 2 {
		t.Errorf("peak concurrency %d, want 2..%d", p, Concurrency)
	}
}
