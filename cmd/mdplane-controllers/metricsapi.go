package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/mdplane/mdplane/snapshot/scrape"
	"github.com/mdplane/mdplane/snapshot/serve"
)

// metricsAPI is the aggregated API server: the metrics snapshot (metrics.worker.gpustack.ai/v1),
// the roles' scale (roles.worker.gpustack.ai/v1) and the custom metrics of autoscaling
// (custom.metrics.k8s.io/v1beta2). The install runs it as its own Deployment, mdplane-api, so that
// the groups' discovery, which every namespace deletion in the cluster waits on, does not depend on
// the controllers being up.
type metricsAPI struct {
	addr, certDir string
	certs         certificates
}

// apiServices are the APIServices the server answers for; an issued certificate's CA is written
// into each of them that exists (the custom metrics one comes with package/autoscaling).
var apiServices = []string{"v1.metrics.worker.gpustack.ai", "v1.roles.worker.gpustack.ai", "v1beta2.custom.metrics.k8s.io"}

// defaultAPICertDir is where an issued API certificate is written when --metrics-api-cert-dir is unset.
const defaultAPICertDir = "/tmp/mdplane-api/serving-certs"

func (m *metricsAPI) bindFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.addr, "metrics-api-bind-address", "", "address the aggregated API (metrics.worker.gpustack.ai/v1, roles.worker.gpustack.ai/v1, custom.metrics.k8s.io/v1beta2, behind APIServices) serves HTTPS on; empty disables it")
	fs.StringVar(&m.certDir, "metrics-api-cert-dir", "", "directory holding the aggregated API's tls.crt and tls.key; empty means "+defaultAPICertDir+" with --metrics-api-cert-secret, else a self-signed certificate made at start")
	m.certs = certificates{caName: "mdplane-api-ca", secretFlag: "--metrics-api-cert-secret"}
	for _, name := range apiServices {
		m.certs.injectInto = append(m.certs.injectInto, rotator.WebhookInfo{Name: name, Type: rotator.APIService})
	}
	fs.StringVar(&m.certs.secret, "metrics-api-cert-secret", "", "Secret in --namespace holding the aggregated API's CA and serving certificate this process issues, rotates and writes into the APIServices' caBundle; empty means --metrics-api-cert-dir is provided")
	fs.StringVar(&m.certs.service, "metrics-api-service", "mdplane-metrics-api", "name of the Service the APIServices name; the issued certificate is for <service>.<namespace>.svc")
}

// drainScraper reads a retiring replica's gauges (1 MiB and 2 s an answer, 5 s the whole read).
func (m *metricsAPI) drainScraper() *scrape.Scraper {
	return scrape.NewWithBounds(scrape.Bounds{Concurrency: scrape.Concurrency, PerFetch: scrape.PerFetch, Whole: 5 * time.Second})
}

// add serves the API when its address is set, from an issued certificate when a Secret is named.
func (m *metricsAPI) add(mgr manager.Manager, namespace string) error {
	if m.addr == "" {
		return nil
	}
	dir := m.certDir
	var ready <-chan struct{}
	if m.certs.secret != "" {
		if dir == "" {
			dir = defaultAPICertDir
		}
		m.certs.namespace = namespace
		issued, err := m.certs.manage(mgr, dir)
		if err != nil {
			return fmt.Errorf("setting up the aggregated API's certificate: %w", err)
		}
		ready = issued
	}
	h := &serve.Handler{Reader: mgr.GetAPIReader(), Reviews: mgr.GetClient(), Writer: mgr.GetClient(), Proxy: &serve.FrontProxy{Reader: mgr.GetAPIReader()},
		Scraper: scrape.New(), Now: time.Now}
	server := &serve.Server{Addr: m.addr, CertDir: dir, Ready: ready, Handler: h}
	if err := mgr.Add(server); err != nil {
		return fmt.Errorf("adding the aggregated API: %w", err)
	}
	// Ready once it serves: the Service sends the kube-apiserver's requests to ready replicas only.
	if err := mgr.AddReadyzCheck("aggregated-api", server.Serving); err != nil {
		return fmt.Errorf("adding the aggregated API's readiness check: %w", err)
	}
	return nil
}
