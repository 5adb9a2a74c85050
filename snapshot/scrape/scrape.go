package scrape

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	workerv1 "github.com/mdplane/mdplane/apis/worker/v1"
	"github.com/mdplane/mdplane/snapshot"
)

// Bounds of one snapshot's scrape.
const (
	Concurrency = 32
	PerFetch    = 2 * time.Second
	Whole       = 8 * time.Second
	MaxBytes    = 1 << 20
)

// Reasons a Pod is not read.
const (
	ReasonNoEndpoint    = "pod has no ready advertised metrics endpoint"
	ReasonInvalidPort   = "pod advertises an invalid metrics port"
	ReasonAbsentPort    = "pod advertises a metrics port absent from its containers"
	ReasonInvalidScheme = "pod advertises an invalid metrics scheme"
)

// metricsPath is the one path a Pod's metrics are read at.
const metricsPath = "/metrics"

// Bounds limit one snapshot's scrape.
type Bounds struct {
	Concurrency     int
	PerFetch, Whole time.Duration
}

// DefaultBounds are the facts' bounds.
var DefaultBounds = Bounds{Concurrency: Concurrency, PerFetch: PerFetch, Whole: Whole}

// Scraper fetches Pods' metrics.
type Scraper struct {
	client *http.Client
	bounds Bounds
}

// New is a scraper dialing the Pods within DefaultBounds.
func New() *Scraper { return NewWithBounds(DefaultBounds) }

// NewWithBounds is New with other bounds.
func NewWithBounds(b Bounds) *Scraper {
	// No proxy: an environment's HTTP(S)_PROXY must not carry Pod reads to a proxy.
	t := &http.Transport{
		Proxy:                 nil,
		MaxIdleConnsPerHost:   1,
		IdleConnTimeout:       30 * time.Second,
		TLSHandshakeTimeout:   b.PerFetch,
		ResponseHeaderTimeout: b.PerFetch,
	}
	return &Scraper{bounds: b, client: &http.Client{Transport: t, Timeout: b.PerFetch,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// Scrape reads every target within the bounds and returns one Read per target, in the targets' order.
func (s *Scraper) Scrape(ctx context.Context, targets []snapshot.Target) []snapshot.Read {
	ctx, cancel := context.WithTimeout(ctx, s.bounds.Whole)
	defer cancel()
	reads := make([]snapshot.Read, len(targets))
	slots := make(chan struct{}, s.bounds.Concurrency)
	var wg sync.WaitGroup
	for i, t := range targets {
		reads[i].Target = t
		url, reason := Endpoint(t.Pod)
		if reason != "" {
			reads[i].Err, reads[i].At = reason, time.Now()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				reads[i].Err, reads[i].At = "metrics request failed: "+ctx.Err().Error(), time.Now()
				return
			}
			reads[i].Families, reads[i].Err = s.fetch(ctx, url)
			reads[i].At = time.Now()
		}()
	}
	wg.Wait()
	return reads
}

// Endpoint is the URL a Pod advertises its metrics at, or the reason it advertises none usable.
func Endpoint(pod *corev1.Pod) (url, reason string) {
	a := pod.Annotations
	if pod.Status.PodIP == "" || a[workerv1.AnnotationScrape] != "true" || a[workerv1.AnnotationScrapePath] != metricsPath {
		return "", ReasonNoEndpoint
	}
	port, err := strconv.Atoi(a[workerv1.AnnotationScrapePort])
	if err != nil || port < 1 || port > 65535 {
		return "", ReasonInvalidPort
	}
	if !declares(pod, int32(port)) {
		return "", ReasonAbsentPort
	}
	scheme := a[workerv1.AnnotationScrapeScheme]
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" && scheme != "https" {
		return "", ReasonInvalidScheme
	}
	return scheme + "://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(port)) + metricsPath, ""
}

// declares reports whether a container or init container of the Pod declares the port.
func declares(pod *corev1.Pod, port int32) bool {
	for _, cs := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for _, c := range cs {
			for _, p := range c.Ports {
				if p.ContainerPort == port {
					return true
				}
			}
		}
	}
	return false
}

// fetch reads and parses one endpoint within PerFetch and MaxBytes.
func (s *Scraper) fetch(ctx context.Context, url string) (snapshot.Families, string) {
	ctx, cancel := context.WithTimeout(ctx, s.bounds.PerFetch)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "metrics request failed: " + err.Error()
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	rsp, err := s.client.Do(req)
	if err != nil {
		return nil, "metrics request failed: " + err.Error()
	}
	defer rsp.Body.Close()
	if rsp.StatusCode != http.StatusOK {
		return nil, fmt.Sprintf("metrics endpoint returned HTTP %d", rsp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(rsp.Body, MaxBytes+1))
	if err != nil {
		return nil, "metrics request failed: " + err.Error()
	}
	if len(body) > MaxBytes {
		return nil, fmt.Sprintf("metrics response exceeds %d bytes", MaxBytes)
	}
	f, err := snapshot.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, err.Error()
	}
	return f, ""
}
