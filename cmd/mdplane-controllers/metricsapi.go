package main

import (
	"flag"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mdplane/mdplane/snapshot/scrape"
	"github.com/mdplane/mdplane/snapshot/serve"
)

// metricsAPI is the aggregated API serving the metrics snapshot (metrics.worker.gpustack.ai/v1).
type metricsAPI struct {
	addr, certDir string
}

func (m *metricsAPI) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.addr, "metrics-api-bind-address", "", "address the metrics snapshot API (metrics.worker.gpustack.ai/v1, behind an APIService) serves HTTPS on; empty disables it")
	fs.StringVar(&m.certDir, "metrics-api-cert-dir", "", "directory holding the metrics snapshot API's tls.crt and tls.key; empty means a self-signed certificate made at start")
}

// drainScraper reads a retiring replica's gauges (1 MiB and 2 s an answer, 5 s the whole read).
func (m *metricsAPI) drainScraper() *scrape.Scraper {
	return scrape.NewWithBounds(scrape.Bounds{Concurrency: scrape.Concurrency, PerFetch: scrape.PerFetch, Whole: 5 * time.Second})
}

// add serves the snapshot API when its address is set.
func (m *metricsAPI) add(mgr manager.Manager) error {
	if m.addr == "" {
		return nil
	}
	h := &serve.Handler{Reader: mgr.GetAPIReader(), Reviews: mgr.GetClient(), Writer: mgr.GetClient(), Proxy: &serve.FrontProxy{Reader: mgr.GetAPIReader()},
		Scraper: scrape.New(), Now: time.Now}
	if err := mgr.Add(&serve.Server{Addr: m.addr, CertDir: m.certDir, Handler: h}); err != nil {
		return fmt.Errorf("adding the metrics snapshot API: %w", err)
	}
	return nil
}
